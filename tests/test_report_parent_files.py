"""The sweep's picture and report on its parent run, without a browser: the files the sweep's end
writes (``harness.report.parent_files``) are the ``report`` command's files byte for byte, the
figure is a PNG, a figure or report that cannot be made is one note (never an exception), the
sweep's end logs them in the parent run's folder and says so; the three sentences the report opens
on, counted against hand-built verdicts; the folded sections."""

from __future__ import annotations

import math
import struct

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.protocols.sweep_stage import SweepResult
from harness.report import parent_files
from harness.report.cli import main as report_main
from harness.report.html_page import render_html
from harness.report.loading import sweep_results
from harness.report.markdown_page import render_markdown
from harness.report.model import JobRow, SweepReport
from harness.report.page_content import NO_VERDICT
from harness.report.parent_files import write_parent_report
from harness.report.summary import summary_sentences
from harness.runner import sweep_end
from harness.tracking.store_reader import pick_runs, search_runs
from tests.helpers.mlflow_layout import SWEEP_ID, populate_sweep

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A hand-built sweep in a SQLite store, and what the sweep's end holds of it: its job runs
    (one per config) and their sweep stages' results."""
    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    ids = populate_sweep(uri, artifact_location=(root / "artifacts").as_uri(), tmp_dir=root)
    client = MlflowClient(tracking_uri=uri)
    runs = search_runs(client, [ids["experiment_id"]], f"tags.`route_bench.sweep_id` = '{SWEEP_ID}'")
    jobs = pick_runs([r for r in runs if r.data.tags.get("route_bench.role") == "job"])
    results = sweep_results(client, jobs, alpha=0.05, n_boot=200, metric="hit@10")
    return {"uri": uri, "client": client, "jobs": jobs, "results": results, "parent": ids["parent"]}


def _write(sweep, folder):
    return write_parent_report(sweep["client"], sweep["jobs"], sweep["results"], folder, sweep_id=SWEEP_ID,
                               tracking_uri=sweep["uri"], parent_run_id=sweep["parent"])


