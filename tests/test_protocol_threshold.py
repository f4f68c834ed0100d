"""Protocol A: tau selection vs brute force, freeze-before-held-out (leak test), held-out
metrics recomputed independently, planted signal ordering, determinism."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.errors import HarnessError
from harness.protocols import run_threshold_protocol
from harness.protocols.threshold import develop, evaluate_heldout, select_tau, split_dev_heldout
from harness.stats import doc_bootstrap_ci
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.test_protocol_policies import LstsqPolicy, OraclePolicy, RandomPolicy


def _brute_tau(scores, base, extra, cost):
    """Every candidate threshold by a plain loop; best utility, ties -> fewer extra calls."""
    best = None
    for tau in sorted(set(scores.tolist())) + [np.inf]:
        ran = [s >= tau for s in scores]
        u = sum((e if r else b) - (cost if r else 0.0) for r, b, e in zip(ran, base, extra)) / len(scores)
        key = (round(u, 12), -sum(ran))
        if best is None or key > best[0]:
            best = (key, tau, u, sum(ran))
    return best[1], best[2], best[3]


def test_select_tau_hand_case():
    scores = np.array([0.9, 0.5, 0.5, 0.1])
    base = np.array([0, 1, 0, 1.0])
    extra = np.array([1, 0, 1, 1.0])
    # tau=inf: 0.5; 0.9: (2+1-.02)/4=.745; 0.5: (2+1-.06)/4=.735; 0.1: (2+1-.08)/4=.73
    tau, u, k = select_tau(scores, base, extra - base, cost=0.02)
    assert (tau, k) == (0.9, 1) and u == pytest.approx(0.745)


def test_select_tau_tie_prefers_fewer_extra_calls():
    scores = np.array([0.9, 0.5, 0.1])
    base = np.array([0.0, 1.0, 1.0])
    extra = np.array([1.0, 1.0, 1.0])
    assert select_tau(scores, base, extra - base, cost=0.0)[::2] == (0.9, 1)  # 0.5, 0.1 tie with it
    assert select_tau(scores, base, base - base, cost=0.0) == (np.inf, pytest.approx(2 / 3), 0)


@pytest.mark.parametrize("seed", range(8))
def test_select_tau_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 25))
    scores = np.round(rng.normal(size=n), 1)  # duplicates on purpose
    base = (rng.random(n) < 0.6).astype(float)
    extra = (rng.random(n) < 0.6).astype(float)
    cost = float(rng.choice([0.0, 0.02, 0.3]))
    tau, u, k = select_tau(scores, base, extra - base, cost)
    b_tau, b_u, b_k = _brute_tau(scores, base, extra, cost)
    assert tau == b_tau and k == b_k and u == pytest.approx(b_u, abs=1e-12)


def _task(n_docs=60, seed=0):
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))


def _with_outcomes(task, base, extra):
    return RoutingTask(task.qids, task.groups, base, extra, task.features, metric=task.metric)


def test_leak_heldout_outcomes_cannot_change_the_freeze(tmp_path):
    task = _task()
    res = run_threshold_protocol(task, LstsqPolicy, freeze_dir=tmp_path / "a", seed=1)
    held = np.isin(task.qids, res.decisions["qid"].to_numpy())
    rng = np.random.default_rng(0)
    base, extra = task.base.copy(), task.extra.copy()
    perm = rng.permutation(np.flatnonzero(held))
    base[held], extra[held] = task.base[perm], 1 - task.extra[perm]  # scramble held-out outcomes
    res2 = run_threshold_protocol(_with_outcomes(task, base, extra), LstsqPolicy, freeze_dir=tmp_path / "b", seed=1)
    assert res2.frozen["sha256"] == res.frozen["sha256"]
    assert res2.metrics["dev/tau"] == res.metrics["dev/tau"]
    assert res2.metrics["heldout/utility"] != res.metrics["heldout/utility"]  # held-out did change
    # flipping one development outcome does change the frozen model
    dev_i = np.flatnonzero(~held)[0]
    base3 = task.base.copy()
    base3[dev_i] = 1 - base3[dev_i]
    res3 = run_threshold_protocol(_with_outcomes(task, base3, task.extra), LstsqPolicy, freeze_dir=tmp_path / "c", seed=1)
    assert res3.frozen["sha256"]["policy_state.json"] != res.frozen["sha256"]["policy_state.json"]


def test_develop_sees_only_dev_and_freezes_files(tmp_path):
    dev, held = split_dev_heldout(_task(), 0.8, seed=0)
    assert not set(dev.groups) & set(held.groups)
    frozen = develop(dev, LstsqPolicy, freeze_dir=tmp_path, seed=0)
    manifest = json.loads((tmp_path / "manifest.json").read_text())["sha256"]
    assert manifest == frozen.digests
    router = json.loads((tmp_path / "router.json").read_text())
    assert router["config"]["cost"] == 0.02 and router["config"]["n_folds"] == 5
    assert json.loads((tmp_path / "policy_state.json").read_text())["coef"]
    # evaluation rebuilds from the frozen file: a tampered state is refused
    metrics, _ = evaluate_heldout(tmp_path, held, LstsqPolicy)
    state = json.loads((tmp_path / "policy_state.json").read_text())
    state["intercept"] += 1.0
    (tmp_path / "policy_state.json").write_text(json.dumps(state))
    with pytest.raises(HarnessError, match="policy_state.json"):
        evaluate_heldout(tmp_path, held, LstsqPolicy)
    # a frozen router of another policy class is refused too
    develop(dev, RandomPolicy, freeze_dir=tmp_path, seed=0)
    with pytest.raises(HarnessError, match="policy_class"):
        evaluate_heldout(tmp_path, held, LstsqPolicy)


def test_heldout_metrics_recomputed_independently(tmp_path):
    task = _task()
    res = run_threshold_protocol(task, LstsqPolicy, freeze_dir=tmp_path, seed=2, cost=0.05)
    d, m = res.decisions, res.metrics
    tau = m["dev/tau"]
    assert (d["ran_extra"] == (d["score"] >= tau)).all()
    chosen = np.where(d["ran_extra"], d["extra"], d["base"])
    util = chosen - 0.05 * d["ran_extra"]
    assert m["heldout/hit@10"] == pytest.approx(chosen.mean())
    assert m["heldout/utility"] == pytest.approx(util.mean())
    assert m["heldout/extra_calls"] == int(d["ran_extra"].sum())
    assert m["heldout/rescues"] == int(((d["extra"] - d["base"] == 1) & d["ran_extra"]).sum())
    assert m["heldout/harms"] == int(((d["extra"] - d["base"] == -1) & d["ran_extra"]).sum())
    assert m["heldout/base/utility"] == pytest.approx(d["base"].mean())
    assert m["heldout/extra/utility"] == pytest.approx(d["extra"].mean() - 0.05)
    p, lo, hi = doc_bootstrap_ci(util - d["base"], d["doc_id"], n_boot=1000, seed=2)
    assert (m["heldout/diff_vs_base/utility"], m["heldout/diff_vs_base/utility/ci_low"],
            m["heldout/diff_vs_base/utility/ci_high"]) == pytest.approx((p, lo, hi))
    assert lo <= p <= hi
    b = m["heldout/rescues"]
    c = m["heldout/harms"]
    expected_p = 1.0 if b + c == 0 else sps.binomtest(b, b + c, 0.5).pvalue
    assert m["heldout/mcnemar_vs_base/p"] == pytest.approx(expected_p)
    assert m["n/dev"] + m["n/heldout"] == task.n
    assert "tau=" in res.summary() and "policy - base" in res.summary()


def test_planted_signal_oracle_beats_trained_beats_random(tmp_path):
    task = _task(n_docs=200, seed=3)
    u = {
        name: run_threshold_protocol(task, f, freeze_dir=tmp_path / name, seed=0).metrics["heldout/utility"]
        for name, f in (("oracle", OraclePolicy), ("trained", LstsqPolicy), ("random", RandomPolicy))
    }
    assert u["oracle"] > u["trained"] > u["random"]


def test_deterministic(tmp_path):
    task = _task()
    a = run_threshold_protocol(task, LstsqPolicy, freeze_dir=tmp_path / "a", seed=5)
    b = run_threshold_protocol(task, LstsqPolicy, freeze_dir=tmp_path / "b", seed=5)
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(a.decisions, b.decisions)


def test_fixed_route_policies_are_not_tuned(planted_table, tmp_path):
    """always-keep must stay never-extra even when the extra arm is better and free (cost 0);
    always-extra must stay always-extra even when it is expensive."""
    from policies.builtin import AlwaysBase, AlwaysExtra

    task = RoutingTask.from_table(planted_table)
    assert task.extra.mean() > task.base.mean()  # free extra arm would win a tuned threshold
    keep = run_threshold_protocol(task, AlwaysBase, cost=0.0, seed=0, freeze_dir=tmp_path / "k")
    assert keep.metrics["heldout/extra_calls"] == 0
    assert keep.metrics["dev/tau"] == float("inf")
    extra = run_threshold_protocol(task, AlwaysExtra, cost=0.5, seed=0, freeze_dir=tmp_path / "e")
    assert extra.metrics["heldout/extra_share"] == 1.0
    assert extra.metrics["dev/tau"] == float("-inf")
