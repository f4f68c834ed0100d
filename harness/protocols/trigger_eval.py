"""Trigger cascades (docs/metrics.md §18): seed 003's staged decision whether to retrieve.

Why its own module: an arm cascade (``cascade_eval``) answers with the arm of the stage it stops
at. A trigger cascade decides between two answers (from memory, or retrieve and answer) in
stages that each buy a signal first: the question alone (free), the no-retrieval answer's
uncertainty (the memory generation G0), a probe retrieval's scores (the retrieval R). After
every stage a question answers from memory, retrieves, or goes on; whatever it paid stays paid
and is never paid twice (a memory answer already generated is free to keep, a probe retrieval's
list is the one RAG reads). These pure functions say what each question decides and pays, so
that the search (``trigger_search``), the protocol and an independent recount agree on one
definition.

Components of the cost: ``memory`` (G0, the no-retrieval generation), ``retrieval`` (R),
``rag`` (G1, the generation over the retrieved units). A stage pays its router family's
components (``FAMILY_PAYS``, the families of ``harness.protocols.cost``); deciding pays the
decision's own (``DECISION_PAYS``); every component at most once per question.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.nway_inputs import checked_outcomes

__all__ = ["COMPONENTS", "FAMILY_PAYS", "DECISION_PAYS", "stage_components", "path_costs", "decide",
           "TriggerRoute", "route_of", "Breakdown", "breakdown"]

COMPONENTS = ("memory", "retrieval", "rag")
# what a stage pays before its router can score (harness.protocols.cost's families); a probe
# family is costed as the upper bound cost.py uses for milliseconds, in every unit
FAMILY_PAYS = {
    "query-only": (), "uncertainty": ("memory",), "retrieval-score": ("retrieval",), "full": ("memory", "retrieval"),
    "post-generation": COMPONENTS, "probe": COMPONENTS, "probe-memory": ("memory",),
}
DECISION_PAYS = (("memory",), ("retrieval", "rag"))  # decision 0: answer from memory; 1: retrieve, answer


def stage_components(families: Sequence[str]) -> np.ndarray:
    """(stages x components) 0/1: what each stage's router family makes it pay."""
    out = np.zeros((len(families), len(COMPONENTS)), dtype=bool)
    for k, family in enumerate(families):
        if family not in FAMILY_PAYS:
            raise ConfigError("protocol.settings.trigger_cascade.stages",
                              f"stage {k}: a router of family {family!r} cannot be a trigger stage (it reads the "
                              f"true outcome, or its cost is not defined); families: {sorted(FAMILY_PAYS)}")
        out[k, [COMPONENTS.index(c) for c in FAMILY_PAYS[family]]] = True
    return out


def _decision_mask() -> np.ndarray:
    out = np.zeros((2, len(COMPONENTS)), dtype=bool)
    for d, comps in enumerate(DECISION_PAYS):
        out[d, [COMPONENTS.index(c) for c in comps]] = True
    return out


def path_costs(components, stages: np.ndarray) -> np.ndarray:
    """cost[q, k, d]: what question q pays when it decides d after stage k: each component paid by
    stages 0..k or by decision d, once. ``components``: (questions x 3) per-question costs of
    memory, retrieval and rag, finite and >= 0."""
    c = np.asarray(components, dtype=float)
    if c.ndim != 2 or c.shape[1] != len(COMPONENTS) or not np.isfinite(c).all() or (c < 0).any():
        raise HarnessError(f"components must be finite, non-negative (questions x {len(COMPONENTS)}) costs, "
                           f"got shape {c.shape}")
    paid_by = np.logical_or.accumulate(stages, axis=0)  # (stages x components): paid once reached
    dec = _decision_mask()
    union = paid_by[:, None, :] | dec[None, :, :]  # (stages x 2 x components)
    return np.einsum("qc,kdc->qkd", c, union.astype(float))


