"""Protocol B's calibration-size diagnostic (harness/protocols/calibration_size.py,
``budget.cal_sizes``; docs/metrics.md §6): thresholds re-set on n_cal questions of each
calibration half, applied to the unchanged test half.

- a tiny table computed by hand (the subsample, both thresholds, realized usage, the rates);
- a simulation with scores independent of everything: the nominal violation rate matches its
  exact expectation (derived below, a beta-binomial tail) within 2 Monte Carlo standard errors,
  and the conservative rule's is at most delta + 2 SE;
- at the full half's size the diagnostic reproduces protocol B's own numbers;
- a bad setting is one line naming ``budget.cal_sizes``; same seed, same numbers.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.protocols import run_budget_protocol
from harness.protocols.calibration_size import (
    CAL_SIZE_STREAM,
    SplitScores,
    calibration_size_metrics,
    calibration_size_table,
    check_cal_sizes,
    subsample_order,
)
from harness.protocols.common import forget_reused
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.helpers.policies import LstsqPolicy, RandomPolicy


def _split(cal_scores, test_scores, groups=None, split=0, split_seed=11, base=None, extra=None) -> SplitScores:
    cal_scores, test_scores = np.asarray(cal_scores, float), np.asarray(test_scores, float)
    n_test = len(test_scores)
    return SplitScores(split, split_seed, np.asarray(groups if groups is not None else np.arange(len(cal_scores))),
                       cal_scores, test_scores,
                       np.zeros(n_test) if base is None else np.asarray(base, float),
                       np.ones(n_test) if extra is None else np.asarray(extra, float))


# ---- (a) by hand ---------------------------------------------------------------------------------
CAL = [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]
GROUPS = ["a", "a", "a", "b", "b", "c", "d", "d", "e", "e"]
TEST = [0.1, 0.3, 0.5, 0.7, 0.9, 0.46]
BASE, EXTRA = [1, 0, 0, 1, 0, 1], [1, 1, 0, 0, 1, 1]


def test_full_half_by_hand():
    """n_cal = 10 = the whole half. Deployable at 0.5: the inverted_cdf 0.5 quantile of 10
    scores is the 5th smallest, 0.45; 5 calibration scores lie above it = 0.5 * 10, so no coin
    (p = 0); on test 0.5, 0.7, 0.9, 0.46 run: usage 4/6 > 0.5 + 0.02. Conservative: eps =
    sqrt(ln 20 / 20) = 0.38702, target 0.11298: the 0.88702 quantile is the ceil(8.87) = 9th
    smallest, 0.85, one score above it, coin p = 1.1298 - 1 at a tie; on test only 0.9 runs
    (no test score equals 0.85): usage 1/6."""
    tab = calibration_size_table([_split(CAL, TEST, GROUPS, base=BASE, extra=EXTRA)], (10,), (0.5,),
                                 dkw_delta=0.05, tol=0.02)
    dep = tab[tab.frontier == "deployable"].iloc[0]
    con = tab[tab.frontier == "conservative"].iloc[0]
    eps = math.sqrt(math.log(20) / 20)
    assert dep.threshold == 0.45 and dep.tie_prob == 0.0 and dep.realized_usage == pytest.approx(4 / 6)
    assert bool(dep.violated) and bool(dep.overshoot)
    # outcome: runs on questions 2, 3, 4, 5 (extra 0, 0, 1, 1), keeps questions 0, 1 (base 1, 0)
    assert dep.outcome == pytest.approx((1 + 0 + 0 + 0 + 1 + 1) / 6)
    assert con.dkw_eps == pytest.approx(eps) and con.target_usage == pytest.approx(0.5 - eps)
    assert con.threshold == 0.85 and con.tie_prob == pytest.approx(10 * (0.5 - eps) - 1)
    assert con.realized_usage == pytest.approx(1 / 6) and not bool(con.violated)
    assert (tab.n_cal_docs == 5).all() and (tab.cal_size == 10).all() and not tab.skipped.any()
    m = calibration_size_metrics(tab)
    assert m["budget/0.50/cal10/deployable/violation_rate"] == 1.0
    assert m["budget/0.50/cal10/conservative/violation_rate"] == 0.0
    assert m["budget/0.50/cal10/deployable/realized_usage"] == pytest.approx(4 / 6)
    assert m["budget/cal10/skipped"] == 0.0 and m["budget/cal10/dkw_eps"] == pytest.approx(eps)


def test_subsample_is_whole_documents_nested_and_by_hand():
    """The size-n subsample is the first n of one seeded order: documents kept together (at
    most the last one cut), nested across sizes; its threshold is the hand-computed quantile."""
    order = subsample_order(GROUPS, [11, CAL_SIZE_STREAM])
    assert sorted(order.tolist()) == list(range(10))
    docs = [GROUPS[i] for i in order]
    assert [d for i, d in enumerate(docs) if i == 0 or d != docs[i - 1]] == list(dict.fromkeys(docs))  # contiguous
    tab = calibration_size_table([_split(CAL, TEST, GROUPS)], (4, 7), (0.5,), dkw_delta=0.05, tol=0.02)
    for n in (4, 7):
        picked = np.sort(np.asarray(CAL)[order[:n]])
        t = picked[math.ceil(n * 0.5) - 1]  # inverted_cdf 0.5 quantile: the ceil(n/2)-th smallest
        p = (0.5 * n - np.sum(picked > t)) / np.sum(picked == t)
        row = tab[(tab.cal_size == n) & (tab.frontier == "deployable")].iloc[0]
        assert row.threshold == t and row.tie_prob == pytest.approx(p)
        assert row.realized_usage == pytest.approx(np.mean(np.where(np.asarray(TEST) > t, 1.0, 0.0)))
        assert row.n_cal_docs == len({GROUPS[i] for i in order[:n]})
        cut = [d for d in {GROUPS[i] for i in order[:n]} if GROUPS.count(d) != sum(GROUPS[i] == d for i in order[:n])]
        assert len(cut) <= 1


def test_size_above_the_smallest_half_is_skipped_in_every_split():
    splits = [_split(CAL, TEST, GROUPS, split=0), _split(CAL[:6], TEST, GROUPS[:6], split=1)]
    tab = calibration_size_table(splits, (4, 8), (0.25, 0.5), dkw_delta=0.05, tol=0.02)
    skipped = tab[tab.cal_size == 8]
    assert skipped.skipped.all() and len(skipped) == 2 * 2 * 2 and skipped.realized_usage.isna().all()
    assert "smallest calibration half of the run (6 questions)" in skipped.reason.iloc[0]
    m = calibration_size_metrics(tab)
    assert m["budget/cal8/skipped"] == 1.0 and not any(k.startswith("budget/0.50/cal8/") for k in m)
    assert m["budget/cal4/skipped"] == 0.0 and "budget/0.50/cal4/deployable/violation_rate" in m


# ---- (b) simulation ------------------------------------------------------------------------------
def _violation_probability(n: int, target: float, m: int, rho: float) -> float:
    """P(test usage > rho) for continuous i.i.d. scores, the rule calibrated to ``target`` on n
    of them, and m test scores. The inverted_cdf (1 - target) quantile is the k-th smallest
    calibration score, k = ceil(n (1 - target)); with U = F(t) ~ Beta(k, n - k + 1), the test
    count above t is Binomial(m, 1 - U) given U, i.e. BetaBinomial(m, n - k + 1, k), and no
    test score ties t (the coin never runs on test). Violation: that count > rho * m."""
    from scipy.stats import betabinom

    k = math.ceil(n * (1.0 - target) - 1e-9)
    return float(betabinom.sf(math.floor(rho * m + 1e-9), m, n - k + 1, k))


def test_violation_rates_match_their_expectation_with_uninformative_scores():
    rng = np.random.default_rng(2024)
    n_splits, n_half, m, rho, delta = 2000, 100, 200, 0.5, 0.05
    splits = [_split(rng.random(n_half), rng.random(m), split=s, split_seed=int(rng.integers(2**31)))
              for s in range(n_splits)]
    tab = calibration_size_table(splits, (8, 32), (rho,), dkw_delta=delta, tol=0.02)
    metrics = calibration_size_metrics(tab)
    for n in (8, 32):
        eps = math.sqrt(math.log(1 / delta) / (2 * n))
        for frontier, target in (("deployable", rho), ("conservative", max(0.0, rho - eps))):
            expected = _violation_probability(n, target, m, rho)
            se = math.sqrt(expected * (1 - expected) / n_splits)
            observed = metrics[f"budget/0.50/cal{n}/{frontier}/violation_rate"]
            assert abs(observed - expected) <= 2 * max(se, 1 / n_splits), (n, frontier, observed, expected, se)
            if frontier == "deployable":  # about half: 0.63 at n = 8, 0.55 at n = 32
                assert 0.5 < expected < 0.65
            else:
                assert expected <= delta
                assert observed <= delta + 2 * math.sqrt(delta * (1 - delta) / n_splits)


# ---- protocol B's own numbers at the full half ---------------------------------------------------
def _task(n_docs=40, seed=0):
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))


def test_full_half_reproduces_protocol_b_and_nothing_changes_without_it():
    forget_reused()
    task = _task()
    plain = run_budget_protocol(task, LstsqPolicy, budgets=(0.25, 0.5), n_splits=3, seed=4)
    sizes = tuple(int(n) for n in plain.splits.n_cal)
    res = run_budget_protocol(task, LstsqPolicy, budgets=(0.25, 0.5), n_splits=3, seed=4, cal_sizes=(min(sizes),))
    assert plain.cal_sizes is None and res.cal_sizes is not None
    kept = {k: v for k, v in res.metrics.items() if not re.search(r"/cal\d+", k)}
    assert kept.keys() == plain.metrics.keys()
    assert all(v == plain.metrics[k] or (math.isnan(v) and math.isnan(plain.metrics[k])) for k, v in kept.items())
    s = sizes.index(min(sizes))  # the split whose whole half is the subsample
    f = plain.frontiers.set_index(["split", "budget", "frontier"])
    for _, r in res.cal_sizes[res.cal_sizes.split == s].iterrows():
        row = f.loc[(s, r.budget, r.frontier)]
        assert (r.threshold, r.tie_prob, r.realized_usage, r.outcome, r.dkw_eps) == (
            row.threshold, row.tie_prob, row.realized_usage, row.outcome, row.dkw_eps)
    assert "calibration-size diagnostic" in res.summary() and "calibration-size" not in plain.summary()


# ---- (c) bad settings ----------------------------------------------------------------------------
@pytest.mark.parametrize("sizes, key", [([1], "budget.cal_sizes[0]"), ([32, 1.5], "budget.cal_sizes[1]"),
                                        ([-4], "budget.cal_sizes[0]"), ([32, 32], "budget.cal_sizes[1]"),
                                        ([True], "budget.cal_sizes[0]"), (["a"], "budget.cal_sizes[0]"),
                                        (32, "budget.cal_sizes"), ([float("nan")], "budget.cal_sizes[0]")])
def test_bad_sizes_name_the_key(sizes, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        check_cal_sizes(sizes)
    with pytest.raises(ConfigError, match="budget.cal_sizes"):
        run_budget_protocol(_task(n_docs=8), RandomPolicy, cal_sizes=sizes)


def test_good_sizes():
    assert check_cal_sizes([]) == () and check_cal_sizes(None) == () and check_cal_sizes([32, 64.0]) == (32, 64)


@pytest.mark.parametrize("override", ["budget.cal_sizes=[1]", "budget.cal_sizes=[2.5]", "budget.cal_sizes=[-8]"])
def test_bad_setting_is_one_line(tmp_path, override, cli):
    code, _, err = cli(["dataset=synthetic", override, f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"])
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "config key 'budget.cal_sizes[0]'" in errors[0], err
    assert "Traceback" not in err


# ---- (d) determinism ------------------------------------------------------------------------------
def test_same_seed_same_numbers():
    task = _task()
    runs = []
    for seed in (7, 7, 8):
        forget_reused()
        runs.append(run_budget_protocol(task, LstsqPolicy, budgets=(0.5,), n_splits=2, seed=seed, cal_sizes=(16, 48)))
    a, b, c = (r.cal_sizes for r in runs)
    assert a.equals(b) and runs[0].metrics == runs[1].metrics
    assert not a[["threshold", "realized_usage"]].equals(c[["threshold", "realized_usage"]])


def test_the_quoted_finding_is_in_the_paper():
    from harness.results.experiments.seed003 import CAL_SIZE_QUOTE_003

    seeds = Path(__file__).resolve().parent.parent.parent / "shared" / "seeds"
    papers = list(seeds.glob("003_*.txt")) if seeds.is_dir() else []
    if not papers:
        pytest.skip("the seed papers are not at hand")
    assert CAL_SIZE_QUOTE_003 in papers[0].read_text(encoding="utf-8")
