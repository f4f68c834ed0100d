"""Cascades (docs/metrics.md §17): stages in a fixed order, a stop score after each stage but the
last, and what a threshold vector makes every question do and pay.

Why its own module: a cascade is not a router. A router reads features, then pays one arm; a
cascade pays each stage it reaches (its arm's work, which also makes that stage's features
available) and stops at the first stage whose score clears its threshold. These pure functions
say exactly which stage each question stops at and what it pays, so that the search
(``cascade_search``), the protocol and an independent recount agree on one definition.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.nway_inputs import checked_outcomes, checked_table

__all__ = ["CascadeRoute", "checked_cascade", "incremental_costs", "stop_stages", "route_of_stops", "evaluate"]

PAID_TOL = 1e-9  # relative float noise allowed when a later stage's cumulative cost looks lower


class CascadeRoute(NamedTuple):
    """What a cascade does on n questions with K stages."""

    stop: np.ndarray  # stage index (0-based) each question stops at
    outcome: np.ndarray  # per question: the outcome of its stop stage's arm
    cost: np.ndarray  # per question: the cumulative cost of its stop stage (every stage reached)
    mean_outcome: float
    mean_cost: float
    stops: np.ndarray  # per stage: questions that stop there
    reached: np.ndarray  # per stage: questions that pay it (stop there or later)
    stage_cost: np.ndarray  # per stage: the stage's own cost summed over those that reach it, / n


def checked_cascade(scores, outcomes, paid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, outcomes, paid) as aligned arrays: outcomes and paid (questions x K stages, K >=
    2), scores (questions x K - 1: one stop score per stage but the last; +-inf allowed, NaN not).
    ``paid[q, k]`` is what question q has paid when it stops at stage k: finite, >= 0 and
    non-decreasing in k (a question that goes on never pays less)."""
    y = checked_outcomes(outcomes)
    c = checked_table("paid", paid)
    if c.shape != y.shape or y.shape[1] < 2:
        raise HarnessError(f"paid must have the outcomes' shape (questions x stages, at least 2 stages), got "
                           f"{c.shape} and {y.shape}")
    if (c < 0).any():
        raise HarnessError(f"paid must be non-negative, got minimum {c.min()}")
    drop = np.diff(c, axis=1) < -PAID_TOL * np.maximum(1.0, np.abs(c[:, 1:]))
    if drop.any():
        q, k = np.argwhere(drop)[0]
        raise HarnessError(f"paid must not decrease along the stages (question {q}: stage {k + 1} costs "
                           f"{c[q, k + 1]:g} < stage {k}'s {c[q, k]:g})")
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2 or s.shape != (y.shape[0], y.shape[1] - 1):
        raise HarnessError(f"scores must be questions x (stages - 1) = {(y.shape[0], y.shape[1] - 1)}, got {s.shape}")
    bad = np.isnan(s) | (s == np.inf)
    if bad.any():
        raise HarnessError(f"scores hold {int(bad.sum())} NaN or +inf value(s); a stop score must be finite (or -inf: "
                           "never clears a finite threshold)")
    return s, y, c


def incremental_costs(arm_costs, contains: Sequence[int | None]) -> np.ndarray:
    """Each stage's own cost per question from the arms' whole costs (questions x K): stage k
    costs its arm's cost, less the cost of the earlier stage ``contains[k]`` whose work the arm
    reuses (e.g. keep = dense + rerank reuses dense: after dense it adds the rerank only),
    clipped at 0; ``contains[k]`` None: the arm's whole cost. The cumulative sum along the
    stages is ``paid``."""
    c = checked_table("arm_costs", arm_costs)
    if len(contains) != c.shape[1]:
        raise HarnessError(f"contains must name one entry per stage ({c.shape[1]}), got {len(contains)}")
    own = c.copy()
    for k, j in enumerate(contains):
        if j is None:
            continue
        if not 0 <= int(j) < k:
            raise ConfigError("contains", f"stage {k} can only reuse an earlier stage, got stage {j}")
        own[:, k] = np.maximum(0.0, c[:, k] - c[:, int(j)])
    return own


def stop_stages(scores, thresholds) -> np.ndarray:
    """Stage index per question: the first stage k < K - 1 whose score >= thresholds[k], else the
    last stage (it always stops). A threshold of +inf stops nobody there (stop scores are never
    +inf), -inf stops everybody."""
    s = np.asarray(scores, dtype=float)
    t = np.asarray(thresholds, dtype=float)
    if s.ndim != 2 or t.shape != (s.shape[1],) or np.isnan(t).any():
        raise HarnessError(f"thresholds must be {s.shape[1]} numbers (one per stage but the last), got {t.tolist()}")
    stop = np.c_[s >= t[None, :], np.ones((s.shape[0], 1), dtype=bool)]
    return np.argmax(stop, axis=1)


def route_of_stops(stop, outcomes, paid) -> CascadeRoute:
    """The ``CascadeRoute`` of given stop stages (e.g. each half's rule on its own questions)."""
    y, c = checked_outcomes(outcomes), checked_table("paid", paid)
    n, k = y.shape
    stop = np.asarray(stop, dtype=int)
    if stop.shape != (n,) or (stop < 0).any() or (stop >= k).any():
        raise HarnessError(f"stop must be one stage index in [0, {k}) per question")
    rows = np.arange(n)
    outcome, cost = y[rows, stop], c[rows, stop]
    stops = np.bincount(stop, minlength=k)
    reached = n - np.r_[0, np.cumsum(stops)[:-1]]
    own = np.diff(np.c_[np.zeros(n), c], axis=1)  # each stage's own cost
    paid_there = np.where(np.arange(k)[None, :] <= stop[:, None], own, 0.0)
    return CascadeRoute(stop, outcome, cost, float(outcome.mean()), float(cost.mean()), stops, reached,
                        paid_there.sum(axis=0) / n)


def evaluate(scores, outcomes, paid, thresholds) -> CascadeRoute:
    """What the threshold vector makes every question do: its stop stage, outcome and cost, and
    per stage the questions that stop there, reach it, and its cost share of the mean cost."""
    s, y, c = checked_cascade(scores, outcomes, paid)
    return route_of_stops(stop_stages(s, thresholds), y, c)
