"""End-to-end: the MLflow UI of a finished sweep, rendered by headless Chromium.

Why: team mode is only useful if people can SEE the runs; this loads the real JS app served by
a real ``mlflow server`` and checks the sweep's run names and a metric column are on the page,
and what a team sees first (Playwright driving the same Chromium): the experiment's runs table,
whole run names, the sweep's frontier figure and report.html on the parent run.

Chromium: Debian package ``chromium``. When ``/usr/bin/chromium`` is missing and we are root,
the session fixture (``chromium``, tests/helpers/fixtures.py) runs ``apt-get install -y
chromium`` once. If it still is unavailable the test is skipped locally but FAILS when CI=true
(a browser check must not vanish silently).
The screenshots are kept under ``test-artifacts/`` (gitignored) for a human to look at.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from harness.tracking.server import start_server
from tests.helpers.browser import ARTIFACTS, FLAGS


def _render(chromium: str, url: str, user_data: Path, screenshot: Path | None = None) -> str:
    """DOM of ``url`` after the JS app has run (virtual time lets its fetches finish)."""
    cmd = [chromium, *FLAGS, f"--user-data-dir={user_data}", "--virtual-time-budget=20000"]
    if screenshot is not None:
        cmd.append(f"--screenshot={screenshot}")
    cmd += ["--dump-dom", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=user_data.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _run_app_sweep(url: str, cwd: Path, policies: tuple[str, ...] = ("ridge", "random"),
                   protocol: str = "threshold") -> dict:
    """A real sweep over ``policies`` by the app against the server; its experiment, parent,
    children and what it printed."""
    from mlflow.tracking import MlflowClient

    cmd = [
        sys.executable, "-m", "harness", "-m", "dataset=synthetic", "experiment=none",
        f"protocol={protocol}", f"policy={','.join(policies)}", "tracking=server", f"tracking.uri={url}",
    ]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=url)
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("route_bench.role") == "sweep"]
    children = {r.info.run_name: r.info.run_id for r in runs if r.data.tags.get("route_bench.role") == "job"}
    assert len(parents) == 1 and len(children) == len(policies)
    return {"experiment_id": exp.experiment_id, "parent": parents[0].info.run_name, "jobs": children,
            "parent_id": parents[0].info.run_id, "stdout": proc.stdout}


@pytest.mark.slow
def test_mlflow_ui_shows_sweep(chromium, tmp_path):
    with start_server(tmp_path / "server") as srv:
        # protocol A only: ~40 metrics per run, so the compare page's metric table is not cut off
        ids = _run_app_sweep(srv.url, tmp_path)
        exp = ids["experiment_id"]

        runs_page = _render(chromium, f"{srv.url}/#/experiments/{exp}/runs", tmp_path / "ud1")
        assert "Runs - Experiment" in runs_page, runs_page[-2000:]
        assert ids["parent"] in runs_page  # the parent run (children are nested under it)

        child_ids = list(ids["jobs"].values())
        query = urllib.parse.urlencode(
            {"runs": json.dumps(child_ids), "experiments": json.dumps([exp])}
        )
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "mlflow_ui_compare_runs.png"
        shot.unlink(missing_ok=True)
        compare = _render(chromium, f"{srv.url}/#/compare-runs?{query}", tmp_path / "ud2", shot)
        # the compare page renders its metric rows lazily (the first ones alphabetically), so the
        # headline metrics are checked on one job's own run page
        name, run_id = next(iter(ids["jobs"].items()))
        run_page = _render(chromium, f"{srv.url}/#/experiments/{exp}/runs/{run_id}", tmp_path / "ud3")

    for job in ids["jobs"]:
        assert job in compare, f"run name {job!r} not on the compare-runs page"
    for metric in ("dev/nested_utility", "dev/tau"):  # early alphabetically: rendered first
        assert metric in compare, f"metric {metric!r} not on the compare-runs page"
    assert name in run_page
    for metric in ("heldout/utility", "heldout/hit_at_10"):
        assert metric in run_page, f"metric {metric!r} not on the run page of {name!r}"
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# the expand toggle of the parent run's row, and whether each run name of the runs table is cut:
# the text's own extent runs past the link, which the cell's ellipsis clips
EXPAND = 'button[data-component-id*="runnamecellrenderer"]'
CUT_NAMES = """() => [...document.querySelectorAll('[role=gridcell][col-id="attributes.`Run Name`"] a')].map(a => {
    const text = document.createRange(); text.selectNodeContents(a);
    return [a.textContent.trim(), text.getBoundingClientRect().right > a.getBoundingClientRect().right + 0.5];
})"""
SHOTS = ("genai_default", "runs_table", "parent_artifacts", "parent_frontier", "parent_report")


def _fresh_page(browser):
    """A page of its own browser context: no localStorage, so no "Model training" choice kept."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(120_000)
    return page


