"""Protocol ``cascade``'s computation (docs/metrics.md §17): stop scores cross-fitted as protocol
``arms`` fits its router, thresholds searched per budget on the training half only, every
question judged once by the rule of the other half, and the same references and verdict.

Why it shares ``arms_run``: a cascade is judged exactly as a router is (against the single arms
and their cost-matched mix, paired by document, at the same level), so the halves, the
out-of-fold scores and the comparison are those functions, not copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from harness.arm_set import ArmSetTask
from harness.errors import ConfigError
from harness.protocols.arms_run import BudgetRow, by_question, compare_with_mix, cross_fit, reference_row, share_budget
from harness.protocols.cascade_eval import CascadeRoute, route_of_stops, stop_stages
from harness.protocols.cascade_search import CascadeThresholds, search_thresholds
from harness.protocols.nway_references import Route, oracle_route, route_from_probabilities, single_arms
from harness.retrieval.feature_names import FEATURE_SETS
from policies.cascade_stages import fit_and_score

FEATURES_KEY = "protocol.settings.cascade.features"


@dataclass
class CascadeBudget:
    """One budget: the cascade as a route with its references and verdict (``row``), what each
    stage did (``stages``) and each half's search (``searches[h]`` routed test half h)."""

    row: BudgetRow
    stages: CascadeRoute
    searches: list[CascadeThresholds]


@dataclass
class CascadeRun:
    """Everything the protocol logs for one job."""

    task: ArmSetTask  # the stages' arms in cascade order, their whole (stand-alone) costs
    paid: np.ndarray  # questions x stages: the cumulative cost of stopping at each stage
    available: list[tuple[str, ...]]  # per stage but the last: the features its stop rule reads
    stops: list[Any]  # per stage but the last: its stop rule's config entry
    singles: tuple[np.ndarray, np.ndarray]
    oracle: Route
    half: np.ndarray  # per question: the half (0 or 1) whose test it is
    scores: np.ndarray  # questions x (stages - 1): cross-fitted stop scores
    rows: list[CascadeBudget] = field(default_factory=list)
    level: float = 0.05


def available_features(arms: Sequence[str], columns: Sequence[str], given: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Per stage but the last: the features its stop rule may read. The question's own features
    (the ``query`` set: free, from its text) and, for each stage reached so far, the features
    its arm makes: ``given[arm]`` when set, else the table's features named ``<arm>_...`` or
    ``..._<arm>`` (``bm25_top1``, ``qpp_wig_bm25``)."""
    cols = list(columns)
    unknown = sorted(set(given) - set(arms))
    if unknown:
        raise ConfigError(FEATURES_KEY, f"names arm(s) {unknown} that are not stages ({list(arms)})")
    seen = [c for c in FEATURE_SETS["query"] if c in cols]
    out = []
    for arm in arms[:-1]:
        if arm in given:
            own = given[arm]
            if isinstance(own, str) or not all(isinstance(f, str) for f in own):
                raise ConfigError(f"{FEATURES_KEY}.{arm}", f"expected a list of feature names, got {own!r}")
            missing = [f for f in own if f not in cols]
            if missing:
                raise ConfigError(f"{FEATURES_KEY}.{arm}", f"feature(s) {missing} are not in the table")
        else:
            own = [c for c in cols if c.startswith(f"{arm}_") or c.endswith(f"_{arm}")]
        seen += [f for f in own if f not in seen]
        out.append(tuple(seen))
    return out


def stop_ok(outcomes: np.ndarray, k: int) -> np.ndarray:
    """1 where stage k's arm already has the best outcome of it and every later stage."""
    return (outcomes[:, k] >= outcomes[:, k + 1:].max(axis=1)).astype(int)


def stop_scorer(stops: Sequence[Any], available: Sequence[tuple[str, ...]]):
    """``fit_score(train, test, seed)`` for ``arms_run.cross_fit``: each stage's stop rule fitted on
    ``train`` (its own label, its available features) scoring ``test``, one column per stage."""
    def fit_score(train: ArmSetTask, test: ArmSetTask, seed: int) -> np.ndarray:
        return np.column_stack([
            fit_and_score(spec, train.arms[k], available[k], (train.features, stop_ok(train.outcomes, k), train.groups),
                          test.features, seed)
            for k, spec in enumerate(stops)])
    return fit_score


def cascade_budget(task: ArmSetTask, paid: np.ndarray, halves, oof, test_scores, share: float,
                   levels: int) -> CascadeBudget:
    """One budget: per half, thresholds searched on the training half's out-of-fold stop scores
    (its outcomes, its costs paid) and applied to the test half; then the references."""
    budget = share_budget(task, share)
    stop = np.zeros(task.n, dtype=int)
    over, searches = [], []
    for h, (train, test) in enumerate((halves, halves[::-1])):
        found = search_thresholds(oof[h], task.outcomes[train], paid[train], budget, levels=levels)
        stop[test] = stop_stages(test_scores[h], found.thresholds)
        over.append(float(paid[test, stop[test]].mean()) - budget)
        searches.append(found)
    probs = np.zeros(task.outcomes.shape)
    probs[np.arange(task.n), stop] = 1.0
    route = route_from_probabilities(probs, task.outcomes, paid)
    return CascadeBudget(reference_row(task, share, budget, route, over), route_of_stops(stop, task.outcomes, paid),
                         searches)


def run_cascade(task: ArmSetTask, paid: np.ndarray, stops: Sequence[Any], available: Sequence[tuple[str, ...]], halves,
                shares, *, alpha: float, n_perm: int, seed: int, levels: int) -> CascadeRun:
    """The whole protocol: cross-fitted stop scores, one row per budget, comparisons with the
    cost-matched mix at alpha / budgets (as protocol ``arms``)."""
    oof, test_scores = cross_fit(stop_scorer(stops, available), task, halves, seed)
    half = np.zeros(task.n, dtype=int)  # rule 0 (fitted on halves[0]) routes halves[1], rule 1 halves[0]
    half[halves[0]] = 1
    out = CascadeRun(task, paid, list(available), list(stops), single_arms(task.outcomes, task.costs),
                     oracle_route(task.outcomes, task.costs), half, by_question(halves, test_scores),
                     level=alpha / max(1, len(shares)))
    for share in shares:
        row = cascade_budget(task, paid, halves, oof, test_scores, float(share), levels)
        compare_with_mix(row.row, task, out.level, n_perm, seed, [halves[1], halves[0]], who="cascade")
        out.rows.append(row)
    return out
