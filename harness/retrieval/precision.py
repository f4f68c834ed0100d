"""CPU precision for model forward passes: ``fp32`` (default) | ``bf16`` | ``auto``.

Reproducible by default: every config and code default is ``fp32``, so two machines build the
same outcome table. bfloat16 autocast is an opt-in speed option (``arms.precision=bf16``): it
roughly halves forward time on CPUs with native bf16 (AVX512-BF16 or AMX) but is *slower* than
fp32 where bf16 is emulated (plain AVX2), and it moves scores enough to reorder near-ties (see
docs/costs.md for the measured drift). ``auto`` is an explicit opt-in
that picks bf16 only when the CPU reports native support, so its result is machine-dependent.
The resolved precision is part of the outcome-table cache key and recorded in its info.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator

from harness.errors import ConfigError

PRECISIONS = ("auto", "bf16", "fp32")
DEFAULT_PRECISION = "fp32"


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when the CPU exposes AVX512-BF16 or AMX-BF16 (read from /proc/cpuinfo, then torch)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
        if "avx512_bf16" in flags or "amx_bf16" in flags:
            return True
    except OSError:
        pass
    try:
        import torch

        return "AMX" in str(torch.backends.cpu.get_cpu_capability()).upper()
    except Exception:  # pragma: no cover - torch missing or too old
        return False


def resolve_precision(value: str, key: str = "precision") -> str:
    """``auto`` -> ``bf16`` if the CPU has native bf16 else ``fp32``; anything else is checked."""
    v = str(value).lower()
    if v not in PRECISIONS:
        raise ConfigError(key, f"must be one of {PRECISIONS}, got {value!r}")
    if v == "auto":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return v


DEVICES = ("cpu", "cuda", "mps", "auto")


def resolve_device(value: str, key: str = "device") -> str:
    """``cpu`` (the default everywhere: the same numbers on every machine), ``cuda``, ``mps``,
    or ``auto`` (cuda, else mps, else cpu: machine-dependent, so opt-in). A device this machine
    lacks is a ConfigError naming ``key``."""
    v = str(value).lower()
    if v not in DEVICES:
        raise ConfigError(key, f"must be one of {DEVICES}, got {value!r}")
    if v == "cpu":
        return v
    import torch

    has = {"cuda": torch.cuda.is_available(),
           "mps": bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()}
    if v == "auto":
        return "cuda" if has["cuda"] else "mps" if has["mps"] else "cpu"
    if not has[v]:
        raise ConfigError(key, f"device {v!r} is not available on this machine (torch sees no {v}); use cpu or auto")
    return v


@contextlib.contextmanager
def autocast(precision: str, device: str = "cpu") -> Iterator[None]:
    """Inference mode plus, for ``bf16``, bfloat16 autocast on ``device``."""
    import torch

    with torch.inference_mode():
        if precision == "bf16":
            with torch.autocast("cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16):
                yield
        else:
            yield
