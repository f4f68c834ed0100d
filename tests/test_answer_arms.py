"""Answer arms with the real packaged model (SmolLM2-135M-Instruct on llama.cpp): the blocks'
columns are what the answer metrics say of the generated text, RAG reads keep's top units, the
uncertainty features are those of the no-retrieval answer, and a no-retrieval-vs-RAG sweep
runs every protocol, the cost by router family included."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from tests.helpers.qasper import FIXTURE, _copies

SHORT = {"max_tokens": 16}


@pytest.mark.slow
def test_answer_blocks_hold_what_the_metrics_say_of_the_text(tmp_path, isolated_cache):
    from harness.app import build_table
    from harness.data import load_dataset
    from harness.generation import score_answer
    from harness.generation.arms import NoRetrievalArm, RagKeepArm

    cfg = {"dataset": {"name": "qasper", "loader": "qasper", "path": str(FIXTURE)},
           "arms": {"base": "no_retrieval", "extra": "rag_keep", "metric": "correct",
                    "blocks": [{"name": "no_retrieval", **SHORT}, {"name": "rag_keep", **SHORT, "k": 2}]},
           "reranker": {"name": "maxsim"}}
    table = build_table(cfg)
    frame = table.frame.set_index("qid")
    dataset = load_dataset(cfg["dataset"])
    assert len(frame) == 6 and set(table.info["blocks"]) == {"no_retrieval", "rag_keep"}
    for name, arm in (("no_retrieval", NoRetrievalArm(**SHORT)), ("rag_keep", RagKeepArm(**SHORT, k=2))):
        (made,) = table.info["blocks"][name]["built_with"]  # what the generator said it ran with
        assert made["generator"]["backend"] == "llama.cpp" and made["engine"] == arm.identity()["engine"]
    for q in dataset.questions:
        row = frame.loc[q.qid]
        for arm in ("no_retrieval", "rag_keep"):
            s = score_answer(row[f"{arm}.answer"], list(q.answers), boolean=(q.answer_type == "yes_no") or None)
            assert row[f"{arm}.correct"] == float(s.correct) and row[f"{arm}.f1"] == s.f1
            assert row[f"{arm}.cost.tokens"] == row[f"{arm}.cost.prompt_tokens"] + row[f"{arm}.cost.output_tokens"]
            assert row[f"{arm}.cost.output_tokens"] <= SHORT["max_tokens"] + 1
        # RAG shows keep's top 2 units; its prompt is longer than the one from memory
        assert list(row["rag_keep.units"]) == [str(u) for u in list(row["keep.top10"])[:2]]
        assert row["rag_keep.cost.prompt_tokens"] > row["no_retrieval.cost.prompt_tokens"]
        assert all(math.isfinite(row[f"feat.unc_{f}"]) for f in ("mean_entropy", "max_entropy", "min_confidence"))
        assert 0 <= row["feat.unc_min_confidence"] <= 1 and row["feat.unc_answer_tokens"] >= 0
    # warm: the cached blocks are read, nothing is generated again (same numbers, same key)
    again = build_table(cfg)
    assert again.key == table.key and again.frame.equals(table.frame)


@pytest.mark.slow
def test_no_retrieval_vs_rag_sweep_runs_every_protocol(tmp_path):
    from mlflow.tracking import MlflowClient

    data = _copies(tmp_path / "qasper.json", 6)  # 12 papers, 36 questions
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "harness", "-m", "arms=noret_rag", "dataset=qasper", f"dataset.path={data}",
           "protocol=answers", "experiment=none", "policy=signal_unc_mean_entropy,query_ridge,bur_linear",
           "arms.blocks.0.max_tokens=16", "arms.blocks.1.max_tokens=16", "arms.blocks.1.k=2", "budget.n_splits=2",
           f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("qasper/no_retrieval-vs-rag_keep")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("route_bench.role") == "job"]
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}
    families = {r.data.tags["route_bench.policy"]: r.data.tags["route_bench.router_family"] for r in runs}
    assert families == {"signal_unc_mean_entropy": "uncertainty", "query_ridge": "query-only", "bur_linear": "full"}
    for r in runs:
        tags = r.data.tags  # every run says how its answers were made (Generator.describe())
        assert tags["route_bench.generator.no_retrieval.n_threads"] == "1"
        assert tags["route_bench.generator.rag_keep.backend"] == "llama.cpp"
        assert tags["route_bench.generator.rag_keep.engine_version"]
        m = r.data.metrics
        assert {"heldout/utility", "frontier/exact_auc", "gain/pearson", "cost/0.25/deployable/ms"} <= set(m)
        assert 0 <= m["table/base/correct"] <= 1 and 0 <= m["table/extra/correct"] <= 1
        files = {a.path for a in client.list_artifacts(r.info.run_id)}
        assert {"cost_by_family.csv", "cost_by_family.parquet", "budget_decisions.parquet"} <= files
