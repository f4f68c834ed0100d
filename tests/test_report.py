"""Report command against a hand-built local store (SQLite backend, as the harness default)."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np

import pytest

from harness.report.cli import main as report_main
from harness.report.frontier import logged_frontier_points
from harness.report.frontier_plot import plot_report_frontiers
from harness.report.loading import NO_DIFFERENCE, load_sweep
from harness.report.page_content import best_values, cell_text
from harness.tracking import store_reader
from tests.helpers.mlflow_layout import EXPERIMENT, JOBS, SWEEP_ID, populate_sweep


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
    assert report_main(["--sweep", SWEEP_ID, "--tracking-uri", uri, "--out", str(out)]) == 0

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


def test_logged_frontier_points_use_logged_series(store):
    uri, _ = store
    rep = load_sweep(uri, SWEEP_ID)
    ridge = next(r for r in rep.rows if r.policy == "ridge")
    job = JOBS["ridge c=0.02 seed=0"]
    assert rep.outcome_metric == "hit_at_10"
    # deployable: x = logged realized usage at the same step
    assert logged_frontier_points(ridge, "deployable", "hit_at_10") == list(
        zip(job["usage"], job["deployable"])
    )
    # exact: no usage series logged, so x = budget = step / 100
    assert logged_frontier_points(ridge, "exact", "hit_at_10") == list(
        zip((0.10, 0.25, 0.50, 0.75, 0.90), job["exact"])
    )


def test_latest_and_experiment_filter(store, tmp_path):
    uri, _ = store
    assert report_main(["--latest", "--experiment", EXPERIMENT, "--tracking-uri", uri,
                        "--out", str(tmp_path)]) == 0
    assert f"# Sweep {SWEEP_ID}" in (tmp_path / "report.md").read_text()


def test_missing_sweep_names_id_and_uri(store, tmp_path, capsys):
    uri, _ = store
    rc = report_main(["--sweep", "nope-123", "--tracking-uri", uri, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "nope-123" in err and uri in err
    assert not (tmp_path / "o" / "report.md").exists()


def test_missing_store_is_a_clear_error(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    assert report_main(["--latest", "--tracking-uri", uri, "--out", str(tmp_path / "o")]) == 2
    assert uri in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_unknown_experiment_names_the_key(store, tmp_path, capsys):
    uri, _ = store
    rc = report_main(["--latest", "--experiment", "nope/x-vs-y", "--tracking-uri", uri,
                      "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--experiment" in err and "nope/x-vs-y" in err


def test_frontier_lines_draw_each_distinct_curve_once():
    from harness.report.frontier import frontier_lines
    from harness.report.model import JobRow, SweepReport

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

    rep = load_sweep(uri, SWEEP_ID)
    row = next(r for r in rep.rows if r.run_name == "gbm c=0.02 seed=0")
    assert row.status == "FAILED" and row.metrics == {}
    assert best_values(rep)["heldout/hit_at_10"] < 0.999
    # --latest follows the newest job run, not the parent's start time
    assert store_reader.find_latest_sweep_id(client, [ids["experiment_id"]], uri) == SWEEP_ID


def test_a_tie_marks_nobody_even_with_float_noise():
    from harness.report.columns import Column
    from harness.report.model import JobRow, SweepReport

    def row(name, value):
        return JobRow(run_id=name, run_name=name, status="FINISHED", policy=name, cost="0",
                      metrics={"heldout/utility": value, "frontier/exact_auc": value})

    third = sum([0.1] * 3) / 3  # 0.1 up to the last bit
    rows = [row("a", 0.1), row("b", third), row("c", 0.05)]
    cols = [Column("utility", "heldout/utility", "high"), Column("auc", "frontier/exact_auc", "low")]
    rep = SweepReport("s", "uri", "exp", None, rows, cols, "hit_at_10")
    assert third != 0.1
    best = best_values(rep)
    assert "heldout/utility" not in best  # a and b tie at the top: nobody is marked
    assert best["frontier/exact_auc"] == 0.05  # one job alone holds the lowest value
    assert cell_text(row("d", float("nan")), cols[0]) == "undefined"


def _other_sweep(uri: str, experiment: str, sweep_id: str, metrics: dict, alpha: str | None = None) -> str:
    """One FINISHED job run (and its parent) of ``sweep_id`` in ``experiment``, started now."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    tags = {"route_bench.sweep_id": sweep_id}
    parent = client.create_run(exp_id, run_name=f"sweep {sweep_id}", tags={**tags, "route_bench.role": "sweep"})
    run = client.create_run(
        exp_id, run_name="ridge c=0.02 seed=0",
        tags={**tags, "route_bench.role": "job", "mlflow.parentRunId": parent.info.run_id,
              "route_bench.config_hash": f"h-{experiment}", "route_bench.policy": "ridge"},
    )
    if alpha is not None:
        client.log_param(run.info.run_id, "protocol.alpha", alpha)
    for k, v in metrics.items():
        client.log_metric(run.info.run_id, k, v)
    client.set_terminated(run.info.run_id, status="FINISHED")
    client.set_terminated(parent.info.run_id, status="FINISHED")
    return run.info.run_id


