"""Protocol ``cascade`` (docs/metrics.md §17): stage features, costs paid, thresholds from the
training half only, an independent recount of every per-stage number from the per-question
decisions, bad settings in one line, and a plugin stop rule in a real sweep with the built-ins."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.protocols.cascade import CascadeProtocol
from harness.protocols.cascade_run import available_features, stop_ok
from harness.protocols.registry import ProtocolContext, settings_of
from policies.cascade_stages import CascadeStage, LogisticStop, fit_and_score
from tests.helpers.plugin_tools import activate, write_plugin

STAGES = ("bm25", "dense", "keep")


def _table(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """Three arms, each stage's top-1 score telling whether its arm already hits, measured costs
    (keep = dense + a rerank), two documents per question pair."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(size=n)
    t = pd.DataFrame({"qid": [f"q{i:04d}" for i in range(n)], "doc_id": [f"d{i // 2:03d}" for i in range(n)],
                      "has_evidence": True})
    hits = {}
    for a, arm in enumerate(STAGES):
        hits[arm] = (hard + 0.6 * rng.normal(size=n) < 0.2 + 0.6 * a).astype(float)
        t[f"feat.{arm}_top1"] = hits[arm] * 0.5 - 0.3 * hard + 0.4 * rng.normal(size=n)
        t[f"{arm}.hit@1"] = hits[arm]
    t["feat.q_len_words"] = rng.integers(3, 20, size=n).astype(float)
    t["feat.overlap_dense_keep"] = rng.random(n)  # named after dense only in the middle: no stage's own feature
    t["bm25.cost.ms"] = 1.0 + rng.random(n)
    t["dense.cost.ms"] = 20.0 + 5 * rng.random(n)
    t["keep.cost.ms"] = t["dense.cost.ms"] + 3.0 + rng.random(n)
    return t


def _run(table: pd.DataFrame, grid=(0.1, 0.3, 0.6), **settings):
    proto = CascadeProtocol()
    node = {"stages": list(STAGES), "cost": "ms", "contains": {"keep": "dense"}, "grid": 10, **settings}
    s = settings_of(proto, node)
    cfg = {"seed": 0, "protocol": {"alpha": 0.05}, "budget": {"grid": list(grid)}}
    ctx = ProtocolContext(cfg=cfg, artifact_dir=None, settings=s, table=table)
    return proto.run(SimpleNamespace(metric="hit@1", source="test table"), None, ctx)


def test_stage_features_are_the_question_and_the_stages_reached():
    cols = ["q_len_words", "bm25_top1", "qpp_wig_bm25", "dense_top1", "overlap_dense_keep", "keep_top1"]
    got = available_features(STAGES, cols, {})
    assert got == [("q_len_words", "bm25_top1", "qpp_wig_bm25"),
                   ("q_len_words", "bm25_top1", "qpp_wig_bm25", "dense_top1")]
    assert available_features(STAGES, cols, {"dense": ["overlap_dense_keep"]})[1][-1] == "overlap_dense_keep"
    with pytest.raises(ConfigError, match="features.dense"):
        available_features(STAGES, cols, {"dense": ["nope"]})


def test_a_stop_rule_sees_only_its_stages_features():
    seen = {}

    class Spy(CascadeStage):
        name = "spy"

        def score(self, X):
            seen[self.arm] = list(X.columns)
            return np.zeros(len(X))

    t = _table(20)
    X = t[[c for c in t.columns if c.startswith("feat.")]].rename(columns=lambda c: c[5:])
    from unittest import mock

    with mock.patch("policies.cascade_stages.make_stage", lambda spec, key: Spy()):
        fit_and_score("spy", "bm25", ["q_len_words", "bm25_top1"], (X, np.ones(20), np.arange(20)), X, 0)
    assert seen == {"bm25": ["q_len_words", "bm25_top1"]}


def test_stop_label_is_this_stage_already_best_among_the_rest():
    y = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1], [0, 0, 0.0]])
    assert stop_ok(y, 0).tolist() == [1, 0, 0, 1] and stop_ok(y, 1).tolist() == [1, 1, 0, 1]


