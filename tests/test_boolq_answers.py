"""BoolQ's answer-level experiment, fast variant (the first 48 questions and their passages):
memory vs RAG over keep's top unit by the packaged model with option scoring. The sweep ends with
the decision table; the table's correctness, rescues and harms are recounted from the cached
answers and the dataset's labels; every answer is an option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
N_QUESTIONS = 48  # conf/experiment/boolq_answers_fast.yaml


@pytest.mark.slow
def test_boolq_answers_fast_sweep_ends_with_the_decision_table(tmp_path):
    from mlflow.tracking import MlflowClient

    from harness.app import build_table
    from harness.config.compose import compose_config
    from harness.data import load_dataset
    from harness.generation import score_answer

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "harness", "-m", "experiment=boolq_answers_fast", f"tracking.uri={uri}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("[4/4]") for ln in lines)
    verdicts = [ln for ln in lines if "deploy" in ln or "cannot tell" in ln]
    assert verdicts, proc.stdout[-3000:]  # the decision table's one line per budget
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("boolq_answers_fast/boolq/no_retrieval-vs-rag_keep")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("route_bench.role") == "job"]
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}

    os.environ["HARNESS_CACHE_DIR"] = env["HARNESS_CACHE_DIR"]  # the sweep's cache: read, not rebuilt
    try:
        cfg = compose_config(["experiment=boolq_answers_fast"])
        from omegaconf import OmegaConf

        plain = OmegaConf.to_container(cfg, resolve=True)
        table = build_table(plain)
        dataset = load_dataset(plain["dataset"])
    finally:
        os.environ.pop("HARNESS_CACHE_DIR", None)
    assert {r.data.tags["route_bench.table_key"] for r in runs} == {table.key}  # the table the sweep's jobs read
    frame = table.frame.set_index("qid")
    n = plain["dataset"]["n_questions"]
    assert n == N_QUESTIONS and len(frame) == n
    correct = {}
    for arm in ("no_retrieval", "rag_keep"):
        assert set(frame[f"{arm}.answer"]) <= {"Yes", "No"}  # option scoring: every answer is an option
        assert (frame[f"{arm}.cost.output_tokens"] == 0).all()
        correct[arm] = {q.qid: float(score_answer(frame.loc[q.qid, f"{arm}.answer"], list(q.answers), boolean=True).correct)
                        for q in dataset.questions}
        assert frame[f"{arm}.correct"].to_dict() == correct[arm]
    rescues = sum(correct["rag_keep"][q] > correct["no_retrieval"][q] for q in correct["rag_keep"])
    harms = sum(correct["rag_keep"][q] < correct["no_retrieval"][q] for q in correct["rag_keep"])
    m = runs[0].data.metrics
    assert (m["table/rescues"], m["table/harms"]) == (rescues, harms)
    assert m["table/base/correct"] == pytest.approx(sum(correct["no_retrieval"].values()) / n, abs=1e-12)

    # its page of the results (python -m harness results --experiments boolq_answers): every number
    # of ours read back from the store, the accuracies and rates the recount above gives
    import json

    from tests.helpers.cites import _check_cites, _ours_cells_are_cited

    out = tmp_path / "docs" / "results_boolq.md"
    proc = subprocess.run([sys.executable, "-m", "harness", "results", "--variant", "fast", "--experiments",
                           "boolq_answers", "--out", str(out), "--tracking-uri", uri],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = out.read_text(encoding="utf-8")
    sidecar = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert _check_cites(page, sidecar, client) > 10 and sidecar["missing"] == []
    _ours_cells_are_cited(page, sidecar)
    assert "## Memory or RAG on BoolQ" in page and "seed 000" not in page  # only the experiment asked for
    row = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in page.splitlines() if line.startswith("| ")}
    assert row["accuracy from memory (%)"] == f"{100 * sum(correct['no_retrieval'].values()) / n:.1f}"
    assert row["accuracy with RAG (%)"] == f"{100 * sum(correct['rag_keep'].values()) / n:.1f}"
    assert row["RAG helps (rescues, %)"] == f"{100 * rescues / n:.1f}" and row["RAG harms (%)"] == f"{100 * harms / n:.1f}"
    assert "Which router to deploy at the 50% budget" in page
