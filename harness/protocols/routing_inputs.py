"""Input checks shared by the routing summaries and their curves: one-dimensional finite
vectors, aligned non-empty arrays, a (base, extra) outcome pair. One error text for each, whichever
function the caller reached.
"""

from __future__ import annotations

import numpy as np

from harness.errors import HarnessError


def checked_vector(name: str, values, allow_inf: bool = False) -> np.ndarray:
    """``values`` as a one-dimensional float array; NaN (and, unless ``allow_inf``, +-inf) is an error."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise HarnessError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = np.isnan(arr) if allow_inf else ~np.isfinite(arr)
    if bad.any():
        raise HarnessError(f"{name} holds {int(bad.sum())} non-finite value(s) (first at index {int(np.argmax(bad))})")
    return arr


def aligned_length(**arrays) -> int:
    """The common length of the named arrays; unequal lengths or no entries are an error."""
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise HarnessError(f"arrays must align, got lengths {lengths}")
    n = next(iter(lengths.values()))
    if n == 0:
        raise HarnessError(f"arrays must be non-empty ({', '.join(lengths)})")
    return n


def checked_pair(base, extra) -> tuple[np.ndarray, np.ndarray]:
    """(base, extra) outcomes as finite, aligned, non-empty float arrays."""
    b = checked_vector("base", base)
    e = checked_vector("extra", extra)
    aligned_length(base=b, extra=e)
    return b, e

