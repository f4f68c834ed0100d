"""Pre-flight: arms that agree on every question give one warning line and a run tag before
the job; a held-out / test set below protocol.min_heldout is refused in one line, exit 2,
before any run exists."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import DataSizeError
from harness.preflight import MIN_HELDOUT, NOTHING_TO_ROUTE, TAG, check_heldout_size, nothing_to_route, smallest_test_sets
from harness.protocols.registry import plan_protocols
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask

PROTOCOL = {"run": ["threshold", "budget", "gain"], "dev_frac": 0.8, "repeats": 1}
BUDGET = {"n_splits": 5}


def _task(n_docs: int, per_doc: int, agree: bool = False) -> RoutingTask:
    frame = synthetic_outcome_table(n_docs=n_docs, questions_per_doc=per_doc, seed=0)
    if agree:
        frame["hybrid.hit@10"] = frame["keep.hit@10"]
    return RoutingTask.from_table(frame)


def test_nothing_to_route_only_when_the_arms_agree_everywhere():
    assert nothing_to_route(_task(20, 5)) is None
    warning = nothing_to_route(_task(20, 5, agree=True))
    assert warning.startswith(NOTHING_TO_ROUTE) and "100 questions" in warning and "\n" not in warning


def test_smallest_heldout_is_the_protocols_own_split():
    from harness.protocols.threshold_select import split_dev_heldout

    task = _task(10, 2)
    cfg = {"protocol": PROTOCOL, "budget": BUDGET, "seed": 0}
    planned = plan_protocols(cfg)
    sizes = {name: n for name, (n, _) in smallest_test_sets(task, planned, cfg).items()}
    assert sizes["threshold"] == split_dev_heldout(task, 0.8, 0)[1].n == 4  # 2 of 10 documents, 2 questions each
    assert set(sizes) == {"threshold", "budget", "gain"} and sizes["budget"] <= sizes["gain"] + 2
    with pytest.raises(DataSizeError) as err:
        check_heldout_size(task, planned, {**cfg, "protocol": {**PROTOCOL, "min_heldout": MIN_HELDOUT}})
    text = str(err.value)
    assert len(text.splitlines()) == 1 and "protocol threshold's held-out set holds 4 question(s)" in text
    assert "below protocol.min_heldout=6" in text and "protocol.min_heldout=4 to run anyway" in text
    check_heldout_size(task, planned, {**cfg, "protocol": {**PROTOCOL, "min_heldout": 4}})  # the override lets it run


def _app(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    uri = f"sqlite:///{cwd / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", *args, "experiment=none", f"tracking.uri={uri}"]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cwd / "cache")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _runs(cwd: Path) -> int:
    db = cwd / "mlflow.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [False, True], ids=["single", "sweep"])
def test_too_small_a_heldout_set_is_refused_before_any_run(tmp_path, sweep):
    args = (["-m"] if sweep else []) + ["dataset=synthetic", "dataset.n_docs=10", "dataset.questions_per_doc=2",
                                        "protocol=threshold",
                                        "policy=always_keep"]
    proc = _app(args, tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: DataSizeError:") and "protocol.min_heldout=" in err[0], err
    assert _runs(tmp_path) == 0


def _write_small_beir(root: Path, n_queries: int = 40) -> Path:
    """8 passages, fewer than the 10 every arm returns: every arm finds every gold passage."""
    (root / "qrels").mkdir(parents=True)
    words = ["apple", "river", "stone", "cloud", "forest", "engine", "violin", "harbor"]
    corpus = [{"_id": f"p{i}", "title": "", "text": f"A note about the {w} and its {w} story."} for i, w in enumerate(words)]
    queries = [{"_id": f"q{j}", "text": f"what about the {words[j % 8]} (asked {j})"} for j in range(n_queries)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{j}\tp{j % 8}\t1\n" for j in range(n_queries)), encoding="utf-8")
    return root


@pytest.mark.slow
def test_arms_that_agree_warn_once_and_tag_the_runs(tmp_path):
    """A real table (the packaged encoder) over a BEIR folder of 8 passages: keep and hybrid both
    hit on every question. A single run prints the warning once; a sweep once before its job
    lines and once under its verdict table; every run is tagged."""
    from mlflow.tracking import MlflowClient

    folder = _write_small_beir(tmp_path / "beir")
    base = ["dataset=beir", f"dataset.path={folder}", "protocol=threshold"]
    single = _app([*base, "policy=always_keep"], tmp_path)
    assert single.returncode == 0, single.stdout[-2000:] + single.stderr[-2000:]
    warned = [ln for ln in single.stdout.splitlines() if NOTHING_TO_ROUTE in ln]
    assert len(warned) == 1 and warned[0].startswith("[route-bench] warning: ")
    swept = _app(["-m", *base, "policy=always_keep,always_extra"], tmp_path)
    assert swept.returncode == 0, swept.stdout[-2000:] + swept.stderr[-2000:]
    lines = swept.stdout.splitlines()
    warned = [i for i, ln in enumerate(lines) if NOTHING_TO_ROUTE in ln]
    jobs = [i for i, ln in enumerate(lines) if ln.startswith(("[1/2]", "[2/2]"))]
    # once before the first job line (pre-flight) and once under the verdict table (the sweep's end)
    assert len(warned) == 2 and warned[0] < min(jobs) and warned[1] > max(jobs), lines
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    roles = sorted(r.data.tags.get("route_bench.role") for r in runs)
    assert roles == ["job", "job", "single", "sweep"], roles
    assert all(r.data.tags.get(TAG, "").startswith(NOTHING_TO_ROUTE) for r in runs)


@pytest.mark.parametrize("value", ["0", "-3"])
def test_min_heldout_must_be_a_positive_integer(value):
    from harness.config.compose import compose_config
    from harness.config.validation import validate
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"'protocol.min_heldout': must be an integer in \[1, "):
        validate(compose_config(["dataset=synthetic", f"protocol.min_heldout={value}"]))
