"""Cost by router family (harness/protocols/cost.py): the family follows from the features a
policy reads, and each family's expected cost per question is recomputed here by hand from
protocol B's run probabilities."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.protocols.common import KeyedFactory, forget_reused
from harness.protocols.cost import CostProtocol, router_family
from harness.protocols.registry import ProtocolContext
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.builtin import AlwaysBase, AlwaysExtra, OraclePolicy
from policies.learned import RidgePolicy
from policies.signals import FeatureDifferencePolicy, SingleSignalPolicy

CFG = {"seed": 0, "cost": {"c": 0.0}, "policy": {"name": "p"},
       "protocol": {"min_discordant": 10, "alpha": 0.05},
       "budget": {"grid": [0.25, 0.5], "n_splits": 2, "dkw_delta": 0.05, "tol": 0.02, "calibration": "oof",
                  "cal_folds": 5}}


@pytest.fixture
def answer_table():
    t = synthetic_outcome_table(n_docs=40, questions_per_doc=4, seed=5, arms=("no_retrieval", "rag_keep"))
    rng = np.random.default_rng(0)
    n = len(t)
    t["no_retrieval.cost.prompt_tokens"] = rng.integers(20, 40, n).astype(float)
    t["no_retrieval.cost.output_tokens"] = rng.integers(1, 10, n).astype(float)
    t["no_retrieval.cost.total_ms"] = rng.uniform(50, 100, n)
    t["rag_keep.cost.prompt_tokens"] = rng.integers(600, 900, n).astype(float)
    t["rag_keep.cost.output_tokens"] = rng.integers(1, 30, n).astype(float)
    t["rag_keep.cost.total_ms"] = rng.uniform(900, 1500, n)
    t["keep.cost.total_ms"] = rng.uniform(30, 60, n)  # the probe retrieval
    return t


def test_family_follows_the_declared_features():
    assert router_family(AlwaysBase()) == "query-only" and router_family(OraclePolicy()) == "oracle"
    assert router_family(SingleSignalPolicy("unc_mean_entropy")) == "uncertainty"
    assert router_family(SingleSignalPolicy("bm25_top1")) == "retrieval-score"
    assert router_family(RidgePolicy(features="uncertainty+bm25+query")) == "full"
    assert router_family(RidgePolicy(features="query")) == "query-only"
    # a RAG answer's own features exist only after both answers: nothing is saved
    assert router_family(FeatureDifferencePolicy("unc_max_entropy", "rag_keep_unc_max_entropy")) == "post-generation"


@pytest.mark.parametrize("make, family", [
    (lambda: SingleSignalPolicy("unc_mean_entropy"), "uncertainty"),
    (lambda: SingleSignalPolicy("bm25_top1"), "retrieval-score"),
    (lambda: RidgePolicy(features="uncertainty+bm25"), "full"),
    (lambda: RidgePolicy(features="query"), "query-only"),
    (AlwaysExtra, "query-only"),
    (lambda: FeatureDifferencePolicy("unc_max_entropy", "rag_keep_unc_max_entropy"), "post-generation"),
])
def test_expected_costs_by_hand(answer_table, tmp_path, make, family):
    from harness.protocols.budget import run_budget_protocol

    forget_reused()
    task = RoutingTask.from_table(answer_table, base_arm="no_retrieval", extra_arm="rag_keep")
    factory = KeyedFactory(make, family)
    ctx = ProtocolContext(cfg=CFG, artifact_dir=tmp_path, table=answer_table)
    res = CostProtocol().run(task, factory, ctx)
    assert res.tags["route_bench.router_family"] == family
    budget = run_budget_protocol(task, make, budgets=(0.25, 0.5), n_splits=2, seed=0, cost=0.0)
    t = answer_table.set_index("qid")
    for (rho, frontier), g in budget.decisions.groupby(["budget", "frontier"], dropna=False):
        if frontier not in ("deployable", "exact", "fixed"):
            continue
        per_split = []
        for _, s in g.groupby("split"):
            rows = t.loc[s["qid"]]
            p = s["prob"].to_numpy()
            g0, g1 = rows["no_retrieval.cost.total_ms"].to_numpy(), rows["rag_keep.cost.total_ms"].to_numpy()
            r = rows["keep.cost.total_ms"].to_numpy()
            cost = {"query-only": (1 - p) * g0 + p * (r + g1), "uncertainty": g0 + p * (r + g1),
                    "retrieval-score": r + (1 - p) * g0 + p * g1, "full": g0 + r + p * g1,
                    "post-generation": g0 + r + g1}[family]
            per_split.append(cost.mean())
        name = "cost/fixed/ms" if frontier == "fixed" else f"cost/{rho:g}/{frontier}/ms"
        assert res.metrics[name] == pytest.approx(float(np.mean(per_split)), rel=1e-12)
    # tokens: the probe retrieval adds none
    if make is AlwaysExtra:  # always RAG: the RAG prompt's tokens, mean over the test halves
        fixed = budget.decisions[budget.decisions["frontier"] == "fixed"]
        by_split = [t.loc[s["qid"], "rag_keep.cost.prompt_tokens"].mean() for _, s in fixed.groupby("split")]
        assert res.metrics["cost/fixed/prompt_tokens"] == pytest.approx(float(np.mean(by_split)), rel=1e-12)
    assert isinstance(res.tables["cost_by_family"].frame, pd.DataFrame)


def test_needs_an_answer_pair(tmp_path):
    t = synthetic_outcome_table(n_docs=20, questions_per_doc=4, seed=1)
    task = RoutingTask.from_table(t)
    with pytest.raises(ConfigError, match="answer pair"):
        CostProtocol().run(task, AlwaysBase, ProtocolContext(cfg=CFG, artifact_dir=tmp_path, table=t))


def test_a_retrieval_pair_is_refused_before_any_work(tmp_path, capsys):
    from harness.__main__ import main

    code = main(["protocol=answers", "dataset=synthetic", "experiment=none", f"tracking.uri=sqlite:///{tmp_path / 'x.db'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [err[0]] and "protocol 'cost' needs an answer pair" in err[0]
    assert not (tmp_path / "x.db").exists()