def test_the_logistic_stop_rule_is_sklearns_on_standardised_features():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    t = _table()
    X = t[["feat.bm25_top1", "feat.q_len_words"]].rename(columns=lambda c: c[5:])
    y = stop_ok(t[[f"{a}.hit@1" for a in STAGES]].to_numpy(), 0)
    stage = LogisticStop(C=0.5)
    stage.setup("bm25", list(X.columns))
    got = stage.fit(X, y, None).score(X)
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=1000)).fit(X[sorted(X.columns)], y)
    assert np.allclose(got, ref.predict_proba(X[sorted(X.columns)])[:, 1], atol=1e-9)


def _recount(res, table: pd.DataFrame, shares):
    """Per-stage counts, costs and the cascade's outcome from the per-question decisions alone, the
    costs paid rebuilt from the table's raw cost columns (keep reuses dense: bm25 + keep)."""
    dec = res.tables["cascade_decisions"].frame.set_index("qid")
    raw = table.set_index("qid").loc[dec.index]
    paid = {"bm25": raw["bm25.cost.ms"], "dense": raw["bm25.cost.ms"] + raw["dense.cost.ms"],
            "keep": raw["bm25.cost.ms"] + raw["dense.cost.ms"] + (raw["keep.cost.ms"] - raw["dense.cost.ms"]).clip(0)}
    out = {}
    for share in shares:
        b = f"{share:.2f}"
        stage = dec[f"stage_b{b}"]
        cost = np.select([stage == a for a in STAGES], [paid[a] for a in STAGES])
        hit = np.select([stage == a for a in STAGES], [raw[f"{a}.hit@1"] for a in STAGES])
        assert np.allclose(cost, dec[f"cost_b{b}"], rtol=1e-12) and np.array_equal(hit, dec[f"outcome_b{b}"])
        stops = {a: int((stage == a).sum()) for a in STAGES}
        own = {"bm25": raw["bm25.cost.ms"], "dense": raw["dense.cost.ms"], "keep": paid["keep"] - paid["dense"]}
        reached = {a: stage.isin(STAGES[k:]) for k, a in enumerate(STAGES)}
        stage_cost = {a: float(own[a][reached[a]].sum()) / len(dec) for a in STAGES}
        out[b] = (stops, stage_cost, float(cost.mean()), float(hit.mean()))
    return out, dec


def test_per_stage_counts_and_costs_recounted_from_the_logged_decisions():
    table, shares = _table(), (0.1, 0.3, 0.6)
    res = _run(table, shares)
    m = res.metrics
    counts, dec = _recount(res, table, shares)
    for b, (stops, stage_cost, mean_cost, mean_hit) in counts.items():
        k = f"cascade/b{b}"
        assert {a: m[f"{k}/stops/{a}"] for a in STAGES} == stops
        assert all(m[f"{k}/stage_cost/{a}"] == pytest.approx(stage_cost[a], rel=1e-9) for a in STAGES)
        assert m[f"{k}/cost"] == pytest.approx(mean_cost, rel=1e-12) and m[f"{k}/outcome"] == pytest.approx(mean_hit)
        line = next(x for x in res.summary.splitlines() if x.startswith(f"  budget {float(b):g} "))
        printed = dict(re.findall(r"(\w+) (\d+)", re.search(r"\[stops: ([^\]]*)\]", line).group(1)))
        assert {a: int(v) for a, v in printed.items()} == stops
        assert f"cascade {mean_hit:.4f} at {mean_cost:.4g}" in line
    # each question follows the thresholds its half logged, applied to its logged stop scores
    budgets = res.tables["cascade_budgets"].frame.set_index("budget_share")
    for share in shares:
        row = budgets.loc[share]
        for h in (0, 1):
            part = dec[dec["half"] == h]
            t = [row[f"h{h}_threshold_{a}"] for a in STAGES[:-1]]
            want = np.where(part["stop_score_bm25"] >= t[0], "bm25", np.where(part["stop_score_dense"] >= t[1],
                                                                               "dense", "keep"))
            assert np.array_equal(part[f"stage_b{share:.2f}"].to_numpy(), want)


def test_thresholds_use_the_training_half_only():
    table = _table()
    res = _run(table, (0.3,))
    dec = res.tables["cascade_decisions"].frame
    changed = table.copy()  # outcomes of half 0's questions flipped: half 0's own thresholds do not move
    q0 = set(dec.loc[dec["half"] == 0, "qid"])
    rows = changed["qid"].isin(q0)
    for a in STAGES:
        changed.loc[rows, f"{a}.hit@1"] = 1.0 - changed.loc[rows, f"{a}.hit@1"]
    again = _run(changed, (0.3,))
    b0, b1 = res.tables["cascade_budgets"].frame.iloc[0], again.tables["cascade_budgets"].frame.iloc[0]
    assert b0["h0_threshold_bm25"] == b1["h0_threshold_bm25"] and b0["h0_threshold_dense"] == b1["h0_threshold_dense"]


