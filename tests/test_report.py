"""Report command against a hand-built local store (SQLite backend, as the harness default)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from harness import report
from tests._mlflow_layout import EXPERIMENT, JOBS, SWEEP_ID, populate_sweep


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    ids = populate_sweep(uri, artifact_location=(root / "artifacts").as_uri(), tmp_dir=root)
    return uri, ids


class _TableParser(HTMLParser):
    """Collects the comparison table's cells and checks tags are balanced (well-formedness)."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.rows, self.cell, self.in_table = [], [], None, False
        self.best_cells, self.imgs, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag in self.VOID:
            return
        self.stack.append(tag)
        if tag == "table" and a.get("id") == "comparison":
            self.in_table = True
        if self.in_table and tag == "tr":
            self.rows.append([])
        if self.in_table and tag in ("td", "th"):
            self.cell = ""
            if a.get("class") == "best":
                self.best_cells.append((len(self.rows) - 1, len(self.rows[-1])))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> with open {self.stack[-3:]}")
            return
        self.stack.pop()
        if self.in_table and tag in ("td", "th"):
            self.rows[-1].append(self.cell)
            self.cell = None
        if tag == "table":
            self.in_table = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def test_report_table_equals_logged_metrics(store, tmp_path):
    uri, ids = store
    out = tmp_path / "rep"
    assert report.main(["--sweep", SWEEP_ID, "--tracking-uri", uri, "--out", str(out)]) == 0

    p = _TableParser()
    p.feed((out / "report.html").read_text())
    p.close()
    assert p.errors == [] and p.stack == []
    header, *body = p.rows
    assert header[:4] == ["job", "policy", "cost", "status"]
    col = {h: i for i, h in enumerate(header)}
    # the failed attempt is superseded by the finished rerun of the same config hash
    assert sorted(r[0] for r in body) == sorted(JOBS)
    for row in body:
        job = JOBS[row[0]]
        m = job["metrics"]
        assert row[col["policy"]] == job["policy"]
        assert row[col["cost"]] == "0.02"
        assert row[col["status"]] == "FINISHED"
        assert float(row[col["heldout hit@10"]]) == pytest.approx(m["heldout/hit_at_10"], abs=5e-5)
        assert float(row[col["heldout utility"]]) == pytest.approx(m["heldout/utility"], abs=5e-5)
        assert float(row[col["extra share"]]) == pytest.approx(m["heldout/extra_share"], abs=5e-5)
        assert float(row[col["exact-frontier AUC"]]) == pytest.approx(m["frontier/exact_auc"], abs=5e-5)
        diff = row[col["utility diff vs base [95% CI]"]]
        want = (m["heldout/diff_vs_base/utility"], m["heldout/diff_vs_base/utility/ci_low"],
                m["heldout/diff_vs_base/utility/ci_high"])
        assert diff == f"{want[0]:.4f} [{want[1]:.4f}, {want[2]:.4f}]"
        for b in ("0.25", "0.50"):
            v = row[col[f"deployable violation @{b}"]]
            assert float(v) == pytest.approx(m[f"budget/{b}/deployable/violation_rate"])

    # best marks: ridge wins hit/utility/diff/AUC and violation@0.50 is won by random (0.0)
    names = [r[0] for r in body]
    ridge, rnd = names.index("ridge c=0.02 seed=0") + 1, names.index("random c=0.02 seed=0") + 1
    marked = set(p.best_cells)
    for h in ("heldout hit@10", "heldout utility", "exact-frontier AUC",
              "utility diff vs base [95% CI]", "deployable violation @0.25"):
        assert (ridge, col[h]) in marked and (rnd, col[h]) not in marked, h
    assert (rnd, col["deployable violation @0.50"]) in marked
    assert (ridge, col["deployable violation @0.50"]) not in marked
    assert not any(c == col["extra share"] for _, c in marked)

    png = (out / "frontier.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert any(src.startswith("data:image/png;base64,") for src in p.imgs)

    md = (out / "report.md").read_text()
    assert "![frontiers](frontier.png)" in md
    assert f"`{EXPERIMENT}`" in md and ids["parent"] in md
    md_rows = [line for line in md.splitlines() if line.startswith("| ridge")]
    assert len(md_rows) == 1 and "**0.8125**" in md_rows[0]


def test_frontier_points_use_logged_series(store):
    uri, _ = store
    rep = report.load_sweep(uri, SWEEP_ID)
    ridge = next(r for r in rep.rows if r.policy == "ridge")
    job = JOBS["ridge c=0.02 seed=0"]
    assert rep.outcome_metric == "hit_at_10"
    # deployable: x = logged realized usage at the same step
    assert report.frontier_points(ridge, "deployable", "hit_at_10") == list(
        zip(job["usage"], job["deployable"])
    )
    # exact: no usage series logged, so x = budget = step / 100
    assert report.frontier_points(ridge, "exact", "hit_at_10") == list(
        zip((0.10, 0.25, 0.50, 0.75, 0.90), job["exact"])
    )


def test_latest_and_experiment_filter(store, tmp_path):
    uri, _ = store
    assert report.main(["--latest", "--experiment", EXPERIMENT, "--tracking-uri", uri,
                        "--out", str(tmp_path)]) == 0
    assert f"# Sweep {SWEEP_ID}" in (tmp_path / "report.md").read_text()


def test_missing_sweep_names_id_and_uri(store, tmp_path, capsys):
    uri, _ = store
    rc = report.main(["--sweep", "nope-123", "--tracking-uri", uri, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "nope-123" in err and uri in err
    assert not (tmp_path / "o" / "report.md").exists()


def test_missing_store_is_a_clear_error(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    assert report.main(["--latest", "--tracking-uri", uri, "--out", str(tmp_path / "o")]) == 2
    assert uri in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_unknown_experiment_names_the_key(store, tmp_path, capsys):
    uri, _ = store
    rc = report.main(["--latest", "--experiment", "nope/x-vs-y", "--tracking-uri", uri,
                      "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--experiment" in err and "nope/x-vs-y" in err


def test_frontier_lines_draw_each_distinct_curve_once():
    from harness.report import JobRow, SweepReport, frontier_lines

    def row(name, policy, auc_shift):
        series = {
            "frontier/exact/hit_at_10": [(10, 0.5 + auc_shift), (50, 0.6)],
            "frontier/exact/realized_usage": [(10, 0.1), (50, 0.5)],
        }
        return JobRow(run_id=name, run_name=name, status="FINISHED", policy=policy, cost="0", metrics={}, series=series)

    rows = [row("ridge c=0", "ridge", 0.0), row("ridge c=0.02", "ridge", 0.0),  # same curve: once
            row("gbm seed=0", "gbm", 0.0), row("gbm seed=1", "gbm", 0.01)]  # two curves: by run name
    rep = SweepReport("s", "uri", "exp", None, rows, [], "hit_at_10")
    lines = frontier_lines(rep, "exact")
    assert [label for label, _ in lines] == ["ridge", "gbm seed=0", "gbm seed=1"]
    assert lines[0][1] == [(0.1, 0.5), (0.5, 0.6)]


def test_unfinished_job_shows_status_with_blank_metrics(tmp_path):
    """A config whose only run FAILED after logging a (great) metric: listed, blank, never best."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = populate_sweep(uri, artifact_location=(tmp_path / "artifacts").as_uri(), tmp_dir=tmp_path)
    client = MlflowClient(tracking_uri=uri)
    run = client.create_run(
        ids["experiment_id"], run_name="gbm c=0.02 seed=0",
        tags={"route_bench.sweep_id": SWEEP_ID, "route_bench.role": "job",
              "mlflow.parentRunId": ids["parent"], "route_bench.config_hash": "only-failed",
              "route_bench.policy": "gbm"},
    )
    client.log_metric(run.info.run_id, "heldout/hit_at_10", 0.999)
    client.set_terminated(run.info.run_id, status="FAILED")

    rep = report.load_sweep(uri, SWEEP_ID)
    row = next(r for r in rep.rows if r.run_name == "gbm c=0.02 seed=0")
    assert row.status == "FAILED" and row.metrics == {}
    assert report.best_values(rep)["heldout/hit_at_10"] < 0.999
    # --latest follows the newest job run, not the parent's start time
    assert report.find_latest_sweep_id(client, [ids["experiment_id"]], uri) == SWEEP_ID


def test_a_tie_marks_nobody_even_with_float_noise():
    from harness.report import Column, JobRow, SweepReport

    def row(name, value):
        return JobRow(run_id=name, run_name=name, status="FINISHED", policy=name, cost="0",
                      metrics={"heldout/utility": value, "frontier/exact_auc": value})

    third = sum([0.1] * 3) / 3  # 0.1 up to the last bit
    rows = [row("a", 0.1), row("b", third), row("c", 0.05)]
    cols = [Column("utility", "heldout/utility", "high"), Column("auc", "frontier/exact_auc", "low")]
    rep = SweepReport("s", "uri", "exp", None, rows, cols, "hit_at_10")
    assert third != 0.1
    best = report.best_values(rep)
    assert "heldout/utility" not in best  # a and b tie at the top: nobody is marked
    assert best["frontier/exact_auc"] == 0.05  # one job alone holds the lowest value
    assert report.cell_text(row("d", float("nan")), cols[0]) == "undefined"
