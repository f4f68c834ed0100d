"""A new arm and a new protocol, each one file in a package the harness has never seen, run
through a real sweep with no harness edit (found through their entry points)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.helpers.plugin_tools import activate, write_plugin

pytestmark = pytest.mark.slow  # real sweeps through the CLI

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _python_block(page: str) -> str:
    """The one ```python block of a docs page: the tests run what the docs show."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, page
    return blocks[0]


ARM = _python_block("arms.md")
PROTOCOL = _python_block("protocols.md")
DATASET = _python_block("datasets.md")


def test_new_arm_and_protocol_run_through_a_sweep(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from harness.synthetic import synthetic_outcome_table

    root = write_plugin(tmp_path / "site", "my_ext", {"union_arm.py": ARM, "spread.py": PROTOCOL}, {
        "rag_route_bench.arms": {"union": "my_ext.union_arm:UnionArm"},
        "rag_route_bench.protocols": {"score_spread": "my_ext.spread:ScoreSpread"},
    })
    env = activate(monkeypatch, root)
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "-m", "dataset=synthetic", "dataset.n_docs=30", "experiment=none",
           "arms.extra=union", "protocol.run=[threshold,score_spread]", "+protocol.settings.score_spread.quantile=0.5",
           "policy=ridge,random", f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    runs = [r for r in MlflowClient(tracking_uri=uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracking_uri=uri).search_experiments()], max_results=100)
        if r.data.tags.get("route_bench.role") == "job"]
    assert sorted(r.data.tags["route_bench.policy"] for r in runs) == ["random", "ridge"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    # the arm's outcome is what the block computed from the base table, by hand
    base = synthetic_outcome_table(n_docs=30, questions_per_doc=5, seed=0)
    union = np.maximum(base["keep.hit@10"], base["hybrid.hit@10"]).mean()
    client = MlflowClient(tracking_uri=uri)
    for r in runs:
        m = r.data.metrics
        assert abs(m["table/extra/hit_at_10"] - union) < 1e-12 and abs(m["spread/extra_mean"] - union) < 1e-12
        assert "spread/q" in m and "heldout/utility" in m  # the plugin protocol beside protocol A
        assert r.data.tags["route_bench.arms"] == "keep-vs-union"
        files = {a.path for a in client.list_artifacts(r.info.run_id)}
        assert {"spread_scores.parquet", "spread_scores.csv", "decisions.parquet"} <= files
        path = client.download_artifacts(r.info.run_id, "spread_scores.parquet", str(tmp_path / r.info.run_id))
        assert len(pd.read_parquet(path)) == 150
        assert "score spread: quantile 0.5" in (r.data.tags.get("mlflow.note.content") or "")
    # the block's feature set is selectable by name, like a built-in set
    single = subprocess.run([sys.executable, "-m", "harness", "dataset=synthetic", "dataset.n_docs=30",
                             "experiment=none", "arms.extra=union", "protocol=threshold", "policy=ridge",
                             "policy.features=baseline+union", f"tracking.uri={uri}"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    ridge = [r for r in client.search_runs([runs[0].info.experiment_id], max_results=100)
             if r.data.tags.get("route_bench.role") == "single"]
    assert len(ridge) == 1 and ridge[0].info.status == "FINISHED"
    frozen = client.download_artifacts(ridge[0].info.run_id, "frozen/router.json", str(tmp_path / "frozen"))
    assert "union_disagree" in open(frozen, encoding="utf-8").read()
    # a typo in the plugin's setting is one line naming the key
    bad = subprocess.run([*cmd[:-2], "+protocol.settings.score_spread.quantil=0.5", "policy=ridge", f"tracking.uri={uri}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert bad.stderr.strip().splitlines()[-1].startswith("error: ConfigError: config key 'protocol.settings.score_spread.quantil'")


def test_new_dataset_and_protocol_sweep_stage_reach_console_report_and_parent_run(tmp_path, monkeypatch):
    """A package the harness has never seen holds a dataset (docs/datasets.md) and a protocol
    with a sweep stage (docs/protocols.md): a real sweep over the dataset shows the protocol's
    sweep-level table on the console, on the parent run and in the report, with no harness edit."""
    from mlflow.tracking import MlflowClient

    from tests.helpers.faq import write_faq

    root = write_plugin(tmp_path / "site", "my_data_ext", {"faq.py": DATASET, "spread.py": PROTOCOL}, {
        "rag_route_bench.datasets": {"faq": "my_data_ext.faq:FaqLoader"},
        "rag_route_bench.protocols": {"score_spread": "my_data_ext.spread:ScoreSpread"},
    })
    env = activate(monkeypatch, root)
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    data = write_faq(tmp_path / "faq.json")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "-m", "dataset=faq", f"dataset.path={data}", "experiment=none",
           "protocol.run=[threshold,score_spread]", "policy=ridge,random", f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id], max_results=100)
            if r.data.tags.get("route_bench.role") == "job"]
    assert sorted(r.data.tags["route_bench.policy"] for r in runs) == ["random", "ridge"]
    assert {r.data.params["dataset.loader"] for r in runs} == {"faq"} and {r.info.status for r in runs} == {"FINISHED"}
    _check_sweep_stage(proc.stdout, client, uri, runs, tmp_path, env)


def _check_sweep_stage(stdout: str, client, uri: str, runs: list, tmp_path: Path, env: dict) -> None:
    """The plugin's sweep-level table, one row per job with the job's own quantile, reaches the
    console, the parent run (CSV, MLflow table, metric) and the report, with no harness edit."""
    import json

    from harness.tracking.run_notes import note_text

    want = sorted((r.data.tags["route_bench.policy"], r.data.metrics["spread/q"]) for r in runs)
    assert "Score spread per job (quantile of the fitted scores)" in stdout
    shown = stdout[stdout.index("Score spread per job"):].splitlines()[2:2 + len(runs)]
    got = sorted((line.split()[0], float(line.split()[-1])) for line in shown)
    assert [p for p, _ in got] == [p for p, _ in want]
    assert all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, want))  # printed rounded
    parent = [r for r in client.search_runs([runs[0].info.experiment_id], max_results=100)
              if r.data.tags.get("route_bench.role") == "sweep"]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    pid = parent[0].info.run_id
    files = {a.path for a in client.list_artifacts(pid)}
    assert {"score_spread.csv", "score_spread.json", "policy_comparison.csv"} <= files
    table = pd.read_csv(client.download_artifacts(pid, "score_spread.csv", str(tmp_path / "parent")))
    assert sorted(zip(table["policy"], table["q"])) == want  # full precision in the CSV
    assert parent[0].data.metrics["sweep/score_spread/jobs"] == len(runs)
    note = parent[0].data.tags["mlflow.note.content"]  # the run page's description: the conclusions
    assert note.startswith("Sweep ") and "jobs, 0 failed -> FINISHED" in note
    assert "Score spread per job" in note and "Policies vs the reference" in note
    assert note_text(note).startswith("Policy vs policy")  # the conclusions first, as the console ends
    assert "summary.txt" in files
    with open(client.download_artifacts(pid, "score_spread.json", str(tmp_path / "parent_json")), encoding="utf-8") as fh:
        assert sorted(json.load(fh)["columns"]) == sorted(table.columns)
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "harness", "report", "--tracking-uri", uri, "--latest", "--out", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    page = (out / "report.md").read_text(encoding="utf-8")
    assert "## Score spread" in page and "## Policy vs policy" in page
    section = page[page.index("## Score spread"):]
    rows = {line.split()[0]: float(line.split()[-1]) for line in section.splitlines()
            if line.split() and line.split()[0] in dict(want)}
    assert rows.keys() == dict(want).keys()
    assert all(abs(rows[p] - q) <= 1e-6 * max(1.0, abs(q)) for p, q in want)  # shown with 6 significant digits
    assert "Score spread" in (out / "report.html").read_text(encoding="utf-8")
