"""Wall time of the default sweep and the per-job overhead of Hydra + MLflow.

Runs (1) the default sweep (``python -m harness -m`` = every built-in policy x costs
{0, 0.01, 0.02, 0.05}, protocols threshold + budget) as a subprocess into a temporary MLflow
store, after a warm-up that builds/caches the outcome table; (2) the same jobs' protocols
in-process without Hydra or MLflow. Overhead per job = (sweep wall - warm-up-free compute) / jobs.
The sweep's own store then splits its wall time (the runs' start and end times): the jobs (first
job's start to last job's end) and the sweep's end (last job's end to the parent run's end: the
decision table, the verdicts and the policy comparisons); the whole sweep is compared with the
in-process compute (ratio; the goal is at most 2).

The protocols' own work at the sweep's end (their sweep stages: verdicts, decision table, policy
comparisons) is timed in-process too, over the same jobs computed in-process as records; the
whole sweep is compared with the protocols' compute, jobs and sweep stages (the goal: at most 2).

    python benchmarks/bench_sweep.py                      # synthetic table
    python benchmarks/bench_sweep.py --dataset qasper_yesno [--launcher joblib --n-jobs 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def default_sweep_jobs(dataset: str) -> tuple[list[dict], list[str]]:
    """The plain configs of every job of the default sweep (composed like Hydra composes them)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from harness import app

    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        base = compose(config_name="config", overrides=[f"dataset={dataset}"], return_hydra_config=True)
        params = OmegaConf.to_container(base.hydra.sweeper.params)
        jobs = []
        for policy in params["policy"].split(","):
            for cost in params["cost.c"].split(","):
                cfg = compose(config_name="config", overrides=[f"dataset={dataset}", f"policy={policy}",
                                                                 f"cost.c={cost}", f"protocol={params['protocol']}"])
                jobs.append(app.to_plain(cfg))
    return jobs, [f"dataset={dataset}"]


