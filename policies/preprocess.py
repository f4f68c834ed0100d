"""Turning a feature frame into a clean float matrix, the same way at fit and at score time.

Why one module: every learned policy must treat bad values identically (SPEC section 4 asks for
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


def feature_array(X: pd.DataFrame, features: Sequence[str], owner: str) -> np.ndarray:
    """Columns ``features`` of X as float64, with +-inf turned into NaN.

    A missing column is a FeatureError naming the feature and the policy that asked for it
    (the harness normally catches this earlier via ``RoutingTask.feature_matrix``).
    """
    missing = [f for f in features if f not in X.columns]
    if missing:
        raise FeatureError(
            f"policy {owner!r} reads feature(s) {missing} that the scored frame lacks "
            f"(it has: {sorted(map(str, X.columns))})"
        )
    arr = X.loc[:, list(features)].to_numpy(dtype=float, na_value=np.nan).copy()
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


def delta_classes(delta: np.ndarray) -> np.ndarray:
    """Class of the gain for the classifiers: sign(delta) in {-1, 0, +1}.

    For hit outcomes delta is already in {-1, 0, +1}; for a continuous gain (SPEC section 7) the
    sign is the class (the SPEC is silent there; this is our choice).
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
