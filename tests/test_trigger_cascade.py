"""Protocol ``trigger_cascade`` (docs/metrics.md §18): it runs in the job of its last stage only, an
independent recount of every per-stage number from the logged per-question decisions equals the
logged metrics, thresholds come from the training half only, bad settings are one line, and a
plugin policy is a stage beside the built-ins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.protocols.registry import ProtocolContext, settings_of
from harness.protocols.trigger_cascade import TriggerCascadeProtocol
from harness.protocols.trigger_eval import COMPONENTS, DECISION_PAYS, FAMILY_PAYS
from harness.retrieval.feature_names import FEATURE_SETS
from harness.task import RoutingTask
from policies.registry import builtin_policy_configs, make_policy
from tests.helpers.plugin_tools import activate, write_plugin

STAGES = ["query_ridge", "uncertainty_ridge", "bur_linear"]
FAMILIES = ["query-only", "uncertainty", "full"]


def _table(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """Memory vs RAG answers whose gain shows in the query, the uncertainty and the BM25 features
    (each more than the last), measured costs in three units."""
    rng = np.random.default_rng(seed)
    need = rng.normal(size=n)
    t = pd.DataFrame({"qid": [f"q{i:04d}" for i in range(n)], "doc_id": [f"d{i // 2:03d}" for i in range(n)]})
    t["no_retrieval.correct"] = (need + 0.5 * rng.normal(size=n) < 0).astype(float)
    t["rag_bm25.correct"] = (need + 0.5 * rng.normal(size=n) > -0.8).astype(float)
    for j, name in enumerate(FEATURE_SETS["query"]):
        t[f"feat.{name}"] = (0.3 * need if j == 0 else 0) + rng.normal(size=n)
    for name in FEATURE_SETS["uncertainty"]:
        t[f"feat.{name}"] = 0.8 * need + rng.normal(size=n)
    for name in FEATURE_SETS["bm25"]:
        t[f"feat.{name}"] = -1.2 * need + 0.5 * rng.normal(size=n)
    t["no_retrieval.cost.total_ms"] = 400 + 50 * rng.random(n)
    t["rag_bm25.cost.total_ms"] = 900 + 100 * rng.random(n)
    t["bm25.cost.total_ms"] = 150 + 20 * rng.random(n)
    t["no_retrieval.cost.prompt_tokens"] = rng.integers(30, 60, size=n).astype(float)
    t["rag_bm25.cost.prompt_tokens"] = rng.integers(300, 600, size=n).astype(float)
    t["no_retrieval.cost.output_tokens"] = 1.0
    t["rag_bm25.cost.output_tokens"] = 1.0
    return t


def _run(table, policy: str = "bur_linear", grid=(0.2, 0.5), **settings):
    proto = TriggerCascadeProtocol()
    s = settings_of(proto, {"stages": STAGES, "grid": 6, **settings})
    cfg = {"seed": 0, "protocol": {"alpha": 0.05}, "budget": {"grid": list(grid)}, "policy": {"name": policy}}
    task = RoutingTask.from_table(table, "no_retrieval", "rag_bm25", "correct", cost_column=None)
    policy_cfg = builtin_policy_configs().get(policy) or {"name": policy, "_target_": "x"}
    ctx = ProtocolContext(cfg=cfg, artifact_dir=None, settings=s, table=table)
    return proto.run(task, lambda: make_policy(policy_cfg), ctx), task


@pytest.fixture(scope="module")
def result():
    return _run(_table())


def test_it_runs_only_in_the_job_of_its_last_stage():
    res, _ = _run(_table(60), policy="query_ridge")
    assert res.metrics == {} and "runs in the job of its last stage (policy bur_linear)" in res.summary


def _recount(dec: pd.DataFrame, b: str, unit: str = "ms") -> dict:
    """Per question, the components paid stage by stage, then the decision's: counts and costs."""
    k = len(STAGES)
    out = {"reached": [0] * k, "memory": [0] * k, "retrieve": [0] * k, "stage_cost": [0.0] * k, "probes": 0,
           "cost": [], "paid": dict.fromkeys(COMPONENTS, 0)}
    for _, row in dec.iterrows():
        stop = STAGES.index(row[f"stage_b{b}"])
        paid = set()
        for j in range(stop + 1):
            out["reached"][j] += 1
            new = [c for c in FAMILY_PAYS[FAMILIES[j]] if c not in paid]
            out["stage_cost"][j] += sum(row[f"{c}_{unit}"] for c in new)
            paid.update(new)
        out["probes"] += "retrieval" in paid
        out["memory" if row[f"retrieve_b{b}"] == 0 else "retrieve"][stop] += 1
        paid.update(DECISION_PAYS[int(row[f"retrieve_b{b}"])])
        out["cost"].append(sum(row[f"{c}_{unit}"] for c in paid))
        for c in paid:
            out["paid"][c] += 1
    return out


