"""The verdict where people look: the MLflow UI, opened in headless Chromium, shows the latest
sweep's verdict within two clicks of the experiment list.

A small sweep logs into a fresh store, ``mlflow ui`` serves it, and Playwright drives Debian's
Chromium (``/usr/bin/chromium``; Playwright's own browser download is not used): from the home
page (the experiment list) click "Model training" (MLflow 3 opens in its GenAI view, which
shows no runs), then the experiment; the verdict lines (the experiment's description, set at
the sweep's end) must be visible there, and the parent run's page must show them too.
Screenshots of each step go to ``$HARNESS_TEST_ARTIFACTS/mlflow_ui/`` (else the test's tmp
folder). Without Chromium the test is skipped, except under CI (``CI`` set), where it fails:
.ci/run installs Chromium.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.faults import CEILING_S

pytestmark = pytest.mark.slow  # a real sweep, an mlflow server and its UI

CHROMIUM = os.environ.get("HARNESS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REPO = Path(__file__).resolve().parents[1]

if not CHROMIUM:
    if os.environ.get("CI"):
        raise RuntimeError("CI: Chromium is missing (.ci/run installs Debian's chromium package)")
    pytest.skip("needs Chromium (apt-get install chromium); CI installs it", allow_module_level=True)
sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen) -> None:
    """Until the server answers 200 (it is ready), it exits (fail), or the hang ceiling."""
    deadline = time.monotonic() + CEILING_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"mlflow ui exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"mlflow ui did not answer within {CEILING_S:.0f} s")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(root / "cache"), "PYTHONPATH": str(REPO)}
    sweep = subprocess.run([sys.executable, "-m", "harness", "-m", "experiment=smoke", f"tracking.uri={uri}"],
                           cwd=root, env=env, capture_output=True, text=True, timeout=CEILING_S)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port)], cwd=root, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/", server)
        yield {"url": f"http://127.0.0.1:{port}/", "uri": uri, "stdout": sweep.stdout}
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


def _seen(page, locator, text: str) -> bool:
    """Whether a person sees ``text`` inside the element: the first line box of the text itself
    (a DOM range, not the element's box: a folded block is taller than what shows) lies in the
    viewport and inside every ancestor that clips its overflow (a folded description), and no
    ancestor hides it. Playwright's ``is_visible`` accepts clipped text."""
    return bool(locator.evaluate(
        """(el, text) => {
            const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const at = node.data.indexOf(text);
                if (at < 0) continue;
                const range = document.createRange();
                range.setStart(node, at);
                range.setEnd(node, at + Math.min(text.length, 12));
                const r = range.getClientRects()[0];
                if (!r || r.width === 0 || r.height === 0) return false;
                if (r.left < 0 || r.top < 0 || r.bottom > innerHeight || r.right > innerWidth) return false;
                for (let a = node.parentElement; a; a = a.parentElement) {  // folded or clipped by an ancestor
                    const st = getComputedStyle(a);
                    if (st.visibility === "hidden" || st.display === "none" || Number(st.opacity) === 0) return false;
                    if (st.overflowY !== "visible" || st.overflowX !== "visible") {
                        const b = a.getBoundingClientRect();
                        if (r.top < b.top - 1 || r.bottom > b.bottom + 1 || r.left < b.left - 1 || r.right > b.right + 1)
                            return false;
                    }
                }
                return true;
            }
            return false;
        }""", text,
    ))


def test_the_verdict_is_visible_within_two_clicks_of_the_experiment_list(served, tmp_path):
    import mlflow

    client = mlflow.MlflowClient(served["uri"])
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    note = exp.tags.get("mlflow.note.content", "")
    lines = [line for line in note.split("```")[1].splitlines() if line.strip()] if "```" in note else []
    assert lines, f"the experiment's description holds no verdict lines: {note!r}"
    first = lines[0].strip()
    assert note.splitlines()[0] == f"**Latest sweep**: {first}"  # the line the UI shows while folded
    # it counts the verdict rows the console printed, and the verdict table follows, as printed
    got = re.fullmatch(r"Verdicts: (\d+) deploy a router, (\d+) deploy no router, (\d+) cannot tell "
                       r"\(of (\d+) cost x budget cells\)", first)
    assert got, first
    out = served["stdout"]
    rows = [x for x in out.splitlines() if re.match(r"^[0-9.]+\s+[0-9.]+\s+(deploy|cannot tell)", x)]
    none = sum("deploy no router" in x for x in rows)
    cannot = sum("cannot tell" in x for x in rows)
    assert [int(g) for g in got.groups()] == [len(rows) - none - cannot, none, cannot, len(rows)]
    assert lines[1].strip() in out and lines[1].startswith("Verdict per cost and budget")
    shots = Path(os.environ.get("HARNESS_TEST_ARTIFACTS") or tmp_path) / "mlflow_ui"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(CEILING_S * 1000)
            page.goto(served["url"])
            page.get_by_role("link", name=exp.name).first.wait_for()
            page.screenshot(path=str(shots / "0_experiment_list.png"))
            page.get_by_text("Model training", exact=True).first.click()  # click 1
            page.get_by_role("link", name=exp.name).first.click()  # click 2
            verdict = page.get_by_text(first, exact=False).locator("visible=true").first
            verdict.wait_for(state="visible")
            page.screenshot(path=str(shots / "2_experiment_runs.png"))
            assert _seen(page, verdict, first), "the verdict is in the page but folded, clipped or covered"
            # the parent run's own page (the link the console prints) holds it too
            parent = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags]
            assert len(parent) == 1
            page.goto(f"{served['url']}#/experiments/{exp.experiment_id}/runs/{parent[0].info.run_id}"
                      "?workflowType=machine_learning")
            title = lines[1].strip()  # the parent run's description opens on the verdict table
            on_run = page.get_by_text(title, exact=False).locator("visible=true").first
            on_run.wait_for(state="visible")
            page.screenshot(path=str(shots / "3_parent_run.png"))
            assert _seen(page, on_run, title)
            # the check can fail: the description's last line is folded under "Show more"
            last = [x for x in parent[0].data.tags["mlflow.note.content"].splitlines() if x.strip() and x != "```"][-1]
            folded = page.get_by_text(last.strip()[:60], exact=False).first
            folded.wait_for(state="attached")
            assert not _seen(page, folded, last.strip()[:60])
        finally:
            browser.close()
