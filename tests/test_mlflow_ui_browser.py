"""End-to-end: the MLflow UI of a finished sweep, rendered by headless Chromium.

Why: team mode is only useful if people can SEE the runs; this loads the real JS app served by
a real ``mlflow server`` and checks the sweep's run names and a metric column are on the page.

Chromium: Debian package ``chromium``. When ``/usr/bin/chromium`` is missing and we are root,
the session fixture (``chromium``, tests/helpers/fixtures.py) runs ``apt-get install -y
chromium`` once. If it still is unavailable the test is skipped locally but FAILS when CI=true
(a browser check must not vanish silently).
The screenshot is kept under ``test-artifacts/`` (gitignored) for a human to look at.
"""

from __future__ import annotations

import json
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


def _run_app_sweep(url: str, cwd: Path) -> dict:
    """A real two-job sweep by the app against the server; its experiment, parent and children."""
    from mlflow.tracking import MlflowClient

    cmd = [
        sys.executable, "-m", "harness", "-m", "dataset=synthetic", "experiment=none",
        # protocol A only: ~40 metrics per run, so the compare page's metric table is not cut off
        "protocol=threshold", "policy=ridge,random", "tracking=server", f"tracking.uri={url}",
    ]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=url)
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("route_bench.role") == "sweep"]
    children = {r.info.run_name: r.info.run_id for r in runs if r.data.tags.get("route_bench.role") == "job"}
    assert len(parents) == 1 and len(children) == 2
    return {"experiment_id": exp.experiment_id, "parent": parents[0].info.run_name, "jobs": children}


@pytest.mark.slow
def test_mlflow_ui_shows_sweep(chromium, tmp_path):
    with start_server(tmp_path / "server") as srv:
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
