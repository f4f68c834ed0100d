"""End-to-end sweeps through the real CLI (``python -m harness -m``) on a small synthetic table,
checked through ``MlflowClient``: the tracking layout, frontier series, artifacts, rerun skip,
joblib == basic, and a failing job. Also single runs in-process (env URI, FAILED on error, no
run for a policy the table cannot feed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient

from harness import app
from harness.runner import job as runner
from harness.store_schema import TAG_CONFIG_HASH, TAG_ERROR, TAG_PARENT, TAG_POLICY, TAG_ROLE, TAG_SWEEP_ID
from harness.errors import ConfigError
from harness.plugin_guard import PluginError
from tests.helpers.mlflow_layout import same_metrics
from tests.helpers.sweeps import EXPERIMENT, SMALL, run_cli, runs_by_role, store_uri

SWEEP = ["-m", *SMALL, "policy=always_keep,ridge", "cost.c=0.0,0.02", "protocol=threshold_budget"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def basic_sweep(tmp_path_factory):
    """The 2 policies x 2 costs sweep with the basic launcher, run twice (second = rerun)."""
    root = tmp_path_factory.mktemp("basic")
    cache = root / "cache"
    first = run_cli(SWEEP, root, cache)
    uri = store_uri(root)
    after_first = runs_by_role(uri)
    second = run_cli(SWEEP, root, cache)
    return {"root": root, "uri": uri, "first": first, "second": second, "after_first": after_first}


def test_sweep_creates_parent_and_children_with_layout(basic_sweep):
    from harness.io import digest_of
    from harness.synthetic import synthetic_outcome_table

    # the outcome-table fingerprint, computed independently of the app
    expected_table_sha = digest_of(synthetic_outcome_table(n_docs=30, questions_per_doc=4).to_dict("list"))
    first = basic_sweep["first"]
    assert first.returncode == 0, first.stderr[-3000:]
    client, parents, jobs = basic_sweep["after_first"]
    assert len(parents) == 1 and len(jobs) == 4
    parent = parents[0]
    sweep_id = parent.data.tags[TAG_SWEEP_ID]
    # the id first (what tells two sweeps apart when the UI cuts a name), 8 of its 12 digits
    assert parent.info.run_name == f"{sweep_id[:8]} sweep" and parent.info.status == "FINISHED"
    # a sweep's run names carry the policy and every swept key (here cost.c), nothing unswept
    assert {j.info.run_name for j in jobs} == {f"{p} c={c}" for p in ("always_keep", "ridge") for c in ("0", "0.02")}
    for job in jobs:
        tags, params, metrics = job.data.tags, job.data.params, job.data.metrics
        assert job.info.status == "FINISHED"
        assert tags[TAG_PARENT] == parent.info.run_id
        assert tags[TAG_SWEEP_ID] == sweep_id
        assert tags[TAG_POLICY] in ("always_keep", "ridge")
        assert len(tags[TAG_CONFIG_HASH]) == 16
        assert params["policy.name"] == tags[TAG_POLICY]
        assert tags["route_bench.table_sha256"] == expected_table_sha
        assert params["dataset.name"] == "synthetic" and params["seed"] == "0"
        assert float(params["cost.c"]) in (0.0, 0.02)
        assert params["budget.grid"] == "[0.1,0.25,0.5,0.75,0.9]"
        for name in ("heldout/hit_at_10", "heldout/utility", "heldout/diff_vs_base/utility/ci_low",
                     "heldout/diff_vs_base/utility/mdd", "heldout/mcnemar_vs_base/min_p",
                     "table/n_questions", "table/rescues", "budget/power/mdd_vs_base"):
            assert name in metrics, name
        assert metrics["table/n_questions"] == 120.0
        assert not any(k.startswith("gain/") for k in metrics)  # protocol=threshold_budget
        if tags[TAG_POLICY] == "always_keep":
            # a fixed decision is a reference point, not a budget frontier (docs/metrics.md §6)
            assert metrics["budget/fixed/realized_usage"] == 0.0
            assert not any(k.startswith(("budget/0.", "frontier/")) for k in metrics)
        else:
            for name in ("budget/0.25/deployable/realized_usage", "budget/0.25/exact/hit_at_10", "frontier/exact_auc"):
                assert name in metrics, name
            hist = client.get_metric_history(job.info.run_id, "frontier/deployable/realized_usage")
            assert sorted(m.step for m in hist) == [10, 25, 50, 75, 90]
            exact = {m.step: m.value for m in client.get_metric_history(job.info.run_id, "frontier/exact/hit_at_10")}
            assert exact[25] == pytest.approx(metrics["budget/0.25/exact/hit_at_10"])
        arts = {a.path for a in client.list_artifacts(job.info.run_id)}
        assert {"decisions.parquet", "frontier.png", "frozen", "config.yaml", "summary.txt"} <= arts
        frozen = {Path(a.path).name for a in client.list_artifacts(job.info.run_id, "frozen")}
        assert "manifest.json" in frozen
    hashes = {j.data.tags[TAG_CONFIG_HASH] for j in jobs}
    assert len(hashes) == 4
    # the sweep's end counts the jobs and points at the parent run and the store (relative to
    # the launch folder: the command a person types there); the job table is the parent run's
    assert "4 jobs, 0 failed -> parent run FINISHED" in first.stdout
    assert f"Parent run: http://127.0.0.1:5000/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}" \
        in first.stdout
    assert "Serve it:   mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db" in first.stdout
    # the sweep's picture and report on the parent run, said once on the console
    assert {"comparison.csv", "frontier.png", "report.html", "report.md"} <= {
        a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "Full tables and the frontier figure: report.html on the parent run" in first.stdout
    assert (f"Experiment: http://127.0.0.1:5000/#/experiments/{parent.info.experiment_id}"
            "?workflowType=machine_learning") in first.stdout


def test_decisions_artifact_matches_logged_metric(basic_sweep):
    import pandas as pd

    client, _, jobs = basic_sweep["after_first"]
    job = next(j for j in jobs if j.data.tags[TAG_POLICY] == "ridge")
    local = client.download_artifacts(job.info.run_id, "decisions.parquet", str(basic_sweep["root"] / "dl"))
    dec = pd.read_parquet(local)
    assert dec["chosen"].mean() == pytest.approx(job.data.metrics["heldout/hit_at_10"])
    assert dec["ran_extra"].mean() == pytest.approx(job.data.metrics["heldout/extra_share"])


def test_rerun_of_same_sweep_skips_finished_jobs(basic_sweep):
    second = basic_sweep["second"]
    assert second.returncode == 0, second.stderr[-3000:]
    _, parents, jobs = runs_by_role(basic_sweep["uri"])
    _, parents_before, jobs_before = basic_sweep["after_first"]
    assert len(parents) == 1 and parents[0].info.run_id == parents_before[0].info.run_id
    assert {j.info.run_id for j in jobs} == {j.info.run_id for j in jobs_before}  # no new child runs
    assert second.stdout.count("-> skipped: finished as run ") == 4


def test_joblib_gives_identical_metrics(basic_sweep, tmp_path):
    proc = run_cli(SWEEP + ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], tmp_path, basic_sweep["root"] / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, parents, jobs = runs_by_role(store_uri(tmp_path))
    _, _, basic_jobs = basic_sweep["after_first"]
    assert len(parents) == 1 and len(jobs) == 4
    assert all(j.info.status == "FINISHED" for j in jobs)
    by_hash = {j.data.tags[TAG_CONFIG_HASH]: j.data.metrics for j in basic_jobs}
    for job in jobs:
        assert same_metrics(job.data.metrics, by_hash[job.data.tags[TAG_CONFIG_HASH]])


BOOM = "tests.bad_plugins.BoomInScore"  # a policy that fails while it runs (scores)


def test_failing_job_is_failed_and_sweep_continues(tmp_path):
    args = SMALL + ["policy=always_keep", f"policy._target_=policies.builtin.AlwaysBase,{BOOM}", "protocol=threshold"]
    repo = str(Path(__file__).resolve().parent.parent)  # tests.bad_plugins importable in the sweep's process
    proc = run_cli(["-m", *args], tmp_path, tmp_path / "cache",
                   {"PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)})
    assert proc.returncode == 1
    client, parents, jobs = runs_by_role(store_uri(tmp_path))
    assert [p.info.status for p in parents] == ["FAILED"]
    status = {j.data.params["policy._target_"]: j for j in jobs}
    assert status["policies.builtin.AlwaysBase"].info.status == "FINISHED"
    bad = status[BOOM]
    assert bad.info.status == "FAILED"
    assert "boom in score" in bad.data.tags[TAG_ERROR]
    assert "error.txt" in {a.path for a in client.list_artifacts(bad.info.run_id)}
    assert "1 failed" in proc.stdout and "FAILED" in proc.stdout


def _job_cfg(*overrides):
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[*SMALL, "protocol=threshold", *overrides])


def test_single_run_respects_env_uri_and_is_parentless(tmp_path, monkeypatch, isolated_cache):
    uri = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    out = runner.run_job(_job_cfg("policy=always_extra"))
    assert out["status"] == "FINISHED"
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(out["run_id"])
    assert run.data.tags[TAG_ROLE] == "single" and TAG_PARENT not in run.data.tags
    assert run.data.metrics["heldout/extra_share"] == 1.0
    assert not (tmp_path / "mlruns" / "mlflow.db").exists()  # the env URI won over the default
    # an explicit tracking.uri wins over the env var
    other = f"sqlite:///{tmp_path / 'explicit.db'}"
    out2 = runner.run_job(_job_cfg("policy=always_keep", f"tracking.uri={other}"))
    assert MlflowClient(tracking_uri=other).get_run(out2["run_id"]).info.status == "FINISHED"
    # a single run that fails re-raises and leaves a FAILED run with the error
    with pytest.raises(PluginError):
        runner.run_job(_job_cfg("policy=always_keep", f"policy._target_={BOOM}"))
    exp = client.get_experiment_by_name(EXPERIMENT)
    failed = client.search_runs([exp.experiment_id], "attributes.status = 'FAILED'")
    assert len(failed) == 1 and "boom in score" in failed[0].data.tags[TAG_ERROR]
    # a policy that reads a feature the table lacks is refused before any run exists (docs/own_arms.md)
    with pytest.raises(ConfigError, match=r"policy ridge reads features \(no_such_feature\)"):
        runner.run_job(_job_cfg("policy=ridge", "policy.features=[no_such_feature]"))
    assert len(client.search_runs([exp.experiment_id])) == 2  # always_extra and the FAILED one


def test_bad_value_in_one_sweep_job_stops_the_sweep_before_any_run(tmp_path):
    """Every job's config is composed and validated before the parent run opens (issue
    "reliability"): a bad value of one job ends the sweep in one line naming the key and the
    value, exit 2, and nothing is tracked. (Before, that job failed as its own run.)"""
    args = SMALL + ["policy=ridge", "cost.c=-0.1,0.02", "protocol=threshold"]
    proc = run_cli(["-m", *args], tmp_path, tmp_path / "cache")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "cost.c" in errors[0] and "-0.1" in errors[0]
    db = tmp_path / "mlruns" / "mlflow.db"
    if db.exists():  # the store may exist, but holds no run of this sweep
        exp = MlflowClient(tracking_uri=store_uri(tmp_path)).get_experiment_by_name(EXPERIMENT)
        assert exp is None or MlflowClient(tracking_uri=store_uri(tmp_path)).search_runs([exp.experiment_id]) == []


def test_rerun_after_a_fixed_failure_finishes_the_sweep(tmp_path):
    """A job that failed for an outside reason (the environment names a plotting backend that
    does not exist, so drawing its frontier plot fails) and then succeeds on the rerun: the
    sweep ends FINISHED, exit 0, and lists the job once. (A blocked plot cache no longer fails a
    job: the plot is then drawn straight into the run.)"""
    cache = tmp_path / "cache"
    args = ["-m", *SMALL, "policy=ridge", "protocol=threshold_budget"]
    first = run_cli(args, tmp_path, cache, env_extra={"MPLBACKEND": "no_such_backend"})
    assert first.returncode == 1, first.stdout[-2000:] + first.stderr[-2000:]
    second = run_cli(args, tmp_path, cache)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    _, parents, jobs = runs_by_role(store_uri(tmp_path))
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert sorted(j.info.status for j in jobs) == ["FAILED", "FINISHED"]
    assert "1 jobs, 0 failed -> parent run FINISHED" in second.stdout


def test_report_and_comparison_of_an_app_sweep_equal_the_logged_metrics(basic_sweep, tmp_path):
    from harness.report.loading import load_sweep
    from harness.report.write import write_report

    _, parents, jobs = runs_by_role(basic_sweep["uri"])
    rep = load_sweep(basic_sweep["uri"], parents[0].data.tags[TAG_SWEEP_ID])
    assert len(rep.rows) == len({j.data.tags[TAG_CONFIG_HASH] for j in jobs}) == 4
    by_id = {j.info.run_id: j.data.metrics for j in jobs}
    for row in rep.rows:
        for key in ("heldout/hit_at_10", "heldout/utility", "frontier/exact_auc"):
            assert row.metrics.get(key) == by_id[row.run_id].get(key)  # absent for fixed decisions
    paths = write_report(rep, tmp_path / "rep")
    assert paths["html"].stat().st_size > 0 and paths["plot"].stat().st_size > 0
    # the job table on the parent run names the outcome metric and has one row per job
    client = MlflowClient(tracking_uri=basic_sweep["uri"])
    with open(client.download_artifacts(parents[0].info.run_id, "comparison.txt", str(tmp_path)), encoding="utf-8") as fh:
        text = fh.read()
    assert "heldout hit@10" in text and text.count(" FINISHED ") >= 4


def test_sweep_end_compares_policies_on_the_same_held_out_questions(basic_sweep, tmp_path):
    """The parent run holds the policy-vs-policy table; its differences equal the differences of
    the jobs' own logged held-out utilities (an independent path: metrics, not decisions), and
    the reference is the policy with the best logged development (nested) utility."""
    import pandas as pd

    client, parents, jobs = basic_sweep["after_first"]
    local = client.download_artifacts(parents[0].info.run_id, "policy_comparison.csv", str(tmp_path))
    table = pd.read_csv(local)
    assert set(table["cell"]) == {"cost.c=0.0", "cost.c=0.02"}
    for cell, c in (("cost.c=0.0", "0.0"), ("cost.c=0.02", "0.02")):
        rows = table[table["cell"] == cell].set_index("policy")
        cell_jobs = [j for j in jobs if j.data.params["cost.c"] == c]
        util = {j.data.tags[TAG_POLICY]: j.data.metrics["heldout/utility"] for j in cell_jobs}
        dev = {j.data.tags[TAG_POLICY]: j.data.metrics["dev/nested_utility"] for j in cell_jobs}
        ref = max(sorted(dev), key=lambda p: dev[p])
        assert rows.index[rows["verdict"].str.startswith("reference")].tolist() == [ref]
        for policy, u in util.items():
            assert rows.loc[policy, "utility"] == pytest.approx(u)
            assert rows.loc[policy, "dev_utility"] == pytest.approx(dev[policy])
            assert rows.loc[policy, "diff_vs_ref"] == pytest.approx(u - util[ref])  # policy - reference
    with open(client.download_artifacts(parents[0].info.run_id, "policy_comparison.txt", str(tmp_path)),
              encoding="utf-8") as fh:
        out = fh.read()
    assert "Policies vs the reference at cost.c=0.0" in out and "Holm" in out