def sweep_phases(uri: str) -> dict[str, float]:
    """Seconds of the sweep's phases from its store's run times: ``jobs`` (first job's start to the
    last job's end), ``end`` (last job's end to the parent run's end) and ``parent`` (the parent
    run, start to end); NaN where a run has no time."""
    from harness.store_schema import TAG_ROLE
    from harness.tracking.store_reader import experiments, open_client, search_runs

    client = open_client(uri)
    runs = search_runs(client, [e.experiment_id for e in experiments(client, None, uri)], "")
    jobs = [r.info for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    parents = [r.info for r in runs if r.data.tags.get(TAG_ROLE) == "sweep"]
    nan = float("nan")
    if not jobs or not parents or any(j.end_time is None for j in jobs) or parents[0].end_time is None:
        return {"jobs": nan, "end": nan, "parent": nan}
    first, last, parent = min(j.start_time for j in jobs), max(j.end_time for j in jobs), parents[0]
    return {"jobs": (last - first) / 1000, "end": (parent.end_time - last) / 1000,
            "parent": (parent.end_time - parent.start_time) / 1000}


def in_process_sweep_jobs(jobs: list[dict], folder: Path) -> list:
    """Each job computed in-process as its tracked run would be (``harness.runner.job.prepare``
    and ``compute``: the protocols, the metrics, tags and artifact files), as the store-neutral
    records a protocol's sweep stage reads (``SweepJob``): params, last value of each metric,
    tags, artifacts from the job's folder. No Hydra, no MLflow."""
    from harness.protocols.sweep_stage import SweepJob
    from harness.secrets import redact_secrets
    from harness.runner import job as job_mod
    from harness.tracking import naming

    out = []
    for i, plain in enumerate(jobs):
        chash = naming.config_hash(plain)
        prepared = job_mod.prepare(plain, chash)
        art = folder / f"job{i}"
        art.mkdir(parents=True)
        done = job_mod.compute(plain, prepared, art, where=f"job{i}")
        metrics = {name: float(value) for name, value, _ in sorted(done.series, key=lambda x: x[2])}
        tags = {**job_mod.job_tags(plain, chash, None), **done.tags}

        def open_artifact(name: str, art: Path = art) -> Path | None:
            return art / name if (art / name).is_file() else None

        out.append(SweepJob(f"job{i}", job_mod.run_name(plain), "FINISHED",
                            naming.flatten_params(redact_secrets(plain)), metrics, tags, open_artifact))
    return out


def sweep_stage_compute(jobs: list[dict], folder: Path) -> float:
    """Seconds of every protocol's sweep stage over the jobs' in-process records (the
    verdicts, decision table and policy comparisons: the protocols' own work at the sweep's end)."""
    from harness.protocols.sweep_stage import SweepContext, run_sweep_stages, sweep_protocols

    records = in_process_sweep_jobs(jobs, folder)
    first = jobs[0]
    ctx = SweepContext(alpha=float(first["protocol"].get("alpha", 0.05)),
                       n_boot=int(first["protocol"].get("n_boot", 1000)),
                       metric=str(first["arms"].get("metric", "hit@10")))
    t = time.perf_counter()
    results = run_sweep_stages(records, sweep_protocols(records, list(first["protocol"]["run"])), ctx)
    seconds = time.perf_counter() - t
    failed = [name for name, r in results.items() if r.text.startswith(f"[route-bench] {name} sweep stage not made")]
    if failed:
        raise RuntimeError(f"in-process sweep stages failed: {failed}: {[results[n].text for n in failed]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--launcher", default="basic", choices=["basic", "joblib"])
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)

    from harness import app

    jobs, overrides = default_sweep_jobs(args.dataset)
    t0 = time.perf_counter()
    table = app.build_table(jobs[0])  # warm the outcome-table cache (not timed as sweep)
    task = app.make_task(jobs[0], table)
    for cfg in jobs:  # a measured cost (cost.unit): cost.c derived as the tracked job derives it
        app.resolve_cost(cfg, table, task)
    print(f"table {table.key}: {task.n} questions; build/load {time.perf_counter() - t0:.1f}s")

    from harness.protocols.common import forget_reused

    compute = fresh = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in jobs:  # as a sweep runs them: one policy's costs in a row share protocol B's fit
            factory = app.policy_factory(cfg["policy"])
            t = time.perf_counter()
            app.compute_job(cfg, task, factory, Path(tmp) / "kept" / cfg["policy"]["name"] / str(cfg["cost"]["c"]))
            compute += time.perf_counter() - t
        for cfg in jobs:  # for reference: every job computed from scratch (no reuse across costs)
            forget_reused()
            factory = app.policy_factory(cfg["policy"])
            t = time.perf_counter()
            app.compute_job(cfg, task, factory, Path(tmp) / "fresh" / cfg["policy"]["name"] / str(cfg["cost"]["c"]))
            fresh += time.perf_counter() - t

        stages = sweep_stage_compute(jobs, Path(tmp) / "stage")
        launcher = [] if args.launcher == "basic" else ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={args.n_jobs}"]
        cmd = [sys.executable, "-m", "harness", "-m", *overrides, *launcher,
               f"tracking.uri=sqlite:///{Path(tmp) / 'bench.db'}"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=dict(os.environ))
        wall = time.perf_counter() - t
        phases = sweep_phases(f"sqlite:///{Path(tmp) / 'bench.db'}") if proc.returncode == 0 else {}
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        return 1
    n = len(jobs)
    print(f"default sweep on {args.dataset} ({n} jobs, launcher {args.launcher}"
          f"{f', n_jobs={args.n_jobs}' if args.launcher == 'joblib' else ''}): wall {wall:.1f}s")
    print(f"protocols alone, in-process: {compute:.1f}s total, {compute / n:.2f}s per job "
          f"(every job from scratch: {fresh:.1f}s; protocol B fitted once per policy and seed: "
          f"{fresh / compute:.2f}x less)")
    print(f"Hydra + MLflow + process start overhead: {wall - compute:.1f}s total, {(wall - compute) / n:.2f}s per job")
    print(f"ratio wall / protocol compute: {wall / compute:.2f} (the same jobs' protocols, same reuse); "
          f"wall / from-scratch compute: {wall / fresh:.2f}")
    print(f"from the sweep's store: jobs {phases['jobs']:.1f}s (first job's start to last job's end), "
          f"the sweep's end {phases['end']:.1f}s (last job's end to the parent run's end), "
          f"parent run {phases['parent']:.1f}s")
    print(f"ratio whole sweep (jobs and its end, wall) / the jobs' protocols in-process: {wall / compute:.2f}; "
          f"jobs / compute: {phases['jobs'] / compute:.2f}, the sweep's end / compute: {phases['end'] / compute:.2f}")
    total = compute + stages
    print(f"the protocols' sweep stages in-process (verdicts, decision table, comparisons): {stages:.1f}s; "
          f"the sweep's end / its stages: {phases['end'] / stages:.2f}")
    print(f"ratio whole sweep (wall) / the protocols' in-process compute, jobs and sweep stages "
          f"({total:.1f}s): {wall / total:.2f} (goal: at most 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