def test_the_cascade_is_judged_against_the_mix_with_a_verdict_per_budget():
    res = _run(_table(), (0.1, 0.6), stop="logistic")
    m = res.metrics
    for b in ("0.10", "0.60"):
        assert m[f"cascade/b{b}/gain_vs_mix"] == pytest.approx(m[f"cascade/b{b}/outcome"] - m[f"cascade/b{b}/mix_outcome"])
        assert res.tags[f"cascade.verdict.b{b}"].startswith(("deploy", "cannot tell"))
    assert res.tags["cascade.stop"] == "logistic,logistic" and m["cascade/level"] == pytest.approx(0.025)


@pytest.mark.parametrize("node, key", [
    ({"stop": ["top_score"]}, "protocol.settings.cascade.stop"),
    ({"stop": ["top_score", "nope"]}, "protocol.settings.cascade.stop[1]"),
    ({"stop": {"kind": "top_score", "colour": 1}}, "protocol.settings.cascade.stop"),
    ({"contains": {"bm25": "keep"}}, "protocol.settings.cascade.contains.bm25"),
    ({"stages": ["bm25"]}, "protocol.settings.cascade.stages"),
    ({"grid": 0}, "protocol.settings.cascade.grid"),
])
def test_bad_settings_are_one_error_naming_the_key(node, key):
    with pytest.raises(ConfigError) as e:
        settings_of(CascadeProtocol(), {"stages": list(STAGES), "cost": "ms", **node})
    assert e.value.key == key


# ---- a plugin stop rule in a real sweep with the built-ins ----------------------------------------
PLUGIN = '''
import numpy as np
from policies.cascade_stages import CascadeStage


class QueryLength(CascadeStage):
    """Short questions stop at once: score = -question length (fitted on nothing)."""

    name = "short_stops"

    def score(self, X):
        return -X["q_len_words"].to_numpy(dtype=float)
'''


@pytest.mark.slow  # a real sweep through the CLI
def test_a_plugin_stop_rule_runs_in_a_cascade_with_the_built_ins(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    root = write_plugin(tmp_path / "site", "cascade_ext", {"short.py": PLUGIN},
                        {"rag_route_bench.cascade_stages": {"short_stops": "cascade_ext.short:QueryLength"}})
    env = activate(monkeypatch, root)
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    table = _table(200, 3).rename(columns={"doc_id": "group"}).drop(columns=["has_evidence"])
    table.to_csv(tmp_path / "o.csv", index=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "-m", "dataset=outcomes", "dataset.path=o.csv", "arms.metric=hit@1",
           "arms.base=bm25", "arms.extra=keep", "experiment=none", "protocol=cascade", "policy=always_keep",
           "protocol.settings.cascade.cost=ms", "budget.grid=[0.2,0.5]",
           "protocol.settings.cascade.stop=[short_stops,top_score],[logistic,short_stops]", f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "cascades:" in proc.stdout and "short_stops,top_score" in proc.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    jobs = {r.data.tags["cascade.stop"]: r for r in runs if r.data.tags.get("route_bench.role") == "job"}
    assert sorted(jobs) == ["logistic,short_stops", "short_stops,top_score"]
    assert all(r.info.status == "FINISHED" for r in runs)
    for run in jobs.values():  # the logged per-question decisions recount the logged per-stage numbers
        path = client.download_artifacts(run.info.run_id, "cascade_decisions.parquet", str(tmp_path / run.info.run_id))
        dec = pd.read_parquet(path)
        m = run.data.metrics
        for b in ("0.20", "0.50"):
            assert {a: m[f"cascade/b{b}/stops/{a}"] for a in STAGES} == {
                a: float((dec[f"stage_b{b}"] == a).sum()) for a in STAGES}
            assert m[f"cascade/b{b}/cost"] == pytest.approx(dec[f"cost_b{b}"].mean(), rel=1e-12)
            assert m[f"cascade/b{b}/outcome"] == pytest.approx(dec[f"outcome_b{b}"].mean(), rel=1e-12)
