"""The decision table end to end: a synthetic sweep through the real CLI logs it on the parent
run (CSV, Markdown, HTML and an MLflow table) and prints it; the report command rebuilds and
filters it; headless Chromium sees it in the MLflow UI (screenshot in ``test-artifacts/``)."""

from __future__ import annotations


import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.tracking import run_notes
from harness.store_schema import TAG_NOTE, TAG_POLICY
from tests.helpers.browser import ARTIFACTS, FLAGS
from tests.helpers.sweeps import SMALL, run_cli, runs_by_role, store_uri

pytestmark = pytest.mark.slow

POLICIES = ("always_keep", "ridge", "random", "oracle")
SWEEP = ["-m", *SMALL, f"policy={','.join(POLICIES)}", "cost.c=0,0.02", "protocol=threshold_budget"]
BUDGETS = (0.1, 0.25, 0.5, 0.75, 0.9)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("dtsweep")
    proc = run_cli(SWEEP, root, root / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    client, parents, jobs = runs_by_role(store_uri(root))
    assert len(parents) == 1 and len(jobs) == len(POLICIES) * 2
    return {"root": root, "proc": proc, "client": client, "parent": parents[0], "jobs": jobs}


def _download(client, run_id, name, folder):
    folder.mkdir(parents=True, exist_ok=True)
    return client.download_artifacts(run_id, name, str(folder))


def test_parent_run_holds_the_decision_table(sweep, tmp_path):
    client, parent = sweep["client"], sweep["parent"]
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"decision_table.csv", "decision_table.json", "decision_table.md", "decision_table.html"} <= arts
    logged = json.loads(client.get_run(parent.info.run_id).data.tags["mlflow.loggedArtifacts"])
    assert {"path": "decision_table.json", "type": "table"} in logged  # the UI's table view
    table = pd.read_csv(_download(client, parent.info.run_id, "decision_table.csv", tmp_path))
    with open(_download(client, parent.info.run_id, "decision_table.json", tmp_path)) as fh:
        body = json.load(fh)
    assert body["columns"] == list(table.columns) and len(body["data"]) == len(table)
    # 2 costs x (3 ranking policies x 5 budgets + 1 fixed decision)
    assert len(table) == 2 * (3 * len(BUDGETS) + 1)
    # every deployable number is the job's own logged metric (one seed: mean and sd over splits)
    jobs = {(j.data.tags[TAG_POLICY], float(j.data.params["cost.c"])): j for j in sweep["jobs"]}
    for row in table.itertuples():
        m = jobs[(row.policy, row.cost)].data.metrics
        if row.kind == "fixed":
            assert np.isnan(row.budget) and row.usage == 0.0 and pd.isna(row.mark)
            assert row.utility == pytest.approx(m["budget/fixed/utility"])
            continue
        b = f"{row.budget:.2f}"
        assert row.utility == pytest.approx(m[f"budget/{b}/deployable/utility"])
        assert row.utility_sd == pytest.approx(m[f"budget/{b}/deployable/utility_std"])
        assert row.usage == pytest.approx(m[f"budget/{b}/deployable/realized_usage"])
        assert row.violation_rate == pytest.approx(m[f"budget/{b}/deployable/violation_rate"])
        assert row.exact_utility == pytest.approx(m[f"budget/{b}/exact/utility"])
        assert row.random_utility == pytest.approx(m[f"budget/{b}/deployable/random_matched/utility"])
        assert row.oracle_utility == pytest.approx(m[f"budget/{b}/deployable/oracle_matched/utility"])
    # the reference of each cost and budget: inside each split, the best calibration-half utility
    # among ridge and random on THAT split (recomputed here from the jobs' frontiers)
    fronts = {key: pd.read_parquet(_download(client, j.info.run_id, "frontiers.parquet", tmp_path / j.info.run_id))
              for key, j in jobs.items() if key[0] in ("ridge", "random")}
    for (cost, budget), part in table[table.kind != "fixed"].groupby(["cost", "budget"]):
        deployable = part[part.kind == "deployable"]
        per_split = {}
        for policy in ("random", "ridge"):  # name order: a tie goes to the first
            f = fronts[(policy, cost)]
            f = f[(f.frontier == "deployable") & (f.budget.round(6) == round(budget, 6))]
            for split, value in zip(f.split, f.cal_utility):
                if split not in per_split or value > per_split[split][1] + 1e-12:
                    per_split[split] = (policy, value)
        chosen = {p for p, _ in per_split.values()}
        if len(chosen) == 1:
            best = chosen.pop()
            assert (part.reference == best).all() and part.loc[part.policy == best, "mark"].item() == "ref"
        else:
            assert part.reference.str.startswith("best on calibration per split").all()
            assert "ref" not in set(part.mark.dropna())
        assert part.loc[part.policy == "oracle", "mark"].isna().all()
        assert set(deployable.mark.dropna()) <= {"ref", "=", "<", ">"}
    # the child runs carry the per-question decisions the table is paired on
    ridge = jobs[("ridge", 0.02)]
    dec = pd.read_parquet(_download(client, ridge.info.run_id, "budget_decisions.parquet", tmp_path))
    frontiers = pd.read_parquet(_download(client, ridge.info.run_id, "frontiers.parquet", tmp_path))
    got = dec.groupby(["split", "budget", "frontier"]).utility.mean()
    want = frontiers.set_index(["split", "budget", "frontier"]).utility.loc[got.index]
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), atol=1e-12)


