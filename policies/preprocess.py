"""Turning a feature frame into a clean float matrix, the same way at fit and at score time.

Why one module: every learned policy must treat bad values identically (docs/metrics.md §4 asks for
median imputation), and the harness reports how many values were imputed. Choices made here:
``+inf``/``-inf`` are treated as missing (inf -> NaN -> fit-time median), and a column that is
entirely missing at fit time is imputed with 0.0 (it then carries no information after
standardisation, instead of being silently dropped, which would shift the column order).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from harness.errors import FeatureError, HarnessError
from harness.retrieval.feature_names import expand, shown


def feature_array(X: pd.DataFrame, features: Sequence[str], owner: str) -> np.ndarray:
    """Columns ``features`` of X as float64, with +-inf turned into NaN.

    A missing column is a FeatureError naming the feature and the policy that asked for it
    (the harness normally catches this earlier via ``RoutingTask.feature_matrix``).
    """
    found, missing = expand(features, X.columns)
    if missing:
        raise FeatureError(f"policy {owner!r} reads feature(s) {missing} that the scored frame lacks "
                           f"(it has: {shown(X.columns)})")
    arr = X.loc[:, found].to_numpy(dtype=float, na_value=np.nan).copy()
    arr[~np.isfinite(arr)] = np.nan
    return arr


def count_missing(arr: np.ndarray) -> int:
    """How many values will be imputed (NaN after inf -> NaN)."""
    return int(np.isnan(arr).sum())


def column_medians(arr: np.ndarray) -> np.ndarray:
    """Median of each column over its finite values; 0.0 for an all-missing column."""
    out = np.zeros(arr.shape[1], dtype=float)
    for j in range(arr.shape[1]):
        col = arr[:, j]
        col = col[~np.isnan(col)]
        if col.size:
            out[j] = float(np.median(col))
    return out


def impute(arr: np.ndarray, medians: np.ndarray) -> np.ndarray:
    """Replace NaN in column j by ``medians[j]`` (returns a new array)."""
    out = arr.copy()
    rows, cols = np.nonzero(np.isnan(out))
    out[rows, cols] = medians[cols]
    return out


def linear_predictor(z: np.ndarray, coef: np.ndarray, intercept) -> np.ndarray:
    """``z @ coef + intercept`` summed column by column in a fixed order, without BLAS.

    Why not ``@``: a BLAS kernel chooses its summation order by CPU (AVX2 vs AVX-512 kernels)
    and by the memory layout of its operands (a coefficient row from sklearn vs the same row
    read back from JSON), so the last bits of a score could depend on both, and a router
    restored from its frozen state would not score exactly like the router that was evaluated.
    Each step here is one correctly rounded elementwise multiply or add, so the result depends
    only on the values: bit-identical for a fitted and a restored router, and on every CPU.

    ``coef`` of shape (d,) gives one score per row; shape (k, d) with ``intercept`` of shape (k,)
    gives a (n, k) matrix (one column per class).
    """
    z = np.asarray(z, dtype=np.float64)
    c = np.asarray(coef, dtype=np.float64)
    if c.ndim == 2:
        b = np.asarray(intercept, dtype=np.float64).reshape(-1)
        cols = [linear_predictor(z, c[k], b[k]) for k in range(c.shape[0])]
        return np.column_stack(cols) if cols else np.zeros((z.shape[0], 0))
    if z.shape[1] != c.shape[0]:
        raise HarnessError(f"linear predictor: {z.shape[1]} feature columns but {c.shape[0]} coefficients")
    acc = np.zeros(z.shape[0], dtype=np.float64)
    for j in range(c.shape[0]):
        acc += z[:, j] * float(c[j])
    return acc + float(intercept)


def delta_classes(delta: np.ndarray) -> np.ndarray:
    """Class of the gain for the classifiers: sign(delta) in {-1, 0, +1}.

    For hit outcomes delta is already in {-1, 0, +1}; for a continuous gain (docs/metrics.md §7) the
    sign is the class (docs/metrics.md is silent there; this is our choice).
    """
    d = np.asarray(delta, dtype=float)
    if not np.all(np.isfinite(d)):
        raise HarnessError(f"delta has {int((~np.isfinite(d)).sum())} non-finite value(s); cannot fit")
    return np.sign(d).astype(int)


def check_fit_inputs(X: pd.DataFrame, delta: np.ndarray, owner: str) -> np.ndarray:
    """delta as float array with one value per row of X (clear error otherwise)."""
    d = np.asarray(delta, dtype=float).reshape(-1)
    if len(d) != len(X):
        raise HarnessError(f"policy {owner!r}: fit got {len(X)} feature rows but {len(d)} delta values")
    if len(d) == 0:
        raise HarnessError(f"policy {owner!r}: fit got no development questions")
    if not np.all(np.isfinite(d)):
        raise HarnessError(f"policy {owner!r}: delta has {int((~np.isfinite(d)).sum())} non-finite value(s)")
    return d


def floats(values) -> list[float]:
    """A JSON-safe list of Python floats."""
    return [float(v) for v in np.asarray(values, dtype=float).reshape(-1)]
