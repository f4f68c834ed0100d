"""Test helper: populate an MLflow store with one sweep in the harness's documented layout.

Why: the report and team-mode tests must not depend on the Hydra app to have data; they read
any store with the layout (parent sweep run + child job runs with the documented tags, params,
metrics, frontier series and artifacts). Values are hand-chosen so tests can compare the
report against them exactly.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

EXPERIMENT = "synthetic/keep-vs-hybrid"
SWEEP_ID = "sw-test-0001"
BUDGET_STEPS = (10, 25, 50, 75, 90)

# job name -> (policy, config hash, scalar metrics, exact series, deployable series, usage)
JOBS = {
    "ridge c=0.02 seed=0": dict(
        policy="ridge",
        hash="h-ridge",
        metrics={
            "heldout/hit_at_10": 0.8125,
            "heldout/utility": 0.7950,
            "heldout/extra_share": 0.3750,
            "heldout/diff_vs_base/utility": 0.0450,
            "heldout/diff_vs_base/utility/ci_low": 0.0100,
            "heldout/diff_vs_base/utility/ci_high": 0.0800,
            "frontier/exact_auc": 0.7900,
            "budget/0.25/deployable/violation_rate": 0.2,
            "budget/0.50/deployable/violation_rate": 0.4,
        },
        exact=(0.74, 0.78, 0.81, 0.82, 0.82),
        deployable=(0.73, 0.77, 0.80, 0.82, 0.82),
        usage=(0.11, 0.27, 0.49, 0.76, 0.91),
    ),
    "random c=0.02 seed=0": dict(
        policy="random",
        hash="h-random",
        metrics={
            "heldout/hit_at_10": 0.7500,
            "heldout/utility": 0.7400,
            "heldout/extra_share": 0.5000,
            "heldout/diff_vs_base/utility": -0.0100,
            "heldout/diff_vs_base/utility/ci_low": -0.0500,
            "heldout/diff_vs_base/utility/ci_high": 0.0300,
            "frontier/exact_auc": 0.7600,
            "budget/0.25/deployable/violation_rate": 0.6,
            "budget/0.50/deployable/violation_rate": 0.0,
        },
        exact=(0.72, 0.73, 0.76, 0.79, 0.81),
        deployable=(0.72, 0.74, 0.75, 0.80, 0.81),
        usage=(0.08, 0.30, 0.52, 0.70, 0.93),
    ),
}
# A failed earlier attempt of the ridge job (same config hash): the report must show the
# finished rerun, not this one.
FAILED_JOB = dict(name="ridge c=0.02 seed=0", hash="h-ridge", error="ValueError: boom")


def populate_sweep(tracking_uri: str, artifact_location: str | None = None,
                   tmp_dir: Path | None = None) -> dict:
    """Log the sweep; return ids {"experiment_id", "parent", "jobs": {name: run_id}}."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    exp_id = exp.experiment_id if exp else client.create_experiment(
        EXPERIMENT, artifact_location=artifact_location
    )
    common = {"route_bench.sweep_id": SWEEP_ID}
    parent = client.create_run(
        exp_id, run_name=f"sweep {SWEEP_ID}", tags={**common, "route_bench.role": "sweep"}
    )
    pid = parent.info.run_id
    ids = {"experiment_id": exp_id, "parent": pid, "jobs": {}}

    failed = client.create_run(
        exp_id, run_name=FAILED_JOB["name"],
        tags={**common, "route_bench.role": "job", "mlflow.parentRunId": pid,
              "route_bench.config_hash": FAILED_JOB["hash"], "route_bench.policy": "ridge",
              "route_bench.error": FAILED_JOB["error"]},
    )
    client.log_metric(failed.info.run_id, "heldout/hit_at_10", 0.1)
    client.set_terminated(failed.info.run_id, status="FAILED")
    ids["failed"] = failed.info.run_id
    time.sleep(0.01)  # later start_time for the finished rerun

    for name, job in JOBS.items():
        run = client.create_run(
            exp_id, run_name=name,
            tags={**common, "route_bench.role": "job", "mlflow.parentRunId": pid,
                  "route_bench.config_hash": job["hash"], "route_bench.policy": job["policy"]},
        )
        rid = run.info.run_id
        client.log_param(rid, "policy.name", job["policy"])
        client.log_param(rid, "cost.c", "0.02")
        client.log_param(rid, "seed", "0")
        for k, v in job["metrics"].items():
            client.log_metric(rid, k, v)
        for step, y_e, y_d, u in zip(BUDGET_STEPS, job["exact"], job["deployable"], job["usage"]):
            client.log_metric(rid, "frontier/exact/hit_at_10", y_e, step=step)
            client.log_metric(rid, "frontier/deployable/hit_at_10", y_d, step=step)
            client.log_metric(rid, "frontier/deployable/realized_usage", u, step=step)
        client.log_text(rid, f"policy={job['policy']}\n", "summary.txt")
        client.log_text(rid, f"policy:\n  name: {job['policy']}\n", "config.yaml")
        if tmp_dir is not None:
            dec = Path(tmp_dir) / job["policy"] / "decisions.parquet"
            dec.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame({"qid": ["q1", "q2"], "ran_extra": [True, False]}).to_parquet(dec)
            client.log_artifact(rid, str(dec))
        client.set_terminated(rid, status="FINISHED")
        ids["jobs"][name] = rid
    client.set_terminated(pid, status="FINISHED")
    return ids


def same_metrics(a: dict, b: dict) -> bool:
    """Equal to the last digit, with NaN (an undefined number, e.g. APGR on too few discordant
    questions) equal to NaN: plain dict equality says NaN != NaN."""
    import math

    def key(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v

    return {k: key(v) for k, v in a.items()} == {k: key(v) for k, v in b.items()}