def _end(stdout: str) -> list[str]:
    """The console from the sweep's end line on."""
    lines = stdout.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("[route-bench] sweep ") and " failed -> " in line):]


def test_console_shows_one_verdict_table_not_the_full_tables(sweep, tmp_path):
    """The sweep ends with one verdict line per cost and budget (the words of verdicts.csv on the
    parent run), lines of at most 100 characters; the full decision and policy tables stay in
    the parent run's artifacts (verbose=true prints them)."""
    end = _end(sweep["proc"].stdout)
    assert max(len(line) for line in end) <= 100, "\n".join(end)
    parent = sweep["parent"].info.run_id
    verdicts = pd.read_csv(_download(sweep["client"], parent, "verdicts.csv", tmp_path))
    assert len(verdicts) == 2 * len(BUDGETS)
    head = next(i for i, line in enumerate(end) if line.startswith("Verdict per cost and budget"))
    assert end[head + 1].split()[:3] == ["cost", "rho", "verdict"]
    rows = end[head + 2:head + 2 + len(verdicts)]
    for line, v in zip(rows, verdicts.itertuples()):
        assert line.split()[:2] == [f"{v.cost:g}", f"{v.budget:g}"]
        # the console's verdict column: the lead of the CSV's sentence (a per-split choice starred)
        from harness.protocols.verdict_render import short_verdict

        lead = short_verdict(v._asdict())
        assert lead and lead in line
        if str(v.policy).startswith("best on calibration per split ("):  # a per-split choice: counts in the CSV
            assert any(x.startswith("* the splits chose different routers") for x in end)
    assert "Decision table at" not in "\n".join(end) and "Policies vs the reference" not in "\n".join(end)
    assert end[-1].startswith("Serve it:   mlflow ui --backend-store-uri sqlite:///")
    assert end[-2] == f"Parent run: http://127.0.0.1:5000/#/experiments/{sweep['parent'].info.experiment_id}/runs/{parent}"
    assert "Downloading artifacts" not in sweep["proc"].stderr  # no progress-bar noise


def test_parent_run_holds_the_verdicts_as_params_metrics_and_pages(sweep, tmp_path):
    """Each verdict is a parent-run param (its sentence, a sortable column) and metrics (deploy
    code, the router's difference and interval); each budget's decision table one small
    Markdown page; the description opens on the verdict table."""
    from harness.protocols import verdict as vd

    client = sweep["client"]
    run = client.get_run(sweep["parent"].info.run_id)
    verdicts = pd.read_csv(_download(client, run.info.run_id, "verdicts.csv", tmp_path))
    for v in verdicts.itertuples():
        key = f"verdict/c{v.cost:g}/b{v.budget:g}"
        assert run.data.params[key] == v.verdict and run.data.params[f"{key}/policy"] == v.policy
        code = {"deploy": 1.0, "no router": 0.0, "cannot tell": -1.0, "over budget": -2.0}
        assert run.data.metrics[f"{key}/deploy"] == code[v.kind]
        assert v.kind in vd.KINDS and v.verdict.startswith(("deploy ", "deploy no router: ", "cannot tell",
                                                            "over budget: "))
        assert str(v.policy) in v.verdict  # every verdict names the router it is about
        if np.isfinite(v.diff):
            assert run.data.metrics[f"{key}/diff"] == pytest.approx(v.diff)
    for job in sweep["jobs"]:  # each job's own verdict: a tag, a sortable column beside its metrics
        cost, policy = float(job.data.params["cost.c"]), job.data.tags["route_bench.policy"]
        mine = verdicts[(verdicts["cost"] == cost) & (verdicts["policy"] == policy)]
        tag = job.data.tags.get("verdict")
        if len(mine):
            for kind in vd.KINDS:
                budgets = " ".join(f"b{b:g}" for b in mine.loc[mine["kind"] == kind, "budget"])
                assert (f"{kind} ({budgets})" in tag) == bool(budgets), (tag, kind, budgets)
        else:
            assert tag.startswith(f"not compared (the router at c={cost:g}: "), tag
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {f"decision_table_rho{b:g}.md" for b in BUDGETS} | {"verdicts.md"} <= arts
    with open(_download(client, run.info.run_id, "decision_table_rho0.25.md", tmp_path), encoding="utf-8") as fh:
        page = fh.read()
    assert page.startswith("# Decision table at budget 0.25") and "ref (best on calibration)" in page
    assert len(page.splitlines()) < 20  # small enough for the UI to render whole
    note = run_notes.note_text(run.data.tags[TAG_NOTE])
    assert note.startswith("Verdict per cost and budget")


