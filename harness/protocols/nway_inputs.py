"""Input checks shared by the n-way routing modules (docs/metrics.md §14): a (questions x arms)
table of scores, outcomes or costs, a cost table broadcast from one row, a budget. One error
text for each, whichever n-way function the caller reached.
"""

from __future__ import annotations

import math

import numpy as np

from harness.errors import ConfigError, HarnessError

SUM_TOL = 1e-9  # relative float noise allowed when a sum of costs is compared with budget * n


def checked_table(name: str, values, *, allow_inf: bool = False) -> np.ndarray:
    """``values`` as a float (questions x arms) array with at least one question and one arm;
    NaN (and, unless ``allow_inf``, +-inf) is an error naming ``name``."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise HarnessError(f"{name} must be a (questions x arms) table with at least one of each, got shape {arr.shape}")
    bad = np.isnan(arr) if allow_inf else ~np.isfinite(arr)
    if bad.any():
        q, j = np.argwhere(bad)[0]
        raise HarnessError(f"{name} holds {int(bad.sum())} non-finite value(s) (first at question {q}, arm {j})")
    return arr


def checked_outcomes(outcomes) -> np.ndarray:
    """Outcomes (0/1 hits or graded quality) as a (questions x arms) table inside [0, 1]."""
    y = checked_table("outcomes", outcomes)
    if (y < 0).any() or (y > 1).any():
        raise HarnessError(f"outcomes must lie in [0, 1], got range [{y.min()}, {y.max()}]")
    return y


def checked_costs(costs, shape: tuple[int, int]) -> np.ndarray:
    """Costs as a (questions x arms) table of ``shape``: a per-question table, or one row of
    per-arm unit costs broadcast to every question. Finite and non-negative."""
    c = np.asarray(costs, dtype=float)
    if c.ndim == 1:
        c = c[None, :]
    if c.ndim != 2 or c.shape[1] != shape[1] or c.shape[0] not in (1, shape[0]):
        raise HarnessError(
            f"costs must be one row of {shape[1]} per-arm costs or a {shape[0]} x {shape[1]} table, got shape {c.shape}"
        )
    c = checked_table("costs", c)
    if (c < 0).any():
        raise HarnessError(f"costs must be non-negative, got minimum {c.min()}")
    return np.broadcast_to(c, shape).copy()


def checked_pair_tables(outcomes, costs) -> tuple[np.ndarray, np.ndarray]:
    """(outcomes, costs) as aligned (questions x arms) tables."""
    y = checked_outcomes(outcomes)
    return y, checked_costs(costs, y.shape)


def checked_lambda(lam) -> float:
    """A cost penalty lambda: any float but NaN (+-inf are the limits of the rule)."""
    value = float(lam)
    if math.isnan(value):
        raise ConfigError("lam", "must be a number, got NaN")
    return value


def checked_budget(budget) -> float:
    """A mean-cost budget: a finite, non-negative number."""
    value = float(budget)
    if not math.isfinite(value) or value < 0:
        raise ConfigError("budget", f"must be a finite non-negative mean cost, got {budget!r}")
    return value


def sum_tolerance(total: float) -> float:
    """Float noise allowed when a sum of per-question costs is compared with budget * n."""
    return SUM_TOL * max(1.0, abs(total))
