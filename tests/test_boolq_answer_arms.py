"""Routing among three answer arms on BoolQ (fast variant: the first 48 questions): memory, RAG
over bm25's top unit and RAG over keep's top unit, by the packaged model with option scoring.
The sweep ends with the n-way verdict table; each arm's accuracy and token cost, and the oracle,
are recounted from the table the jobs read."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

ARMS = ("no_retrieval", "rag_bm25", "rag_keep")


@pytest.mark.slow  # three answer arms by the packaged model (about three minutes on one thread)
def test_boolq_answer_arms_fast_sweep_routes_among_three_answer_arms(tmp_path):
    from mlflow.tracking import MlflowClient
    from omegaconf import OmegaConf

    from harness.app import build_table
    from harness.config.compose import compose_config

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "harness", "-m", "experiment=boolq_answer_arms_fast",
                           f"tracking.uri={uri}"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "n-way routing" in proc.stdout and "[3/3]" in proc.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
            if r.data.tags.get("route_bench.role") == "job"]
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}

    os.environ["HARNESS_CACHE_DIR"] = env["HARNESS_CACHE_DIR"]  # the sweep's cache: read, not rebuilt
    try:
        plain = OmegaConf.to_container(compose_config(["experiment=boolq_answer_arms_fast"]), resolve=True)
        frame = build_table(plain).frame.sort_values("qid")
    finally:
        os.environ.pop("HARNESS_CACHE_DIR", None)
    assert len(frame) == 48
    y = frame[[f"{a}.correct" for a in ARMS]].to_numpy(float)
    c = frame[[f"{a}.cost.tokens" for a in ARMS]].to_numpy(float)
    m = runs[0].data.metrics
    for j, arm in enumerate(ARMS):
        assert m[f"arms/single/{arm}/outcome"] == y[:, j].sum() / len(y)
        assert m[f"arms/single/{arm}/cost"] == pytest.approx(c[:, j].mean(), rel=1e-12)
    best = [min(range(3), key=lambda j: (-y[i, j], c[i, j], j)) for i in range(len(y))]
    assert m["arms/oracle/outcome"] == pytest.approx(np.mean([y[i, b] for i, b in enumerate(best)]), abs=1e-12)
    assert m["arms/oracle/outcome"] >= max(m[f"arms/single/{a}/outcome"] for a in ARMS)