def test_latest_picks_one_experiment_and_says_why(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    populate_sweep(uri, artifact_location=(tmp_path / "artifacts").as_uri(), tmp_dir=tmp_path)
    # a newer sweep, in another experiment, that reuses the same sweep id: only its own
    # experiment's runs belong to it
    rid = _other_sweep(uri, "other/keep-vs-extra", SWEEP_ID, {"heldout/hit_at_10": 0.6})
    capsys.readouterr()
    assert report_main(["--latest", "--tracking-uri", uri, "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("picked sweep"))
    assert f"picked sweep {SWEEP_ID}" in line
    assert "the sweep with the most recent job run in experiment 'other/keep-vs-extra'" in line
    assert f"other experiments: '{EXPERIMENT}'" in line and "2 experiments hold sweeps" in line
    rep = load_sweep(uri, None)
    assert rep.experiment == "other/keep-vs-extra" and [r.run_id for r in rep.rows] == [rid]
    assert line in (tmp_path / "o" / "report.md").read_text()
    # with --experiment: that experiment's latest sweep, and the line says it was asked for
    assert report_main(["--latest", "--experiment", EXPERIMENT, "--tracking-uri", uri,
                        "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert f"most recent job run in experiment '{EXPERIMENT}' (--experiment)" in out
    assert sorted(r.run_name for r in load_sweep(uri, None, EXPERIMENT).rows) == sorted(JOBS)


def test_single_experiment_latest_names_no_other(store, tmp_path, capsys):
    uri, _ = store
    assert report_main(["--latest", "--tracking-uri", uri, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"in experiment '{EXPERIMENT}'; other experiments: none hold sweeps" in out
    assert "warning" not in out  # the layout's sweep: no ceiling, no min_p logged
    assert "warning" not in (tmp_path / "report.md").read_text()
    assert report_main(["--sweep", SWEEP_ID, "--tracking-uri", uri, "--out", str(tmp_path / "s")]) == 0
    assert "picked sweep" not in capsys.readouterr().out


def test_warnings_ceiling_and_unresolvable_heldout(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _other_sweep(uri, "ceiling/exp", "sw-ceil", {
        "heldout/hit_at_10": 0.999, "heldout/base/hit_at_10": 0.9995,
        "heldout/extra_vs_base/min_p": 0.25,
    })
    capsys.readouterr()
    assert report_main(["--sweep", "sw-ceil", "--tracking-uri", uri, "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    warns = [ln for ln in out.splitlines() if ln.startswith("warning: ")]
    assert len(warns) == 2
    assert "base arm is at ceiling" in warns[0] and "hit@10 0.9995" in warns[0]
    assert warns[1].startswith(f"warning: {NO_DIFFERENCE}")
    assert "0.2500 > alpha 0.05" in warns[1]
    md = (tmp_path / "o" / "report.md").read_text()
    html_text = (tmp_path / "o" / "report.html").read_text()
    assert md.count("> **warning:**") == 2 and NO_DIFFERENCE in md
    assert html_text.count('<p class="warning">') == 2 and NO_DIFFERENCE in html_text

    # below the ceiling, and a min_p the job's own alpha can reach: no warning
    _other_sweep(uri, "fine/exp", "sw-fine", {
        "heldout/hit_at_10": 0.8, "heldout/base/hit_at_10": 0.75,
        "heldout/extra_vs_base/min_p": 0.08,
    }, alpha="0.1")
    assert load_sweep(uri, "sw-fine").warnings == []
    # the same min_p against the default alpha 0.05 warns
    _other_sweep(uri, "strict/exp", "sw-strict", {
        "heldout/hit_at_10": 0.8, "heldout/base/hit_at_10": 0.75,
        "heldout/extra_vs_base/min_p": 0.08,
    })
    (w,) = load_sweep(uri, "sw-strict").warnings
    assert w.startswith(NO_DIFFERENCE)


def _plot_rows(n_policies: int = 1) -> list:
    """ridge-like rows with exact and deployable series (deployable sd logged), policy i a bit
    lower than policy i-1, plus the two fixed decisions."""
    from harness.report.model import JobRow

    steps, usage = (25, 50, 75), (0.25, 0.5, 0.75)
    rows = []
    for i in range(n_policies):
        hits = tuple(h - 0.01 * i for h in (0.735, 0.745, 0.757))
        metrics = {f"budget/{step / 100:.2f}/deployable/hit_at_10_std": 0.004 for step in steps}
        series = {
            "frontier/exact/hit_at_10": list(zip(steps, (h + 0.002 for h in hits))),
            "frontier/exact/realized_usage": list(zip(steps, usage)),
            "frontier/exact/random_matched": [(s, 0.70 + 0.1 * u) for s, u in zip(steps, usage)],
            "frontier/exact/oracle_matched": [(s, min(1.0, 0.70 + 0.3 * u)) for s, u in zip(steps, usage)],
            "frontier/deployable/hit_at_10": list(zip(steps, hits)),
            "frontier/deployable/realized_usage": list(zip(steps, usage)),
        }
        name = "ridge" if i == 0 else f"p{i}"
        rows.append(JobRow(name, name, "FINISHED", name, "0", metrics, series))
    # listed last-first so the leaders-first order is the report's doing
    rows.reverse()
    rows += [
        JobRow("b", "always_keep", "FINISHED", "always_keep", "0",
               {"budget/fixed/hit_at_10": 0.70, "budget/fixed/realized_usage": 0.0}),
        JobRow("e", "always_extra", "FINISHED", "always_extra", "0",
               {"budget/fixed/hit_at_10": 0.80, "budget/fixed/realized_usage": 1.0}),
    ]
    return rows


def test_sweep_plot_bands_references_fixed_points_and_limits():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    from harness.report.frontier_plot import draw_frontiers
    from harness.report.model import SweepReport

    rep = SweepReport("s", "uri", "exp", None, _plot_rows(), [], "hit_at_10")
    fig, axes = plt.subplots(1, 2, sharey=True, squeeze=False)
    try:
        assert draw_frontiers(rep, axes)
        panel, spare = axes[0]
        assert panel.get_title() == "ridge" and not spare.get_visible()  # one policy: one panel
        lines = {ln.get_label(): ln for ln in panel.get_lines()}
        (band,) = [c for c in panel.collections if isinstance(c, PolyCollection)]
        ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert ys.min() == pytest.approx(0.735 - 0.004) and ys.max() == pytest.approx(0.757 + 0.004)
        assert np.allclose(lines["deployable frontier"].get_ydata(), (0.735, 0.745, 0.757))
        exact = lines["exact frontier"]
        assert exact.get_linestyle() == "--" and np.allclose(exact.get_ydata(), (0.737, 0.747, 0.759))
        rnd, orc = lines["random (matched usage)"], lines["oracle (matched usage)"]
        assert np.allclose(rnd.get_xdata(), (0.25, 0.5, 0.75)) and np.allclose(rnd.get_ydata(), [0.725, 0.75, 0.775])
        assert np.allclose(orc.get_ydata(), [0.775, 0.85, 0.925])
        fixed = {ln.get_label(): ln for ln in panel.get_lines() if "(fixed" in ln.get_label()}
        assert sorted((float(ln.get_xdata()[0]), float(ln.get_ydata()[0])) for ln in fixed.values()) == [
            (0.0, 0.70), (1.0, 0.80)]
        assert all(ln.get_linestyle() == "None" for ln in fixed.values())
        assert panel.get_xlim() == (0.0, 1.0)
        lo, hi = panel.get_ylim()
        assert lo <= 0.70 and hi >= 0.925  # references and fixed points, not only the band
    finally:
        plt.close(fig)


def test_the_two_fixed_decisions_have_distinct_markers_and_one_legend(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.plots import legend_handles
    from harness.report.frontier_plot import draw_frontiers
    from harness.report.model import SweepReport

    rep = SweepReport("s", "uri", "exp", None, _plot_rows(), [], "hit_at_10")
    fig, axes = plt.subplots(1, 1, squeeze=False)
    try:
        draw_frontiers(rep, axes)
        handles = legend_handles(axes)
        keep = handles["always_keep (fixed, usage 0)"]
        extra = handles["always_extra (fixed, usage 1)"]
        assert keep.get_marker() != extra.get_marker()
        assert keep.get_color() != extra.get_color()
        assert "*" not in (keep.get_marker(), extra.get_marker())  # not the old shared red star
    finally:
        plt.close(fig)
    # the written figure carries the legend with both (one legend for the figure)
    assert plot_report_frontiers(rep, tmp_path / "f.png")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_ten_policies_get_a_panel_each_leaders_first():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.plots import OTHERS, panel_grid
    from harness.report.frontier import frontier_panels
    from harness.report.frontier_plot import draw_frontiers
    from harness.report.model import SweepReport

    rep = SweepReport("s", "uri", "exp", None, _plot_rows(10), [], "hit_at_10")
    labels = [label for label, _ in frontier_panels(rep)]
    assert labels == ["ridge", *[f"p{i}" for i in range(1, 10)]]  # highest mean deployable outcome first
    rows, cols = panel_grid(len(labels))
    assert rows * cols >= 10 and cols <= 4
    fig, axes = plt.subplots(rows, cols, squeeze=False)
    try:
        assert draw_frontiers(rep, axes)
        shown = [ax for ax in axes.ravel() if ax.get_visible()]
        assert [ax.get_title() for ax in shown] == labels
        for ax in shown:  # the panel's policy in colour, the nine others in grey behind it
            grey = [ln for ln in ax.get_lines() if ln.get_label() == "other policies"]
            assert len(grey) == 9 and all(ln.get_color() == OTHERS for ln in grey)
    finally:
        plt.close(fig)