def test_per_stage_counts_and_costs_recounted_from_the_logged_decisions(result):
    res, task = result
    dec = res.tables["trigger_decisions"].frame
    m = res.metrics
    for b in ("0.20", "0.50"):
        got = _recount(dec, b)
        p = f"trigger_cascade/b{b}"
        for j, stage in enumerate(STAGES):
            assert m[f"{p}/stage/{stage}/reached"] == got["reached"][j]
            assert m[f"{p}/stage/{stage}/memory"] == got["memory"][j]
            assert m[f"{p}/stage/{stage}/retrieve"] == got["retrieve"][j]
            assert m[f"{p}/stage/{stage}/cost"] == pytest.approx(got["stage_cost"][j] / task.n, rel=1e-12)
        assert m[f"{p}/probes"] == got["probes"]
        assert {c: m[f"{p}/paid/{c}"] for c in COMPONENTS} == got["paid"]
        assert dec[f"cost_b{b}"].to_numpy() == pytest.approx(got["cost"], rel=1e-12)
        assert m[f"{p}/cost"] == pytest.approx(np.mean(got["cost"]), rel=1e-12)
        truth = np.where(dec[f"retrieve_b{b}"] == 1, task.extra, task.base)
        assert m[f"{p}/outcome"] == pytest.approx(truth.mean()) and dec[f"outcome_b{b}"].tolist() == truth.tolist()
        assert m[f"{p}/usage"] == pytest.approx(dec[f"retrieve_b{b}"].mean())
        # the last stage alone pays the probe (and the memory answer) on every question
        assert m[f"{p}/alone/bur_linear/probes"] == task.n
    assert "probe retrievals" in res.summary and "bur_linear alone" in res.summary


def test_each_budget_has_both_verdicts_at_the_bonferroni_level(result):
    res, _ = result
    m = res.metrics
    assert m["trigger_cascade/level"] == pytest.approx(0.05 / 4)
    for b in ("0.20", "0.50"):
        for tag in (f"trigger_cascade.verdict.b{b}", f"trigger_cascade.verdict_vs_last.b{b}"):
            assert res.tags[tag].startswith(("deploy ", "cannot tell"))
        if m[f"trigger_cascade/b{b}/p_vs_last"] >= m["trigger_cascade/level"]:
            assert res.tags[f"trigger_cascade.verdict_vs_last.b{b}"].startswith("cannot tell")


def test_thresholds_use_the_training_half_only(result):
    """searches[0] is fitted and searched on halves[0] (run.half == 1) and routes the other half:
    flipping the RAG outcomes of the questions it routes changes none of its thresholds; flipping
    those of its own calibration questions changes what it saw."""
    res, task = result

    def rerun(half: int):
        table = _table()
        flip = table["qid"].isin(task.qids[res.raw.half == half])
        table.loc[flip, "rag_bm25.correct"] = 1 - table.loc[flip, "rag_bm25.correct"]
        return _run(table)[0].raw

    routed, own = rerun(0), rerun(1)
    for a, b in zip(res.raw.rows, routed.rows):
        for x, y in [(a.cascade, b.cascade)] + list(zip(a.alone, b.alone)):
            assert x.searches[0].index == y.searches[0].index
            assert x.searches[0].mean_outcome == y.searches[0].mean_outcome
    assert any(x.cascade.searches[0].mean_outcome != y.cascade.searches[0].mean_outcome
               for x, y in zip(res.raw.rows, own.rows))


@pytest.mark.parametrize("node, key", [
    ({"stages": ["query_ridge", "uncertainty_rige", "bur_linear"]}, "protocol.settings.trigger_cascade.stages[1]"),
    ({"stages": ["bur_linear", "bur_linear"]}, "protocol.settings.trigger_cascade.stages"),
    ({"cost": "seconds"}, "protocol.settings.trigger_cascade.cost"),
    ({"grid": 0}, "protocol.settings.trigger_cascade.grid"),
    ({"tol": 2}, "protocol.settings.trigger_cascade.tol"),
])
def test_bad_settings_are_one_error_naming_the_key(node, key):
    with pytest.raises(ConfigError) as err:
        settings_of(TriggerCascadeProtocol(), node)
    assert err.value.key == key
    if "rige" in str(node):
        assert "uncertainty_ridge" in str(err.value)  # did you mean


def test_an_oracle_stage_and_a_retrieval_pair_are_refused():
    with pytest.raises(ConfigError, match="oracle cannot be a trigger stage"):
        _run(_table(60), stages=["oracle", "bur_linear"])
    with pytest.raises(ConfigError, match="needs an answer pair, memory vs RAG"):
        TriggerCascadeProtocol().check({"arms": {"base": "keep", "extra": "hybrid"}})


PLUGIN = '''
import numpy as np
from policies.base import Policy


class ShortFirst(Policy):
    """Query-only and untrained: longer questions need retrieval more."""

    features = ("q_len_words",)

    def score(self, X, ctx):
        return X["q_len_words"].to_numpy(dtype=float)
'''


def test_a_plugin_policy_is_a_stage_beside_the_built_ins(tmp_path, monkeypatch):
    root = write_plugin(tmp_path / "site", "trigger_ext", {"short.py": PLUGIN},
                        {"rag_route_bench.policies": {"short_first": "trigger_ext.short:ShortFirst"}})
    activate(monkeypatch, root)
    res, task = _run(_table(120, 2), stages=["short_first", "uncertainty_ridge", "bur_linear"])
    run = res.raw
    assert run.stages[0] == "short_first" and run.families[0] == "query-only"
    dec = res.tables["trigger_decisions"].frame
    assert dec["score_short_first"].tolist() == _table(120, 2).sort_values("qid")["feat.q_len_words"].tolist()
    assert sum(res.metrics[f"trigger_cascade/b0.50/stage/{s}/{w}"] for s in run.stages
               for w in ("memory", "retrieve")) == task.n


def test_its_size_requirement_applies_only_to_the_job_it_runs_in():
    proto = TriggerCascadeProtocol()
    cfg = {"protocol": {"settings": {"trigger_cascade": {"stages": ["query_ridge", "bur_gbm"]}}}}
    assert proto.min_documents({**cfg, "policy": {"name": "bur_gbm"}}, True)[0] == 10
    assert proto.min_documents({**cfg, "policy": {"name": "bur_linear"}}, True) is None
    assert proto.min_documents({"policy": {"name": "bur_linear"}}, True)[0] == 10  # the default stages end there
