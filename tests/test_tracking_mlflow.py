"""Unit tests of the MLflow layout helpers and the retrying tracker (tmp SQLite stores)."""

from __future__ import annotations

import sqlite3

import pytest

from harness.io import digest_of
from harness.store_schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_ROLE, TAG_SWEEP_ID
from harness.tracking import mlflow_tracker as mt, naming, store_client


def test_mlflow_name_maps_at_sign_and_bad_chars():
    assert naming.mlflow_name("heldout/hit@10") == "heldout/hit_at_10"
    assert naming.mlflow_name("budget/0.25/exact/hit@10") == "budget/0.25/exact/hit_at_10"
    assert naming.mlflow_name("a+b(c)") == "a_b_c_"
    assert naming.mlflow_name("frontier/exact_auc") == "frontier/exact_auc"


def test_flatten_params_nested_and_truncated_lists():
    long = list(range(400))
    flat = naming.flatten_params({"cost": {"c": 0.02}, "policy": {"name": "ridge", "x": {}}, "grid": [0.1, 0.5], "long": long, "n": None})
    assert flat["cost.c"] == "0.02"
    assert flat["policy.name"] == "ridge"
    assert flat["policy.x"] == "{}"
    assert flat["grid"] == "[0.1,0.5]"
    assert flat["n"] == "null"
    assert len(flat["long"]) <= naming.PARAM_MAX_CHARS
    assert flat["long"].startswith("[0,1,2,")
    kept = flat["long"][1:].split(",...")[0].split(",")
    assert flat["long"].endswith(f"(+{400 - len(kept)} more)]")


def test_config_hash_ignores_tracking_and_hydra_only():
    cfg = {"policy": {"name": "ridge"}, "cost": {"c": 0.02}, "seed": 0, "tracking": {"uri": "a"}}
    h = naming.config_hash(cfg)
    assert h == naming.config_hash({**cfg, "tracking": {"uri": "b"}, "hydra": {"x": 1}})
    assert h != naming.config_hash({**cfg, "cost": {"c": 0.05}})
    assert h == digest_of({k: v for k, v in cfg.items() if k != "tracking"})[:16]


def test_resolve_tracking_uri_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(naming.ENV_TRACKING_URI, raising=False)
    default = naming.resolve_tracking_uri({"uri": None, "store_dir": "mlruns"}, tmp_path)
    assert default == f"sqlite:///{(tmp_path / 'mlruns').resolve() / 'mlflow.db'}"
    monkeypatch.setenv(naming.ENV_TRACKING_URI, "sqlite:///elsewhere.db")
    assert naming.resolve_tracking_uri({"uri": None}, tmp_path) == "sqlite:///elsewhere.db"
    assert naming.resolve_tracking_uri({"uri": "http://127.0.0.1:5000"}, tmp_path) == "http://127.0.0.1:5000"
    assert naming.artifact_location(default) == (tmp_path / "mlruns" / "artifacts").resolve().as_uri()
    assert naming.artifact_location("http://127.0.0.1:5000") is None


def test_experiment_name_from_dataset_and_arms():
    cfg = {"dataset": {"name": "qasper_yesno"}, "arms": {"base": "keep", "extra": "hybrid"}, "tracking": {}}
    assert naming.experiment_name(cfg) == "qasper_yesno/keep-vs-hybrid"
    assert naming.experiment_name({**cfg, "tracking": {"experiment": "mine"}}) == "mine"


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    """One store for the module (creating an MLflow SQLite schema takes seconds); each test
    uses its own experiment."""
    return mt.Tracker(f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}")


def test_metrics_batches_and_series_steps(tracker, tmp_path):
    exp = tracker.ensure_experiment("e/x-vs-y", naming.artifact_location(tracker.uri))
    assert tracker.ensure_experiment("e/x-vs-y") == exp  # get, not create twice
    run = tracker.start_job_run(exp, "r", {TAG_ROLE: "single"})
    n = 2500  # > MLflow's 1000 metrics per batch
    triples = [(f"m/{i}", float(i), 0) for i in range(n)] + [("frontier/exact/hit@10", 0.1 * s, s) for s in (10, 25, 50)]
    assert tracker.log_metrics(run, triples) == n + 3
    tracker.end_run(run)
    got = tracker.client.get_run(run)
    assert len(got.data.metrics) == n + 1
    assert got.data.metrics["m/2499"] == 2499.0
    hist = tracker.client.get_metric_history(run, "frontier/exact/hit_at_10")
    assert sorted((m.step, round(m.value, 9)) for m in hist) == [(10, 1.0), (25, 2.5), (50, 5.0)]
    assert got.info.status == "FINISHED"