def decide(scores, lows, highs) -> tuple[np.ndarray, np.ndarray]:
    """(stage, decision) per question: at stage k, score >= highs[k] retrieves (1), score <
    lows[k] answers from memory (0), otherwise the question goes on; the last stage must have
    lows == highs (everyone decides there). Scores are finite; a threshold may be +inf."""
    s = np.asarray(scores, dtype=float)
    lo, hi = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
    if s.ndim != 2 or lo.shape != (s.shape[1],) or hi.shape != lo.shape or (lo > hi).any() or lo[-1] != hi[-1]:
        raise HarnessError(f"thresholds must be {s.shape[1]} (low, high) pairs with low <= high and one value at "
                           f"the last stage, got lows {lo.tolist()}, highs {hi.tolist()}")
    if not np.isfinite(s).all():
        raise HarnessError("trigger scores must be finite")
    retrieve = s >= hi[None, :]
    decided = retrieve | (s < lo[None, :])
    stage = np.argmax(decided, axis=1)  # the last stage always decides
    return stage, retrieve[np.arange(len(s)), stage].astype(int)


class TriggerRoute(NamedTuple):
    """What a trigger cascade does on n questions."""

    stage: np.ndarray  # stage index each question decides at
    decision: np.ndarray  # 0: answer from memory, 1: retrieve and answer
    outcome: np.ndarray
    cost: np.ndarray
    mean_outcome: float
    mean_cost: float
    usage: float  # share of questions that retrieve


def route_of(stage, decision, outcomes, costs) -> TriggerRoute:
    """The route of given (stage, decision) pairs: ``outcomes`` (questions x 2: memory, RAG),
    ``costs`` (questions x stages x 2) from ``path_costs``."""
    y = checked_outcomes(outcomes)
    c = np.asarray(costs, dtype=float)
    stage, decision = np.asarray(stage, dtype=int), np.asarray(decision, dtype=int)
    rows = np.arange(len(y))
    outcome, cost = y[rows, decision], c[rows, stage, decision]
    return TriggerRoute(stage, decision, outcome, cost, float(outcome.mean()), float(cost.mean()),
                        float(decision.mean()))


class Breakdown(NamedTuple):
    """Per stage and per component, what a route paid (docs/metrics.md §18's decomposition)."""

    reached: np.ndarray  # per stage: questions that pay it (decide there or later)
    memory: np.ndarray  # per stage: questions that answer from memory there
    retrieve: np.ndarray  # per stage: questions that retrieve there
    stage_cost: np.ndarray  # per stage: the components it paid, summed over those that reach it, / n
    answer_cost: float  # the components the decisions added, / n (stage_cost.sum() + answer_cost = mean cost)
    paid: np.ndarray  # per component: questions that paid it
    probes: int  # questions that paid the retrieval before deciding (a probe retrieval)


def breakdown(stage, decision, components, stages: np.ndarray) -> Breakdown:
    """Where each question's cost went: the components each stage paid first, then the decision's."""
    c = np.asarray(components, dtype=float)
    stage, decision = np.asarray(stage, dtype=int), np.asarray(decision, dtype=int)
    n, k = len(stage), stages.shape[0]
    before = np.logical_or.accumulate(stages, axis=0)
    new_at = stages & ~np.r_[np.zeros((1, stages.shape[1]), dtype=bool), before[:-1]]  # first paid at stage j
    reach = np.arange(k)[None, :] <= stage[:, None]  # (questions x stages)
    stage_cost = (reach.astype(float) * (c @ new_at.T.astype(float))).sum(axis=0) / max(n, 1)
    had = before[stage]  # (questions x components): paid by the stages reached
    added = _decision_mask()[decision] & ~had
    return Breakdown(reach.sum(axis=0), np.bincount(stage[decision == 0], minlength=k),
                     np.bincount(stage[decision == 1], minlength=k), stage_cost,
                     float((c * added).sum() / max(n, 1)), (had | added).sum(axis=0),
                     int(had[:, COMPONENTS.index("retrieval")].sum()))