def _look(browser, srv_url: str, ids: dict, link: str, shots: dict) -> dict:
    """What a team sees, each view in a fresh browser: the experiment without the console's
    workflowType, the console's experiment link (parent expanded), the parent run's artifacts,
    its frontier figure and its report.html; a screenshot of each."""
    exp, parent = ids["experiment_id"], ids["parent_id"]
    seen = {}
    page = _fresh_page(browser)
    page.goto(f"{srv_url}/#/experiments/{exp}")
    page.wait_for_url(re.compile(r"/experiments/\d+/[a-z/-]+\?workflowType="))
    page.wait_for_timeout(2000)
    page.screenshot(path=str(shots["genai_default"]))
    seen["default_url"] = page.url
    page.context.close()

    page = _fresh_page(browser)
    page.goto(link)
    page.wait_for_url(re.compile(r"/experiments/\d+/runs\?"))
    page.get_by_role("link", name=ids["parent"], exact=True).wait_for()
    page.locator(EXPAND).first.click()
    for job in ids["jobs"]:
        page.get_by_role("link", name=job, exact=True).wait_for()
    page.screenshot(path=str(shots["runs_table"]))
    seen["runs_url"], seen["cut"] = page.url, dict(page.evaluate(CUT_NAMES))
    page.context.close()

    page = _fresh_page(browser)
    page.goto(f"{srv_url}/#/experiments/{exp}/runs/{parent}/artifacts?workflowType=machine_learning")
    for name in ("frontier.png", "report.html"):
        page.get_by_text(name, exact=True).first.wait_for()
    page.screenshot(path=str(shots["parent_artifacts"]))
    page.get_by_text("frontier.png", exact=True).first.click()
    page.wait_for_function("() => [...document.images].some(i => i.complete && i.naturalWidth > 400)")
    page.screenshot(path=str(shots["parent_frontier"]))
    page.get_by_text("report.html", exact=True).first.click()
    summary = page.frame_locator("iframe").locator("p.summary")
    seen["summary"] = summary.inner_text()
    page.screenshot(path=str(shots["parent_report"]))
    page.context.close()
    return seen


@pytest.mark.slow
def test_mlflow_ui_opens_on_the_runs_table_and_the_parent_run_holds_the_picture(chromium, tmp_path):
    """The console's experiment link opens the runs table (MLflow 3.17 decides the view by the
    address's ``workflowType``, else the browser's kept choice: the same experiment without it
    opens on the GenAI view in a fresh browser, its ``mlflow.experimentKind`` tag notwithstanding,
    the negative control); the parent's and the jobs' names are whole at the table's default width
    (short policy names here: the default sweep's longest, e.g. ``signal_rerank_top1_dense_rank
    c=0.05``, do not fit); the parent run's artifacts list the sweep's frontier figure and
    report.html, the figure shows and the report opens on its summary."""
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    shots = {name: ARTIFACTS / f"mlflow_ui_{name}.png" for name in SHOTS}
    for shot in shots.values():
        shot.unlink(missing_ok=True)
    with start_server(tmp_path / "server") as srv:
        ids = _run_app_sweep(srv.url, tmp_path, ("always_keep", "ridge", "random"), "threshold_budget")
        links = [line.split(" ", 1)[1].strip() for line in ids["stdout"].splitlines() if line.startswith("Experiment: ")]
        assert links == [f"{srv.url}/#/experiments/{ids['experiment_id']}?workflowType=machine_learning"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium,
                                        args=[f for f in FLAGS if not f.startswith("--window-size")])
            try:
                seen = _look(browser, srv.url, ids, links[0], shots)
            finally:
                browser.close()
    assert "workflowType=genai" in seen["default_url"] and "/runs?" not in seen["default_url"], seen["default_url"]
    assert "workflowType=machine_learning" in seen["runs_url"]
    assert seen["cut"] == {name: False for name in (ids["parent"], *ids["jobs"])}, seen["cut"]
    assert seen["summary"].startswith(f"Sweep {ids['parent'].split()[0]}") and "compared 3 policies" in seen["summary"]
    for shot in shots.values():
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, shot