def test_parent_files_are_the_report_commands_files(sweep, tmp_path):
    assert _write(sweep, tmp_path / "parent") == []
    assert report_main(["--sweep", SWEEP_ID, "--tracking-uri", sweep["uri"], "--out", str(tmp_path / "cli")]) == 0
    for name in ("report.html", "report.md", "frontier.png"):
        assert (tmp_path / "parent" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    png = (tmp_path / "parent" / "frontier.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk: a PNG with a picture in it
    assert png[:8] == PNG and png[12:16] == b"IHDR" and width > 400 and height > 300
    page = (tmp_path / "parent" / "report.html").read_text(encoding="utf-8")
    summary = page[page.index('<p class="summary">'):page.index("</p>", page.index('<p class="summary">'))]
    assert f"Sweep {SWEEP_ID} compared 2 policies at 1 cost (0.02) in 2 jobs." in summary
    assert page.index('<p class="summary">') < page.index('<section id="verdicts">')
    # deterministic: the same runs write the same bytes
    assert _write(sweep, tmp_path / "again") == []
    assert all((tmp_path / "again" / n).read_bytes() == (tmp_path / "parent" / n).read_bytes()
               for n in ("report.html", "report.md", "frontier.png"))


def test_a_figure_that_cannot_be_drawn_is_a_note_and_the_report_stays(sweep, tmp_path, monkeypatch):
    def broken(rep, path):
        path.write_bytes(b"half a picture")
        raise RuntimeError("no display\nsecond line")

    monkeypatch.setattr(parent_files, "plot_report_frontiers", broken)
    notes = _write(sweep, tmp_path)
    assert notes == ["[route-bench] the frontier figure could not be drawn (RuntimeError: no display): "
                     "report.html on the parent run is without it"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "report.md"]  # no half a picture
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "the frontier figure could not be drawn (RuntimeError: no display)" in page and "<img" not in page


def test_a_report_that_cannot_be_built_is_one_note_and_no_file(sweep, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("store went away")

    monkeypatch.setattr(parent_files, "build_report", broken)
    assert _write(sweep, tmp_path) == ["[route-bench] report.html and frontier.png not written on the parent run: "
                                       "ValueError: store went away"]
    assert list(tmp_path.iterdir()) == []
    assert write_parent_report(sweep["client"], [], {}, tmp_path, sweep_id="s", tracking_uri="u",
                               parent_run_id="p") == ["[route-bench] report.html not written on the parent run: "
                                                      "the sweep has no job run"]


class _Tracker:
    """What ``log_results`` calls on a tracker, recording the parent run's files."""

    def __init__(self):
        self.files, self.calls = [], []

    def log_artifacts(self, run_id, folder):
        from pathlib import Path

        self.files = sorted(p.name for p in Path(folder).iterdir())

    def __getattr__(self, name):  # set_note, set_experiment_note, log_params, ...: recorded only
        return lambda *args, **kwargs: self.calls.append(name)


def test_the_sweep_end_logs_the_report_with_the_parent_runs_files_and_says_so(sweep, capsys):
    outcome = sweep_end.SweepOutcome(frame=pd.DataFrame(), runless=[], failed=0, status="FINISHED",
                                     results=sweep["results"])
    tracker = _Tracker()
    tracker.client, tracker.uri = sweep["client"], sweep["uri"]
    writer = sweep_end.parent_report(tracker, sweep["parent"], sweep["jobs"], outcome, SWEEP_ID)
    sweep_end.log_results(tracker, sweep["parent"], outcome, "Sweep t", writer)
    assert {"comparison.csv", "summary.txt", "report.html", "report.md", "frontier.png"} <= set(tracker.files)
    assert outcome.report and outcome.notes == []
    sweep_end.print_where("sqlite:///mlruns/mlflow.db", "7", "abc", ["verdicts.md"], report=outcome.report)
    assert capsys.readouterr().out.splitlines() == [
        "",
        "Full tables and the frontier figure: report.html on the parent run; verbose=true prints the tables.",
        "Experiment: http://127.0.0.1:5000/#/experiments/7?workflowType=machine_learning",
        "Parent run: http://127.0.0.1:5000/#/experiments/7/runs/abc",
        "Serve it:   mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db",
    ]
    # without the report (it could not be written), the tables are named as before
    sweep_end.print_where("sqlite:///mlruns/mlflow.db", "7", "abc", ["verdicts.md"])
    assert capsys.readouterr().out.splitlines()[1].startswith("Full tables: verdicts.md on the parent run")


# ---- the three sentences ---------------------------------------------------------------------
def _row(policy, cost, status="FINISHED", fixed=False):
    metrics = {"budget/fixed/realized_usage": 0.0} if fixed else {}
    return JobRow(f"{policy} c={cost}", f"{policy} c={cost}", status, policy, cost, metrics)


def _report(results, rows=None):
    rows = rows or [_row("ridge", "0.0"), _row("ridge", "0.02"), _row("gbm", "0.0"), _row("gbm", "0.02", "FAILED"),
                    _row("always_keep", "0.0", fixed=True), _row("always_keep", "0.02", fixed=True)]
    return SweepReport("s-1", "sqlite:///mlruns/mlflow.db", "exp", "parent", rows, [], None, results=results)


def _verdicts(kinds, plans, here=290):
    return pd.DataFrame({"cost": [0.0, 0.0, 0.02, 0.02, 0.05][:len(kinds)], "budget": [0.25, 0.5, 0.25, 0.5, 0.25][:len(kinds)],
                         "kind": kinds, "plan_questions": plans, "dataset_questions": here})


def test_the_summary_counts_the_verdicts_and_names_the_closest_plan():
    frame = _verdicts(["deploy", "cannot tell", "cannot tell", "no router", "over budget"],
                      [math.nan, 1620.0, 555.0, math.nan, math.nan])
    rep = _report({"budget": SweepResult(title="Decision table", tables={"verdicts": frame})})
    assert summary_sentences(rep, NO_VERDICT) == [
        "Sweep s-1 compared 3 policies (2 routing policies and 1 fixed decision: always_keep) at 2 costs (0, 0.02) "
        "in 6 jobs, 1 of them not finished.",
        "Of its 5 cost x budget cells, 1 deploy a router, 1 deploy no router, 1 over budget and 2 cannot tell.",
        'Next: deploy the router a "deploy" row names, at its cost and budget; 2 cells cannot tell with these '
        "questions: the closest (cost 0.02, budget 0.25) needs about 555 questions (here 290).",
    ]
    # the same sentences open both pages, before the verdicts
    text = " ".join(summary_sentences(rep, NO_VERDICT))
    page = render_html(rep, None)
    assert page.index(text.replace('"', "&quot;")) < page.index('id="verdicts"')
    md = render_markdown(rep, None)
    assert md.splitlines()[2] == text and md.index(text) < md.index("## Verdicts")


@pytest.mark.parametrize("kinds, plans, last", [
    (["no router", "no router"], [math.nan, math.nan], "Next: keep the fixed decision: no router beats it in any cell."),
    (["deploy", "no router"], [math.nan, math.nan], 'Next: deploy the router a "deploy" row names, at its cost and budget.'),
    (["no router", "cannot tell"], [math.nan, math.nan],
     "Next: keep the fixed decision; the 1 cell that cannot tell has no sample-size plan (verdict table)."),
])
def test_the_next_step_follows_the_verdicts(kinds, plans, last):
    rep = _report({"budget": SweepResult(title="Decision table", tables={"verdicts": _verdicts(kinds, plans)})})
    assert summary_sentences(rep, NO_VERDICT)[2] == last


def test_without_protocol_b_the_summary_says_there_is_no_verdict_and_counts_the_open_comparisons():
    open_ = [{"where": "a"}, {"where": "b"}, {"where": "c"}]
    rep = _report({"threshold": SweepResult(title="Policy vs policy", text="t", open_comparisons=open_)},
                  rows=[_row("ridge", "0.0"), _row("random", "0.0")])
    assert summary_sentences(rep, NO_VERDICT) == [
        "Sweep s-1 compared 2 policies at 1 cost (0) in 2 jobs.",
        NO_VERDICT,
        "Next: run protocol B (protocol=budget) for a verdict per cost and budget; 3 comparisons here cannot be "
        "told apart with these questions (Conclusions).",
    ]


def test_sections_without_the_answer_and_the_conclusions_are_folded():
    section = SweepResult(title="Policy vs policy", text="t", markdown="## Policy vs policy\n\n```\nA vs B\n```\n",
                          html='<h2>Policy vs policy</h2>\n<pre class="comparison">A vs B</pre>\n',
                          conclusion="one conclusion")
    page = render_html(_report({"threshold": section}), None)
    folded = page[page.index('<section id="protocol-threshold">'):]
    assert folded.startswith('<section id="protocol-threshold">\n<details class="fold"><summary><h2>Policy vs policy'
                             '</h2></summary>\n<pre class="comparison">A vs B</pre>\n</details>')
    assert page.count("<h2>Policy vs policy</h2>") == 1  # the heading once, as the fold's summary
    conclusions = page[page.index('<section id="conclusions">'):page.index('<section id="frontiers">')]
    assert '<details class="fold"><summary><h2>Conclusions</h2></summary>' in conclusions
    assert conclusions.index("<details") < conclusions.index("<li>one conclusion</li>") < conclusions.index("</details>")
    md = render_markdown(_report({"threshold": section}), None)
    part = md[md.index("## Policy vs policy"):md.index("## Conclusions")]
    assert part.count("## Policy vs policy") == 1
    assert part.index("<details><summary>Show</summary>") < part.index("A vs B") < part.index("</details>")
    concl = md[md.index("## Conclusions"):md.index("## Frontiers")]
    assert concl.index("<details>") < concl.index("- one conclusion") < concl.index("</details>")