def test_sweep_ends_with_what_the_questions_can_show(sweep, tmp_path):
    """The console's closing power line: over the comparisons of the policy comparison and the decision
    table that cannot be told apart (counted from the parent run's CSVs), in how many no
    difference is detectable with these questions, and the smallest sample-size plan."""
    parent = sweep["parent"].info.run_id
    table = pd.read_csv(_download(sweep["client"], parent, "decision_table.csv", tmp_path))
    comp = pd.read_csv(_download(sweep["client"], parent, "policy_comparison.csv", tmp_path))
    open_dt = table[(table["mark"] == "=") & ~table["note"].fillna("").str.contains("same decisions")]
    open_pc = comp[comp["verdict"] == "cannot be told from reference"]
    n = len(open_dt) + len(open_pc)
    blind = int((~open_dt["detectable"].astype(bool)).sum() + (~open_pc["detectable"].astype(bool)).sum())
    end = _end(sweep["proc"].stdout)
    first = next(i for i, line in enumerate(end) if line.startswith("Overall: "))
    last = " ".join([end[first], *[x.strip() for x in itertools.takewhile(lambda x: x.startswith("  "), end[first + 1:])]])
    assert n > 0
    if blind == n:
        assert f"no difference is detectable with these questions in any of the {n} comparisons" in last
    elif blind:
        assert f"no difference is detectable with these questions in {blind} of the {n} comparisons" in last
    # the smallest plan in dataset questions: protocol A's held-out plans (20% of the dataset) divided
    # by their share, protocol B's as they are; the line names its protocol, unit and level
    cols = ["plan_questions", "plan_docs", "level"]
    plans = pd.concat([open_dt[cols].dropna().assign(share=1.0), open_pc[cols].dropna().assign(share=0.2)])
    best = plans.loc[(plans["plan_questions"] / plans["share"]).idxmin()]
    if best.share == 1.0:
        want = (f"{int(best.plan_questions):,} questions of the test halves ({int(best.plan_docs):,} documents) for "
                f"80% power at level {best.level:.2g}")
    else:
        want = (f"{math.ceil(best.plan_questions / 0.2):,} dataset questions ({int(best.plan_questions):,} held-out "
                f"questions, 20% of the dataset; {int(best.plan_docs):,} documents) for 80% power at level "
                f"{best.level:.2g}")
    assert want in last, last
    # every policy is compared policy - reference in both CSVs
    assert "diff_vs_ref" in table.columns and "diff_vs_ref" in comp.columns


