"""Value checks a type cannot express: a number in a range, a ``???`` left unset.

Each raises one ConfigError naming the key; ``harness.config.validation`` runs them in order.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from harness.config.limits import MAX_ABS_NUMBER
from harness.errors import ConfigError


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _wanted(low: float | None, high: float | None, low_open: bool, high_open: bool, integer: bool) -> str:
    """The interval ``_in_range`` asks for, as its message says it ("in (0, 1]", ">= 2")."""

    def fmt(v: float) -> str:
        return str(int(v)) if integer and float(v).is_integer() else f"{v:g}"

    lo = "" if low is None else ("(" if low_open else "[") + fmt(low)
    hi = "" if high is None else fmt(high) + (")" if high_open else "]")
    if low is not None and high is not None:
        return f"in {lo}, {hi}"
    if low is not None:
        return f"{'>' if low_open else '>='} {fmt(low)}"
    return f"{'<' if high_open else '<='} {fmt(high)}"


def _within(value: Any, low: float | None, high: float | None, low_open: bool, high_open: bool,
            integer: bool) -> bool:
    """Whether ``value`` is a finite number (an integer if asked) inside the interval."""
    ok = _is_number(value) and math.isfinite(value) and (not integer or float(value).is_integer())
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    return ok


def _in_range(key: str, value: Any, low: float | None = None, high: float | None = None, *,
              low_open: bool = False, high_open: bool = False, integer: bool = False) -> None:
    """ConfigError naming ``key`` unless ``value`` is a finite number (an integer if asked) in the
    interval given by ``low``/``high`` (``*_open``: that end excluded). NaN and inf always fail."""
    want = _wanted(low, high, low_open, high_open, integer)
    what = "an integer" if integer else "a finite number"
    if not _within(value, low, high, low_open, high_open, integer):
        raise ConfigError(key, f"must be {what} {want}, got {value!r}")


def _check_missing(cfg: Any, prefix: str = "") -> None:
    """A ``???`` value left anywhere (e.g. ``policy=plugin`` without ``policy.plugin``)."""
    if isinstance(cfg, DictConfig):
        items = [(str(k), k) for k in cfg.keys()]
    elif isinstance(cfg, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(cfg))]
    else:
        return
    for name, k in items:
        if prefix == "" and name == "hydra":
            continue
        key = f"{prefix}{name}" if name.startswith("[") or not prefix else f"{prefix}.{name}"
        if OmegaConf.is_missing(cfg, k):
            raise ConfigError(key, f"is required but not set (???); set {key}=...")
        node = cfg._get_node(k)
        if isinstance(node, (DictConfig, ListConfig)):
            _check_missing(node, key)



def _check_numbers(cfg: Any, prefix: str = "") -> None:
    """The net under every range check: each number anywhere in the job config (plugin
    parameters and free-form groups too; the ``hydra`` node aside) finite and at most
    MAX_ABS_NUMBER in magnitude, so no computation can overflow to inf or NaN."""
    if isinstance(cfg, DictConfig):
        items = [(str(k), k) for k in cfg.keys() if not (prefix == "" and str(k) == "hydra")]
    elif isinstance(cfg, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(cfg))]
    else:
        return
    for name, k in items:
        key = f"{prefix}{name}" if name.startswith("[") or not prefix else f"{prefix}.{name}"
        if OmegaConf.is_missing(cfg, k) or OmegaConf.is_interpolation(cfg, k):
            continue
        value = cfg[k]
        if isinstance(value, (DictConfig, ListConfig)):
            _check_numbers(value, key)
        elif _is_number(value) and not (math.isfinite(value) and abs(value) <= MAX_ABS_NUMBER):
            raise ConfigError(key, f"must be a finite number of magnitude at most {MAX_ABS_NUMBER:g} "
                                   f"(docs/sweeps.md, Numbers), got {value!r}")


def _check_booleans(cfg: Any, keys: Sequence[str]) -> None:
    """The schema's switches are true or false: OmegaConf would take ``verbose=2`` or
    ``tracking.log_plots=yes`` as true, so they are typed ``Any`` and checked here."""
    for key in keys:
        value = OmegaConf.select(cfg, key, default=None)
        if not isinstance(value, bool):
            raise ConfigError(key, f"must be true or false, got {value!r}")
