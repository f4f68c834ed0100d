"""AIQ, APGR and CPT over n arms: hand-computed cases, AIQ against brute-force numerical
integration of the best mix of operating points, and two arms with unit costs (0, 1) against
the binary protocol's own summaries (exact curve and deployable points) bit for bit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError, HarnessError
from harness.protocols import nway_summaries as ns
from harness.protocols.budget_routing import exact_routing_summaries, points_routing_summaries, split_gap
from harness.protocols.budget_rules import exact_frontier_curve
from harness.protocols.routing_curves import expected_gains, pgr_summaries
from harness.task import RoutingTask


def test_reference_arms_hand_case():
    # cheapest: arms 0 and 3 (cost 1), the better is 0; best: arms 1 and 2 (0.7), the cheaper is 2
    assert ns.reference_arms([0.5, 0.7, 0.7, 0.4], [1.0, 3.0, 2.0, 1.0]) == (0, 2)
    assert ns.reference_arms([0.5, 0.5], [1.0, 1.0]) == (0, 0)


@pytest.mark.parametrize("upper, expected", [("best", 0.45), ("costliest", 0.525)])
def test_nway_aiq_hand_case(upper, expected):
    # router points (0, 0.2), (1, 0.5), (2, 0.6): area 0.35 + 0.55 over [0, 2]; up to the
    # costliest arm (cost 4) the hull stays flat at 0.6: (0.9 + 1.2) / 4
    got = ns.nway_aiq([0.0, 1.0, 2.0], [0.2, 0.5, 0.6], [0.2, 0.6, 0.5], [0.0, 2.0, 4.0], upper=upper)
    assert got == pytest.approx(expected, abs=1e-15)


def _hull_height(pc, pq, x):
    """Best expected outcome of any mix of two operating points with expected cost <= x."""
    best = max((q for c, q in zip(pc, pq) if c <= x), default=-np.inf)
    for i, j in itertools.permutations(range(len(pc)), 2):
        if pc[i] < x <= pc[j]:
            w = (pc[j] - x) / (pc[j] - pc[i])
            best = max(best, w * pq[i] + (1 - w) * pq[j])
    return best


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("upper", ["best", "costliest"])
def test_nway_aiq_equals_brute_force_integration(seed, upper):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 6))
    arm_c, arm_y = rng.random(m) * 10, rng.random(m)
    arm_y[np.argmax(arm_c)] = 1.0 if seed % 2 else arm_y[np.argmax(arm_c)]  # half the seeds: the costliest is best
    pc = np.r_[arm_c.min() - rng.random(), rng.random(6) * 12]
    pq = rng.random(len(pc))
    weak, strong = ns.reference_arms(arm_y, arm_c)
    lo, hi = arm_c.min(), (arm_c[strong] if upper == "best" else arm_c.max())
    if hi == lo:  # the best arm is the cheapest: the hull's height there
        brute = _hull_height(pc, pq, lo)
    else:
        grid = np.linspace(lo, hi, 20001)
        heights = np.array([_hull_height(pc, pq, x) for x in grid])
        brute = float(np.trapezoid(heights, grid) / (hi - lo))
    assert ns.nway_aiq(pc, pq, arm_y, arm_c, upper=upper) == pytest.approx(brute, abs=1e-6)


def _binary_task(seed, n=80):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, n).astype(float)
    extra = np.where(rng.random(n) < 0.6, 1.0, base)  # extra beats base on net
    task = RoutingTask(np.array([f"q{i}" for i in range(n)]), np.array([f"d{i // 2}" for i in range(n)]), base, extra,
                       pd.DataFrame(index=range(n)))
    scores = np.round(rng.normal(size=n) + (extra - base), 1)
    return task, scores


@pytest.mark.parametrize("seed", range(12))
def test_two_arms_exact_curve_reproduce_the_binary_summaries(seed):
    task, scores = _binary_task(seed)
    n = task.n
    costs = expected_gains(scores, np.ones(n)) / n  # the binary cost axis without measured costs
    _, outcome = exact_frontier_curve(scores, task.base, task.delta)
    arms_y, arms_c = [float(task.base.mean()), float(task.extra.mean())], [0.0, 1.0]
    binary = exact_routing_summaries(scores, task, split_gap(task, 0, 0.999))
    assert ns.nway_aiq(costs, outcome, arms_y, arms_c, upper="costliest") == binary["aiq"]
    assert ns.nway_aiq(costs, outcome, arms_y, arms_c, upper="best") == binary["aiq"]
    got = ns.nway_pgr_summaries(costs, outcome, arms_y, arms_c)
    ref = pgr_summaries(scores, task.base, task.extra)
    assert got["apgr"] == pytest.approx(ref["apgr"], abs=1e-12)  # a CPT on the mean scale can miss a level by a float step
    gains = expected_gains(scores, task.delta)
    got = ns.nway_pgr_summaries(costs, outcome, arms_y, arms_c, gain_sums=(gains, gains[-1]))
    assert (got["apgr"], got["cpt50"], got["cpt80"]) == (ref["apgr"], ref["cpt50"], ref["cpt80"])
    assert (got["weak"], got["strong"], got["defined"]) == (0, 1, True)


@pytest.mark.parametrize("seed", range(12))
def test_two_arms_operating_points_reproduce_the_binary_summaries_bit_for_bit(seed):
    task, scores = _binary_task(seed)
    rng = np.random.default_rng(seed)
    usage = np.sort(rng.random(5))
    outcome = task.base.mean() + usage * (task.extra.mean() - task.base.mean()) + rng.normal(0, 0.02, 5)
    points = [(u, o, u) for u, o in zip(usage, outcome)]
    binary = points_routing_summaries(points, task, True)
    pc = np.r_[0.0, usage, 1.0]
    pq = np.r_[task.base.mean(), outcome, task.extra.mean()]
    arms_y, arms_c = [float(task.base.mean()), float(task.extra.mean())], [0.0, 1.0]
    got = ns.nway_pgr_summaries(pc, pq, arms_y, arms_c)
    assert (got["apgr"], got["cpt50"], got["cpt80"]) == (binary["apgr"], binary["cpt50"], binary["cpt80"])
    assert ns.nway_aiq(pc, pq, arms_y, arms_c, upper="costliest") == binary["aiq"]


def test_two_arms_aiq_when_base_is_the_better_arm_needs_the_costliest_range():
    # base better than extra: "best" is the hull's height at the one cost 0; "costliest"
    # integrates over [0, 1]: 0.5 * (0.6 + 0.7) / 2 + 0.5 * 0.7 (flat beyond the best point)
    pc, pq = [0.0, 0.5, 1.0], [0.6, 0.7, 0.4]
    assert ns.nway_aiq(pc, pq, [0.6, 0.4], [0.0, 1.0], upper="best") == 0.6
    assert ns.nway_aiq(pc, pq, [0.6, 0.4], [0.0, 1.0], upper="costliest") == pytest.approx(0.675, abs=1e-15)
    assert math.isnan(ns.nway_pgr_summaries(pc, pq, [0.6, 0.4], [0.0, 1.0])["apgr"])


def test_nway_pgr_points_outside_the_reference_range_are_cut_at_0_and_1():
    # weak (0, 0.2), strong (1, 0.6), a middle arm; points at x = -0.5, 0.5, 1.5 with PGR 0.25,
    # 0.75, 1.25 lie on one line: cut at 0 and 1 it runs 0.5 -> 1.0, APGR 0.75, CPT(80%) 0.6
    got = ns.nway_pgr_summaries([-0.5, 0.5, 1.5], [0.3, 0.5, 0.7], [0.2, 0.6, 0.3], [0.0, 1.0, 0.5])
    assert got["apgr"] == pytest.approx(0.75, abs=1e-15)
    assert got["cpt50"] == 0.0 and got["cpt80"] == pytest.approx(0.6, abs=1e-15)
    assert (got["weak"], got["strong"], got["defined"], got["reason"]) == (0, 1, True, "")


def test_nway_pgr_adds_the_reference_ends_where_no_point_reaches_them():
    # one point at x = 0.5, PGR 0.75: polyline (0, 0) -> (0.5, 0.75) -> (1, 1)
    got = ns.nway_pgr_summaries([0.5], [0.5], [0.2, 0.6], [0.0, 1.0])
    assert got["apgr"] == pytest.approx(0.5 * 0.75 / 2 + 0.5 * 1.75 / 2, abs=1e-15)
    assert got["cpt50"] == pytest.approx(0.5 * 0.5 / 0.75, abs=1e-15)


def test_nway_pgr_undefined_when_the_best_arm_is_the_cheapest():
    got = ns.nway_pgr_summaries([0.0, 1.0], [0.5, 0.5], [0.7, 0.5], [0.0, 1.0])
    assert got["defined"] is False and math.isnan(got["cpt50"])
    assert "best arm 0 is not better than the cheapest arm 0" in got["reason"]


def test_nway_aiq_bad_inputs_name_the_argument():
    with pytest.raises(ConfigError, match="'upper'"):
        ns.nway_aiq([0.0], [0.1], [0.1], [0.0], upper="max")
    with pytest.raises(HarnessError, match="point_costs: the router's cheapest point 1 lies above"):
        ns.nway_aiq([1.0, 2.0], [0.1, 0.2], [0.1, 0.3], [0.0, 2.0])
    with pytest.raises(HarnessError, match="arrays must align"):
        ns.nway_aiq([0.0, 2.0], [0.1], [0.1, 0.3], [0.0, 2.0])


def test_nway_pgr_gain_sums_must_align_and_be_positive():
    with pytest.raises(HarnessError, match="arrays must align"):
        ns.nway_pgr_summaries([0.0, 1.0], [0.2, 0.6], [0.2, 0.6], [0.0, 1.0], gain_sums=([0.0], 4.0))
    with pytest.raises(HarnessError, match="gain_sums\\[1\\]: the strong arm's summed gain must be positive"):
        ns.nway_pgr_summaries([0.0, 1.0], [0.2, 0.6], [0.2, 0.6], [0.0, 1.0], gain_sums=([0.0, 0.0], 0.0))
