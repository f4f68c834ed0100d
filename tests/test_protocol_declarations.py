"""A plugin protocol that declares a size requirement, two outputs (one a headline) and a sweep
stage gets, with no harness edit: the pre-flight's refusal of too small a table, its headline
on the console's job lines, its columns in the report and in the sweep's comparison table, and
its table on the parent run (a real sweep through the CLI)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.protocols.outputs import Output, expand, headline_line, logged_budgets
from tests.helpers.plugin_tools import activate, write_plugin

DOCS = Path(__file__).resolve().parent.parent / "docs"
PROTOCOL = re.findall(r"```python\n(.*?)```", (DOCS / "protocols.md").read_text(encoding="utf-8"), flags=re.S)[0]


def test_outputs_expand_metric_and_budgets():
    outs = (Output("heldout/{metric}", "heldout {metric}", headline=True, short="{metric}"),
            Output("budget/{budget}/x", "x @{budget}", False))
    got = expand(outs, "hit_at_10", ["0.10", "0.25"])
    assert [(o.key, o.label, o.better) for o in got] == [
        ("heldout/hit_at_10", "heldout hit@10", "high"), ("budget/0.10/x", "x @0.10", "low"),
        ("budget/0.25/x", "x @0.25", "low")]
    assert [o.key for o in expand(outs, None, ["0.5"])] == ["budget/0.5/x"]  # no metric: its outputs left out
    assert logged_budgets({"budget/0.50/x", "budget/0.10/x", "budget/0.25/y"}, outs) == ["0.10", "0.50"]
    assert headline_line("T", got, {"heldout/hit_at_10": 0.81234}) == "T: hit@10=0.8123"
    assert headline_line("T", got, {"budget/0.10/x": 1.0}) is None  # not a headline


@pytest.mark.slow  # two real sweeps and a report through the CLI
def test_a_plugin_protocols_declarations_reach_every_screen(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    root = write_plugin(tmp_path / "site", "decl_ext", {"spread.py": PROTOCOL},
                        {"rag_route_bench.protocols": {"score_spread": "decl_ext.spread:ScoreSpread"}})
    env = activate(monkeypatch, root)
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    base = [sys.executable, "-m", "harness", "-m", "dataset=synthetic", "experiment=none",
            "protocol.run=[score_spread]", "policy=ridge,random", f"tracking.uri={uri}"]

    # too small a table: refused by the pre-flight before any job, one line with the counts
    small = subprocess.run([*base, "dataset.n_docs=8"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert small.returncode == 2, small.stdout[-2000:] + small.stderr[-2000:]
    last = small.stderr.strip().splitlines()[-1]
    assert last.startswith("error: DataSizeError") and "too few documents for protocol score_spread" in last
    assert "in 8 documents, it needs at least 10 (a quantile over the questions of at least 10 documents)" in last
    assert "Traceback" not in small.stderr and "[1/2]" not in small.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert [r for r in runs if r.info.status == "RUNNING"] == []

    proc = subprocess.run([*base, "dataset.n_docs=30"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    jobs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
            if r.data.tags.get("route_bench.role") == "job"]
    assert sorted(r.data.tags["route_bench.policy"] for r in jobs) == ["random", "ridge"]
    for r in jobs:  # the headline: on the job's console line and as a headline/ metric
        q = r.data.metrics["spread/q"]
        assert f"-> Score spread: q={q:.4f}" in proc.stdout
        assert r.data.metrics["headline/spread/q"] == q
    parent = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
              if r.data.tags.get("route_bench.role") == "sweep"][-1]
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"score_spread.csv", "comparison.csv"} <= files  # its sweep stage's table on the parent run
    comparison = pd.read_csv(client.download_artifacts(parent.info.run_id, "comparison.csv", str(tmp_path / "p")))
    assert "q" in comparison.columns and "utility" not in comparison.columns  # only the protocols it ran
    assert sorted(comparison["q"]) == pytest.approx(sorted(r.data.metrics["spread/q"] for r in jobs))

    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "harness", "report", "--tracking-uri", uri, "--latest", "--out", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    page = (out / "report.md").read_text(encoding="utf-8")
    header = next(line for line in page.splitlines() if line.startswith("|") and "policy" in line)
    assert "score quantile" in header and "extra arm mean" in header  # its declared labels as columns
    assert "## Score spread" in page