def test_report_filters_one_cell(sweep, tmp_path):
    root = sweep["root"]

    def report(*args):
        return subprocess.run([sys.executable, "-m", "harness", "report", "--latest", *args], cwd=root,
                              capture_output=True, text=True, timeout=300)

    proc = report("--budget", "0.25", "--cost", "0.02", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("picked sweep ")  # the report says which sweep it read, first
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("Decision table of sweep ")):]
    assert "(budget 0.25, cost 0.02)" in lines[0]
    # key-value lines, one block per row, none wider than 100 characters
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100][:1]
    heads = [line for line in lines[1:] if " (cost 0.02" in line and not line.startswith(" ")]
    assert sorted(line.split(" (cost", 1)[0] for line in heads) == sorted(POLICIES)
    assert all("budget 0.25;" in line for line in heads if "; fixed" not in line)
    assert any(line.startswith("  utility:") for line in lines)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Decision table (budget 0.25, cost 0.02)" in md
    assert "decision-table" in (tmp_path / "rep" / "report.html").read_text()

    whole = report("--out", str(tmp_path / "all"))
    assert whole.returncode == 0 and "Decision table of sweep" not in whole.stdout
    md = (tmp_path / "all" / "report.md").read_text()
    assert "## Decision table\n" in md and md[md.index("## Decision table\n"):].count("| 0.02 | 0.1 |") == 3
    # the verdicts first: one row per cost and budget
    assert md.index("## Verdicts") < md.index("## Decision table\n")
    assert md[md.index("## Verdicts"):md.index("## Decision table\n")].count("| 0.02 | 0.1 |") == 1

    bad = report("--budget", "0.3", "--cost", "0.02", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "error: UsageError: --budget 0.3 is not in this sweep; its budgets: 0.1, 0.25, 0.5, 0.75, 0.9"
    ]
    bad = report("--cost", "0.05", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["error: UsageError: --cost 0.05 is not in this sweep; its costs: 0, 0.02"]
    assert not (tmp_path / "bad" / "report.md").exists()


def test_mlflow_ui_shows_the_decision_table(sweep, chromium):
    """The parent run's artifact view of decision_table.json (an MLflow table: "View as table")
    in the real UI, served by ``mlflow server`` over the sweep's own SQLite store."""
    from harness.tracking.server import start_server

    parent = sweep["parent"]
    exp = parent.info.experiment_id
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "mlflow_ui_decision_table.png"
    shot.unlink(missing_ok=True)
    with start_server(sweep["root"] / "mlruns") as srv:
        assert MlflowClient(srv.url).get_run(parent.info.run_id).info.run_id == parent.info.run_id
        url = f"{srv.url}/#/experiments/{exp}/runs/{parent.info.run_id}/artifacts/decision_table.json"
        # wide enough that the mark and utility columns are in the screenshot, next to the
        # MLflow assistant panel
        flags = [f for f in FLAGS if not f.startswith("--window-size")] + ["--window-size=2400,1100"]
        cmd = [chromium, *flags, f"--user-data-dir={sweep['root'] / 'ud-dt'}", "--virtual-time-budget=20000",
               f"--screenshot={shot}", "--dump-dom", url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=sweep["root"])
        assert proc.returncode == 0, proc.stderr[-2000:]
        page = proc.stdout
    assert "decision_table.json" in page
    assert "View as table" in page, page[-2000:]
    for text in ("policy", "mark", "utility", "cal_utility", "ridge", "always_keep"):
        assert text in page, f"{text!r} not on the parent run's decision-table view"
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_each_cell_is_tested_at_its_own_alpha(tmp_path):
    """protocol.alpha is part of a cell: a sweep over two levels marks each cell at its own."""
    args = ["-m", *SMALL, "policy=ridge,random", "protocol=threshold_budget", "protocol.alpha=0.01,0.3"]
    proc = run_cli(args, tmp_path, tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    client, parents, _ = runs_by_role(store_uri(tmp_path))
    pid = parents[0].info.run_id
    with open(_download(client, pid, "policy_comparison.txt", tmp_path), encoding="utf-8") as fh:
        out = fh.read()
    for level in ("0.01", "0.3"):
        head = f"Policies vs the reference at protocol.alpha={level}"
        block = out[out.index(head):].split("\n\n")[0]
        assert f"Holm-adjusted alpha {level}" in block
    with open(_download(client, pid, "decision_table.md", tmp_path), encoding="utf-8") as fh:
        assert "Holm alpha per cell (protocol.alpha)" in fh.read()
    assert "family-wise alpha per cell (protocol.alpha)" in proc.stdout  # the verdict table's legend
    table = pd.read_csv(_download(client, parents[0].info.run_id, "decision_table.csv", tmp_path))
    strict = table[(table["cell"] == "protocol.alpha=0.01") & (table["mark"].isin(["<", ">"]))]
    assert (strict["p_holm_table"] < 0.01).all()  # a mark at 0.01 needs p < 0.01 (Holm over the table)
    assert (strict["p_holm"] <= strict["p_holm_table"]).all()  # the budget's family is part of the table's
    loose = table[(table["cell"] == "protocol.alpha=0.3") & (table["mark"] == "=")]
    assert (loose["p_holm_table"] >= 0.3).all()
    # the verdicts too: a router is deployed only at an adjusted p below its cell's alpha
    verdicts = pd.read_csv(_download(client, pid, "verdicts.csv", tmp_path))
    for v in verdicts[verdicts["kind"] == "deploy"].itertuples():
        assert v.p_holm < float(v.cell.split("=")[1])
