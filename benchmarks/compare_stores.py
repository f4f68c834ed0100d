"""Compare two MLflow stores run by run: the same runs, params, metrics, tags and artifacts.

Why: a restructuring of the code must not change a number. Run the same sweep with the old and
the new code into two stores, then

    python benchmarks/compare_stores.py sqlite:///old/mlruns/mlflow.db sqlite:///new/mlruns/mlflow.db

Runs are matched by (experiment name, role, run name; a sweep's parent run by its role alone). Compared exactly: every param, every
metric's last value, every tag except those that name the code, the process or the run itself
(``VOLATILE_TAGS``), and every artifact's bytes (text artifacts after replacing run ids, which
differ between stores; PNG and Parquet byte for byte). Exit 0 when identical, else 1 with one
line per difference.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path

VOLATILE_TAGS = {
    "route_bench.git_commit", "mlflow.source.git.commit", "route_bench.code_version", "route_bench.skip_key",
    "route_bench.host", "route_bench.pid", "route_bench.proc_start", "mlflow.parentRunId", "mlflow.loggedArtifacts",
}
RUN_ID = re.compile(rb"[0-9a-f]{32}")
TEXT = (".txt", ".md", ".csv", ".json", ".yaml", ".html")


def same(a, b) -> bool:
    """Equal, NaN equal to NaN (a metric with no value in both stores)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def runs_of(uri: str) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    out = {}
    for exp in client.search_experiments():
        for r in client.search_runs([exp.experiment_id], max_results=5000):
            role = r.data.tags.get("route_bench.role", "")
            # a parent run is named by its sweep id, which hashes the config (store URI included)
            key = (exp.name, role, "sweep" if role == "sweep" else r.info.run_name)
            if key in out:
                raise SystemExit(f"{uri}: two runs named {key}")
            out[key] = r
    return client, out


def artifact_digests(client, run, tmp: Path, short_ids: re.Pattern) -> dict[str, str]:
    """Path -> digest of every artifact of ``run`` (text with run ids, and their 8-character
    prefixes as the comparison table shows them, replaced)."""
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp / run.info.run_id)))
    out = {}
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        data = f.read_bytes()
        if f.suffix in TEXT:
            data = short_ids.sub(b"<run>", RUN_ID.sub(b"<run>", data))
        out[str(f.relative_to(local))] = hashlib.sha256(data).hexdigest()
    return out


def compare(old_uri: str, new_uri: str) -> list[str]:
    c_old, old = runs_of(old_uri)
    c_new, new = runs_of(new_uri)
    diffs = [f"only in old: {k}" for k in sorted(set(old) - set(new))]
    diffs += [f"only in new: {k}" for k in sorted(set(new) - set(old))]
    short = {name: re.compile(rb"\b(" + b"|".join(r.info.run_id[:8].encode() for r in runs.values()) + rb")\b")
             for name, runs in (("old", old), ("new", new))}
    with tempfile.TemporaryDirectory() as tmp:
        for key in sorted(set(old) & set(new)):
            a, b = old[key], new[key]
            for what, x, y in (("param", a.data.params, b.data.params), ("metric", a.data.metrics, b.data.metrics)):
                for k in sorted(set(x) | set(y)):
                    if not same(x.get(k), y.get(k)):
                        diffs.append(f"{key} {what} {k}: {x.get(k)!r} != {y.get(k)!r}")
            ta = {k: RUN_ID.sub(b"<run>", v.encode()) for k, v in a.data.tags.items() if k not in VOLATILE_TAGS}
            tb = {k: RUN_ID.sub(b"<run>", v.encode()) for k, v in b.data.tags.items() if k not in VOLATILE_TAGS}
            diffs += [f"{key} tag {k} differs" for k in sorted(set(ta) | set(tb)) if ta.get(k) != tb.get(k)]
            fa = artifact_digests(c_old, a, Path(tmp) / "old", short["old"])
            fb = artifact_digests(c_new, b, Path(tmp) / "new", short["new"])
            diffs += [f"{key} artifact {p} differs" for p in sorted(set(fa) | set(fb)) if fa.get(p) != fb.get(p)]
    return diffs


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.splitlines()[0] + "\nusage: compare_stores.py OLD_URI NEW_URI", file=sys.stderr)
        return 2
    diffs = compare(*args)
    for d in diffs:
        print(d)
    print(f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