def test_params_over_100_are_chunked(tracker):
    exp = tracker.ensure_experiment("p")
    run = tracker.start_job_run(exp, "r", {})
    tracker.log_params(run, {f"k{i}": str(i) for i in range(250)})
    assert len(tracker.client.get_run(run).data.params) == 250


def test_fail_run_records_error_and_status(tracker, tmp_path):
    exp = tracker.ensure_experiment("f", naming.artifact_location(tracker.uri))
    run = tracker.start_job_run(exp, "r", {})
    (tmp_path / "art").mkdir()
    tracker.fail_run(run, "Traceback...\nFeatureError: no such feature", artifact_dir=tmp_path / "art")
    got = tracker.client.get_run(run)
    assert got.info.status == "FAILED"
    assert "no such feature" in got.data.tags[TAG_ERROR]
    assert [a.path for a in tracker.client.list_artifacts(run)] == ["error.txt"]


def test_sweep_run_is_reused_and_finished_jobs_found(tracker):
    exp = tracker.ensure_experiment("s")
    parent = tracker.start_sweep_run(exp, "abc123", {"sweep.params": "x"})
    tracker.end_run(parent)
    assert tracker.start_sweep_run(exp, "abc123", {}) == parent
    assert tracker.client.get_run(parent).info.status == "RUNNING"
    assert tracker.start_sweep_run(exp, "other", {}) != parent
    tags = {TAG_SWEEP_ID: "abc123", TAG_CONFIG_HASH: "h1", TAG_ROLE: "job"}
    job = tracker.start_job_run(exp, "j", tags, parent_run_id=parent)
    assert tracker.find_finished_job(exp, "abc123", "h1") is None  # RUNNING does not count
    tracker.end_run(job)
    assert tracker.find_finished_job(exp, "abc123", "h1").info.run_id == job
    assert tracker.find_finished_job(exp, "other", "h1") is None
    assert [r.info.run_id for r in tracker.child_runs(exp, parent)] == [job]


def test_retry_on_locked_database_then_gives_up(tracker, monkeypatch):
    monkeypatch.setattr(mt.time, "sleep", lambda s: None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    assert tracker._retry(flaky) == "ok" and len(calls) == 3

    def always_locked():
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        tracker._retry(always_locked)

    def other():
        calls.append(1)
        raise ValueError("boom")

    calls.clear()
    with pytest.raises(ValueError):
        tracker._retry(other)
    assert len(calls) == 1  # non-transient errors are not retried


def test_two_jobs_logging_one_dataset_both_link_it(tracker, monkeypatch):
    """Parallel jobs insert the same dataset row; the loser's UNIQUE violation is retried, and
    then the store finds the row and only links it (seen with the joblib launcher)."""
    monkeypatch.setattr(mt.time, "sleep", lambda s: None)
    exp = tracker.ensure_experiment("e/dataset-race", naming.artifact_location(tracker.uri))
    runs = [tracker.start_job_run(exp, f"j{i}", {}) for i in range(2)]
    real = tracker.client.log_inputs
    raced = []

    def racing(run_id, datasets=None):
        if not raced:  # the other job wins the insert between our check and our insert
            raced.append(1)
            real(runs[1], datasets=datasets)
            raise RuntimeError("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, "
                               "datasets.name, datasets.digest")
        return real(run_id, datasets=datasets)

    monkeypatch.setattr(tracker.client, "log_inputs", racing)
    tracker.log_dataset(runs[0], "qasper_yesno", "a" * 64, "local", {"path": "t.parquet"}, {"questions": 3})
    for run_id in runs:
        inputs = tracker.client.get_run(run_id).inputs.dataset_inputs
        assert [d.dataset.name for d in inputs] == ["qasper_yesno"]
    assert not store_client.is_dataset_race(RuntimeError("UNIQUE constraint failed: runs.run_uuid"))


def test_experiments_open_on_the_runs_table(tmp_path):
    """The MLflow UI (3.x) opens an experiment of unknown kind on its GenAI views; the harness's
    experiments say they are model development (runs table first), and a kind set by hand stays."""
    tracker = mt.Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", retries=1)
    exp_id = tracker.ensure_experiment("synthetic/keep-vs-hybrid")
    tags = tracker.client.get_experiment(exp_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert tags["mlflow.experiment.primaryMetric.name"] == "heldout/utility"
    tracker.client.set_experiment_tag(exp_id, "mlflow.experimentKind", "genai_development")
    assert tracker.ensure_experiment("synthetic/keep-vs-hybrid") == exp_id
    assert tracker.client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "genai_development"
