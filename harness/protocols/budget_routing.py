"""Protocol B's routing summaries per split: APGR, CPT(50%), CPT(80%) and AIQ of the policy's
exact and deployable curves, random and the oracle (docs/protocols.md, "Routing summaries").

Why apart: the split loop (``harness.protocols.budget_splits``) calls them once per test half;
they read the half and the scores, never the protocol's settings.
"""

from __future__ import annotations

import math

import numpy as np

from harness.protocols.budget_rules import exact_frontier_curve
from harness.protocols.routing_curves import apgr, cpt, expected_gains, pgr_curve, pgr_summaries
from harness.protocols.routing_summaries import N_RANDOM_ORDERINGS, GapCheck, aiq, gap_check, random_ordering_reference
from harness.task import RoutingTask

ROUTING_STATS = ("apgr", "cpt50", "cpt80", "aiq")
ROUTING_CURVES = ("exact", "deployable", "random", "oracle")


def cost_axis(test: RoutingTask) -> tuple[float, np.ndarray, str]:
    """(mean base cost per question, what the extra arm adds per question, unit) for AIQ; with
    no measured costs (synthetic table) the cost is the usage itself (base 0, extra 1 each)."""
    if test.base_cost is None or test.extra_cost is None:
        return 0.0, np.ones(test.n), "usage"
    return float(np.mean(test.base_cost)), np.asarray(test.extra_cost, dtype=float), test.cost_unit


def split_gap(test: RoutingTask, min_discordant: int, alpha: float) -> GapCheck:
    """Whether the test half's base-to-extra gap is told from zero (``gap_check``: discordant
    count, positive net gap, McNemar or document sign-flip p < alpha)."""
    return gap_check(test.base, test.extra, min_discordant, alpha, groups=test.groups)


def exact_routing_summaries(scores, test: RoutingTask, gap: GapCheck) -> dict:
    """APGR, CPT(50%), CPT(80%) (``pgr_summaries``, exact curve with ties at their
    expectation; NaN unless ``gap.ok``) and AIQ over the (expected cost, outcome) points of
    every k = 0..n."""
    base_cost, extra_cost, _ = cost_axis(test)
    r = pgr_summaries(scores, test.base, test.extra)
    _, outcome = exact_frontier_curve(scores, test.base, test.delta)
    costs = base_cost + expected_gains(scores, extra_cost) / test.n
    ok = bool(gap.ok) and not math.isnan(r["apgr"])
    reason = gap.reason if not gap.ok else ("" if ok else "net gap is not positive; PGR/APGR/CPT not defined")
    pgr = {k: (r[k] if ok else math.nan) for k in ("apgr", "cpt50", "cpt80")}
    return pgr | {"aiq": aiq(costs, outcome), "defined": ok, "reason": reason}


def random_routing_summaries(test: RoutingTask, gap: GapCheck, seed, n_orders: int = N_RANDOM_ORDERINGS) -> dict:
    """Random's row: APGR of the straight line (random's exact expectation, 0.5), AIQ and
    CPT(50%) / CPT(80%) the mean over ``n_orders`` seeded random orderings of the test half
    (``random_ordering_reference`` with the same cost axis as the policy's AIQ; CPT NaN unless
    ``gap.ok``). ``seed``: ``[run seed, split index]`` in the protocol (docs/protocols.md)."""
    base_cost, extra_cost, _ = cost_axis(test)
    line = exact_routing_summaries(np.zeros(test.n), test, gap)
    ref = random_ordering_reference(test.base, test.extra, seed, extra_cost=extra_cost, base_cost=base_cost,
                                    n_orders=n_orders)
    ok = line["defined"]
    return line | {"aiq": ref["aiq"], "cpt50": ref["cpt50"] if ok else math.nan,
                   "cpt80": ref["cpt80"] if ok else math.nan}


def points_routing_summaries(points, test: RoutingTask, defined: bool) -> dict:
    """The same summaries over a handful of operating points (usage, outcome, expected added
    cost) such as the deployable frontier's budgets, with always-base and always-extra as the
    ends; points are joined by straight lines (a seeded coin between two thresholds)."""
    base_cost, extra_cost, _ = cost_axis(test)
    b, e = float(test.base.mean()), float(test.extra.mean())
    usage = np.r_[0.0, [p[0] for p in points], 1.0]
    outcome = np.r_[b, [p[1] for p in points], e]
    costs = base_cost + np.r_[0.0, [p[2] for p in points], float(extra_cost.mean())]
    out = {"apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan, "aiq": aiq(costs, outcome)}
    if defined:
        pgr = pgr_curve(usage, outcome, b, e)
        out.update(apgr=apgr(usage, pgr), cpt50=cpt(usage, pgr, 0.5), cpt80=cpt(usage, pgr, 0.8))
    return out
