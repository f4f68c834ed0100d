"""How tests compare numbers recorded on one machine with numbers computed on another.

Why: BLAS kernels (OpenBLAS picks Haswell, SkylakeX, ... by CPU) sum in different orders, so a
float that went through a matrix product can differ in its last bits between an AVX2 and an
AVX-512 machine. Within one machine the harness is exact (tests of that compare with ``==``);
a value recorded earlier, possibly elsewhere, is compared here:

- integers, booleans, strings and None exactly (counts, decisions, names, ranks);
- floats within ``RTOL`` relative or ``ATOL`` absolute (docs/reproducibility.md: "reproducible across
  machines" promise), NaN equal to NaN.

A recorded value that differs by more than this is a real change, not a kernel's rounding.
"""

from __future__ import annotations

import math
from typing import Any

#: relative tolerance for a float recorded on another CPU (a few thousand ulps at 1.0)
RTOL = 1e-12
#: absolute tolerance, for values near 0 (differences of nearly equal sums)
ATOL = 1e-12


def close(a: float, b: float, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """True when ``a`` and ``b`` agree within the cross-CPU tolerance (NaN == NaN)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def differences(got: Any, expected: Any, path: str = "$") -> list[str]:
    """Every place where ``got`` differs from ``expected`` beyond the tolerance, as readable
    lines (empty when they agree). Containers must have the same keys and lengths; a float
    never stands in for an int or the other way round (counts stay integers)."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected a mapping, got {type(got).__name__}"]
        out = []
        if set(got) != set(expected):
            out.append(f"{path}: keys differ: missing {sorted(set(expected) - set(got))}, "
                       f"extra {sorted(set(got) - set(expected))}")
        for key in sorted(set(got) & set(expected), key=str):
            out += differences(got[key], expected[key], f"{path}.{key}")
        return out
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return [f"{path}: expected a sequence of {len(expected)}, got {got!r:.80}"]
        out = []
        for i, (g, e) in enumerate(zip(got, expected)):
            out += differences(g, e, f"{path}[{i}]")
        return out
    if isinstance(expected, float) and not isinstance(expected, bool):
        if not isinstance(got, float) or isinstance(got, bool):
            return [f"{path}: expected a float, got {got!r}"]
        return [] if close(got, expected) else [f"{path}: {got!r} vs recorded {expected!r}"]
    if type(got) is not type(expected) or got != expected:
        return [f"{path}: {got!r} vs recorded {expected!r}"]
    return []


def assert_same_numbers(got: Any, expected: Any, what: str = "value") -> None:
    """Assert ``got`` equals the recorded ``expected`` (exact, floats within tolerance)."""
    diff = differences(got, expected)
    assert not diff, f"{what} differs from the recorded one in {len(diff)} place(s): " + "; ".join(diff[:8])
