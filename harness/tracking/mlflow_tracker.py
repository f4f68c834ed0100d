"""Everything MLflow in one place: store location, experiments, parent/child runs, params,
metrics, frontier series, artifacts, FAILED runs and skip-if-finished.

Layout (shared with the report command; see docs/sweeps.md):

- Experiment ``<dataset.name>/<base>-vs-<extra>``; one parent run per sweep (``sweep <id>``,
  tags ``route_bench.sweep_id``, ``route_bench.role=sweep``); one child run per job (tags
  ``mlflow.parentRunId``, ``route_bench.sweep_id``, ``route_bench.role=job``,
  ``route_bench.config_hash``, ``route_bench.policy``). A single run (no -m) has role ``single``
  and no parent. Every job run also carries ``route_bench.dataset``, ``route_bench.arms``,
  ``route_bench.budget_grid``, ``route_bench.git_commit``, a description (``mlflow.note.content``:
  headline and summary) and its input dataset (``log_dataset``).
- Run names (``harness.console.run_name``): a single run ``<policy> c=<c> seed=<seed>``; a sweep
  job the policy name plus every key the sweep varies (``ridge(features=qpp) seed=1``).
- Metric names: the protocol's slash-separated names passed through ``mlflow_name``. MLflow
  accepts only ``[/\\w.\\- :]`` in names, so ``@`` becomes ``_at_`` (``heldout/hit@10`` is
  logged as ``heldout/hit_at_10``); every other disallowed character becomes ``_``.
- Frontier series: ``frontier/<frontier>/<column>`` with step = budget in percent.
- Headline metrics (a few columns to compare runs by): ``headline/utility``,
  ``headline/<metric>``, ``headline/extra_share``, ``headline/deployable_utility@<budget>``.

Why one module: the naming rules above are a contract; writing them once keeps the app, the
sweep callback and the report command from drifting apart.

Reliability guarantees (docs/sweeps.md):

- **Fail fast on a store that cannot work.** ``Tracker(uri)`` probes an HTTP(S) tracking server
  (``GET /health``, a few seconds) before anything else and raises :class:`TrackingStoreError`
  naming the URL when it does not answer (MLflow's own client would retry for minutes); a
  SQLite file that is not a database (or a folder, or unreadable) is a TrackingStoreError naming
  the file. Both end the command in one line (``error: TrackingStoreError: ...``). Transient
  errors of a working store ("database is locked") are still retried with backoff.
- **Schema creation is serialised.** Opening a SQLite store holds a file lock in the store's
  folder (``.route-bench.lock``), and MLflow's schema-creation race between processes outside
  that lock ("duplicate column name", "table ... already exists") is retried, so two sweeps on
  a fresh store both start.
- **Every run says which process runs it.** Job and sweep runs carry ``route_bench.host``,
  ``route_bench.pid`` and ``route_bench.proc_start`` (the process's start time from
  ``/proc/<pid>/stat``, so a reused pid is not mistaken for the original process). A RUNNING run
  whose host is this host and whose process is gone is *stale* (:func:`process_alive` False);
  it is ended FAILED with the reason in ``route_bench.end_reason``. Runs of another host are
  never declared stale (their process cannot be checked from here).
- **A job is claimed atomically** (:meth:`Tracker.claim_job`). Its *skip key* (config hash,
  outcome-table fingerprint, code version; ``harness.runner.job.skip_key``) is a run tag. For a SQLite
  store, under the store folder's claim lock (``.route-bench-claims.lock``): a FINISHED job run
  with the key is reused; a live RUNNING one (another sweep running the same job now) is waited
  for, polling, until it ends; else this process creates its RUNNING run with the key. So two
  concurrent sweeps of one command never run a job twice. A server store has no shared lock:
  the claim is "search, create, search again"; of several RUNNING claims the oldest (start
  time, then run id) wins and the others delete their run and wait. What remains there: a
  server that answers searches with stale data (e.g. a replicated database) could let both
  run; on a single-database server the second search always sees the first claim.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from harness.errors import HarnessError
from harness.io import digest_of, file_lock
from harness.store_schema import (
    TAG_CONFIG_HASH, TAG_END_REASON, TAG_ERROR, TAG_HOST, TAG_NOTE, TAG_PARENT, TAG_PID, TAG_PROC_START, TAG_ROLE, TAG_SKIP_KEY, TAG_SWEEP_ID,
)

try:  # newer harness.errors has a StoreError family; keep working without it
    from harness.errors import StoreError as _StoreErrorBase
except ImportError:  # pragma: no cover - depends on the errors module's version
    _StoreErrorBase = HarnessError

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
# MLflow's experiment kind (its UI's "custom model development": the runs table first) and the
# metric its UI treats as the experiment's primary one
EXPERIMENT_TAGS = {
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.experiment.primaryMetric.name": "heldout/utility",
    "mlflow.experiment.primaryMetric.greaterIsBetter": "true",
}
NOTE_MAX_CHARS = 8000  # MLflow's limit of a tag value
DATASET_DIGEST_CHARS = 16  # MLflow keeps at most 36 characters of a dataset digest
PARAM_MAX_CHARS = 500  # a readable cut; MLflow's own limit is 6000. The full config is config.yaml
# keys that never change a job's numbers (``verbose`` only changes what is printed, ``executor``
# only where a build's pieces are computed)
HASH_EXCLUDED_KEYS = ("tracking", "hydra", "verbose", "executor")

T = TypeVar("T")

_BAD_NAME_CHARS = re.compile(r"[^/\w.\- :]")


def mlflow_name(name: str) -> str:
    """A metric/param/tag name MLflow accepts: ``@`` -> ``_at_``, other bad characters -> ``_``."""
    return _BAD_NAME_CHARS.sub("_", str(name).replace("@", "_at_"))


def resolve_tracking_uri(tracking: Mapping[str, Any], launch_dir: str | os.PathLike) -> str:
    """Explicit ``tracking.uri`` > $MLFLOW_TRACKING_URI > ``sqlite:///<launch_dir>/<store_dir>/mlflow.db``."""
    uri = tracking.get("uri")
    if uri:
        return str(uri)
    env = os.environ.get(ENV_TRACKING_URI)
    if env:
        return env
    store = Path(launch_dir) / str(tracking.get("store_dir") or "mlruns")
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store.resolve() / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """Artifacts of a SQLite store go to ``artifacts/`` next to the database file, found there
    again after the store folder is copied or moved (``harness.tracking.artifact_root``); other
    stores (a server, a file store) decide themselves (None)."""
    from harness.tracking.artifact_root import own_root

    return own_root(uri)


def experiment_name(cfg: Mapping[str, Any]) -> str:
    """``tracking.experiment`` if set, else ``<dataset.name>/<arms.base>-vs-<arms.extra>``, under
    ``<experiment.name>/`` for a named experiment (``conf/experiment/seed*.yaml``): its runs on
    each dataset are one MLflow experiment, found by ``harness.results``."""
    explicit = (cfg.get("tracking") or {}).get("experiment")
    if explicit:
        return str(explicit)
    arms = cfg.get("arms") or {}
    name = f"{cfg['dataset']['name']}/{arms.get('base', 'keep')}-vs-{arms.get('extra', 'hybrid')}"
    named = (cfg.get("experiment") or {}).get("name") if isinstance(cfg.get("experiment"), Mapping) else None
    return f"{named}/{name}" if named else name


def config_hash(cfg: Mapping[str, Any]) -> str:
    """Digest of the resolved job config minus tracking/launcher/hydra keys: same job, same hash."""
    return digest_of({k: v for k, v in cfg.items() if k not in HASH_EXCLUDED_KEYS})[:16]


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """``git rev-parse HEAD`` of the harness's source checkout, "unknown" without git or a
    checkout (an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit) else "unknown"


def description(title: str, text: str, limit: int = NOTE_MAX_CHARS) -> str:
    """A run description (Markdown): a title line, then ``text`` as a code block, cut to MLflow's
    tag limit with a pointer to the full text (the ``summary.txt`` artifact)."""
    head, tail = f"{title}\n\n```\n", "\n```\n"
    cut = "\n... (cut; the full text is the artifact summary.txt)"
    room = limit - len(head) - len(tail)
    body = text if len(text) <= room else text[: max(0, room - len(cut))] + cut
    return head + body + tail


def experiment_description(title: str, run_id: str, lines: list[str], limit: int = NOTE_MAX_CHARS) -> str:
    """The experiment's description after a sweep (Markdown). Its first line is what the MLflow
    UI shows above the runs table while the description is folded, so it carries the first
    closing line (the verdict); then every closing line as a code block and the parent run,
    whose description and artifacts hold the full tables."""
    head = lines[0].strip() if lines else "no verdict: no protocol of this sweep has a sweep-level result"
    return description(f"**Latest sweep**: {head}", "\n".join(lines + ["", f"{title}: parent run {run_id} (its "
                       "description and artifacts hold the full tables)"]), limit)


def note_text(note: str) -> str:
    """The text block of a ``description`` (what a finished run's summary said), else ``note``."""
    start = note.find("```\n")
    end = note.rfind("\n```")
    return note[start + 4 : end] if 0 <= start < end else note


def _short(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        text = "[" + ",".join(str(v) for v in value) + "]"
        if len(text) > PARAM_MAX_CHARS:
            kept: list[str] = []
            for v in value:
                if len(",".join(kept + [str(v)])) > PARAM_MAX_CHARS - 30:
                    break
                kept.append(str(v))
            text = "[" + ",".join(kept) + f",...(+{len(value) - len(kept)} more)]"
        return text
    text = "null" if value is None else str(value)
    return text if len(text) <= PARAM_MAX_CHARS else text[: PARAM_MAX_CHARS - 3] + "..."


def flatten_params(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"cost": {"c": 0.02}}`` -> ``{"cost.c": "0.02"}``; lists are one value, cut to
    PARAM_MAX_CHARS with a ``...(+N more)`` marker (the whole config is the config.yaml artifact)."""
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            if value:
                out.update(flatten_params(value, prefix=name + "."))
            else:
                out[mlflow_name(name)] = "{}"
        else:
            out[mlflow_name(name)] = _short(value)
    return out


def block_tags(blocks: Mapping[str, Any]) -> dict[str, str]:
    """``route_bench.generator.<block>.<field>`` tags from the table info's blocks: what each
    block's generator reported (``describe()``: backend, model, decoding and engine settings),
    so a run says how its answers were made. Chunks built with different reports (only
    possible for settings outside the key) give their values joined by `` | ``."""
    out: dict[str, str] = {}
    for name, info in sorted(blocks.items()):
        records = [r.get("generator") for r in (info or {}).get("built_with") or [] if isinstance(r, Mapping)]
        values: dict[str, list[str]] = {}
        for rec in records:
            for key, value in flatten_params(rec).items() if isinstance(rec, Mapping) else ():
                if value not in values.setdefault(key, []):
                    values[key].append(value)
        for key, seen in values.items():
            out[mlflow_name(f"route_bench.generator.{name}.{key}")] = _short(" | ".join(seen))
    return out


def _is_transient(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "unable to open database" in text


def _is_dataset_race(exc: BaseException) -> bool:
    """Two parallel jobs logging the same dataset: the slower insert of the shared dataset row
    fails on its UNIQUE key. Retried, the store finds the row and only links it to the run."""
    return "unique constraint failed: datasets." in str(exc).lower()


class TrackingStoreError(_StoreErrorBase):
    """The tracking store cannot be used: an HTTP server that does not answer, a SQLite file that
    is not a database. The message names the URL or the file."""


class ClaimTimeout(HarnessError):
    """Another live process kept a job claimed longer than the wait allows."""


# ---- processes ------------------------------------------------------------------------------------
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


@functools.lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of ``pid`` from ``/proc``; None without it."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = data[data.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    if len(rest) < 20:
        return None
    return rest[0], rest[19]  # field 3 (state) and field 22 (starttime)


def process_identity(pid: int | None = None) -> dict[str, str]:
    """Tags naming a process: host, pid and its start time (so a reused pid is told apart)."""
    pid = os.getpid() if pid is None else int(pid)
    stat = _proc_stat(pid)
    start = f"{stat[1]}@{_boot_id()}" if stat else ""
    return {TAG_HOST: socket.gethostname(), TAG_PID: str(pid), TAG_PROC_START: start}


def process_alive(tags: Mapping[str, str]) -> bool | None:
    """Is the process a run's tags name still running? None when it cannot be told (no tags,
    another host): such a run is never declared stale."""
    host, pid = tags.get(TAG_HOST), str(tags.get(TAG_PID, ""))
    if not host or not pid.isdigit():
        return None
    if host != socket.gethostname():
        return None
    pid_n = int(pid)
    if pid_n == os.getpid():
        return True
    try:
        os.kill(pid_n, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    stat = _proc_stat(pid_n)
    if stat is None:
        return True  # no /proc: the pid exists, trust it
    state, start = stat
    if state in ("Z", "X"):  # exited, not yet reaped
        return False
    recorded = tags.get(TAG_PROC_START)
    if recorded and recorded != f"{start}@{_boot_id()}":
        return False  # the pid was reused by another process
    return True


# ---- opening a store ---------------------------------------------------------------------------------
SQLITE_HEADER = b"SQLite format 3\x00"
PROBE_TIMEOUT_S = 3.0
PROBE_ATTEMPTS = 3


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for other stores)."""
    if not uri.startswith("sqlite:///"):
        return None
    raw = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(raw) if raw and raw != ":memory:" else None


def check_sqlite_file(path: Path) -> None:
    """A SQLite store file that exists must be a readable SQLite database (one line otherwise)."""
    if not path.exists():
        return
    if path.is_dir():
        raise TrackingStoreError(f"MLflow store {path} is a folder, not an SQLite database file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise TrackingStoreError(f"MLflow store {path} cannot be read: {exc.strerror or exc}") from None
    if head and head != SQLITE_HEADER:
        raise TrackingStoreError(
            f"MLflow store {path} is not an SQLite database (corrupt or another kind of file); "
            "move it aside or point tracking.uri elsewhere"
        )


def check_writable_store(path: Path) -> None:
    """A SQLite store a job writes to must be writable: the file, and its folder (SQLite keeps
    its journal next to the file). Said naming the file, before SQLAlchemy's autoflush noise."""
    folder = path.parent
    if not folder.is_dir():
        return
    flags = getattr(os.statvfs(folder), "f_flag", 0) if hasattr(os, "statvfs") else 0
    if flags & getattr(os, "ST_RDONLY", 0):
        raise TrackingStoreError(f"MLflow store {path} is on a read-only file system; point tracking.uri at a "
                                 "writable folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise TrackingStoreError(f"MLflow store {path} is read-only (no write permission); make it writable or "
                                 "point tracking.uri elsewhere")
    if not os.access(folder, os.W_OK):
        raise TrackingStoreError(f"MLflow store {path}: its folder {folder} is read-only (SQLite writes its "
                                 "journal there); make it writable or point tracking.uri elsewhere")


def probe_store(uri: str, timeout: float = PROBE_TIMEOUT_S, attempts: int = PROBE_ATTEMPTS) -> None:
    """An HTTP(S) tracking server must answer ``GET /health`` within a few seconds.

    Any HTTP answer below 500 counts (the server is there; MLflow's calls report the rest).
    Other URIs are not probed. Raises TrackingStoreError naming the URL.
    """
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    reason = "no answer"
    for attempt in range(max(1, attempts)):
        try:
            with urllib.request.urlopen(url, timeout=timeout):
                return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
            reason = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            cause = getattr(exc, "reason", exc)
            reason = str(getattr(cause, "strerror", None) or cause)
        if attempt + 1 < attempts:
            time.sleep(0.5 * (attempt + 1))
    raise TrackingStoreError(
        f"tracking server {uri} does not answer ({reason}); start it, or point tracking.uri / "
        "MLFLOW_TRACKING_URI at a running one"
    )


def _is_schema_race(exc: BaseException) -> bool:
    """Two processes creating MLflow's schema in one fresh SQLite file at once."""
    text = str(exc).lower()
    return ("duplicate column name" in text or ("table" in text and "already exists" in text)
            or "out-of-date database schema" in text)


@dataclass
class Claim:
    """What :meth:`Tracker.claim_job` decided: run the job as ``run_id`` (a new RUNNING run),
    or reuse the FINISHED run ``reused``; ``waited_for``: the run of another process that
    was waited for first (None if none)."""

    run_id: str | None = None
    reused: Any = None
    waited_for: str | None = None


class Tracker:
    """A thin, retrying wrapper of ``MlflowClient`` bound to one tracking URI.

    Parallel joblib workers share one SQLite file: every store call is retried with backoff
    when SQLite reports the database as locked (``retries`` attempts). Opening probes a server
    and checks a SQLite file first (``TrackingStoreError`` in seconds, naming the URL or file).
    """

    def __init__(self, uri: str, retries: int = 5, probe: bool = True):
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.retries = max(1, int(retries))
        self.db_path = sqlite_path(uri)
        from harness.config.store import tracking_uri_problem

        if tracking_uri_problem(uri):  # e.g. $MLFLOW_TRACKING_URI=garbage://x
            raise TrackingStoreError(f"tracking store: {tracking_uri_problem(uri)}")
        if probe:
            probe_store(uri)
        if self.db_path is not None:
            check_sqlite_file(self.db_path)
            check_writable_store(self.db_path)
        race = lambda exc: _is_transient(exc) or _is_schema_race(exc)  # noqa: E731
        try:
            with self.store_lock(".route-bench.lock"):  # one schema creation at a time
                self.client = self._retry(lambda: MlflowClient(tracking_uri=uri), transient=race)
        except Exception as exc:
            if self.db_path is None:
                raise
            raise TrackingStoreError(f"MLflow store {self.db_path} cannot be opened: {_first_line(exc)}") from exc

    @contextlib.contextmanager
    def store_lock(self, name: str = ".route-bench-claims.lock"):
        """An inter-process lock in a SQLite store's folder; no lock for other stores or where
        the folder cannot hold one (a read-only folder)."""
        folder = self.db_path.parent if self.db_path is not None else None
        if folder is None or not folder.is_dir():
            yield False
            return
        try:
            lock = file_lock(folder / name)
            lock.__enter__()
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            lock.__exit__(None, None, None)

    def _retry(self, call: Callable[[], T], transient: Callable[[BaseException], bool] = _is_transient) -> T:
        delay = 0.2
        for attempt in range(self.retries):
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 - re-raised unless transient
                if attempt == self.retries - 1 or not transient(exc):
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    # ---- experiments and runs -------------------------------------------------------------
    def ensure_experiment(self, name: str, artifact_location: str | None = None) -> str:
        """Id of experiment ``name``, created if missing (safe when two processes race), with
        ``EXPERIMENT_TAGS``: the MLflow UI (3.x) then opens it on its runs table, not on the
        GenAI views (traces, evaluation runs) it guesses for an experiment of unknown kind."""
        from mlflow.exceptions import MlflowException

        from harness.tracking.artifact_root import ROOT_NAME, ROOT_TAG, own_root, relocate

        if artifact_location is not None and artifact_location == own_root(self.uri):
            # the store's own artifacts/ folder: tagged as relative to the store, and a copied
            # store's recorded roots rewritten to it before any run is created (``artifact_root``)
            self._retry(lambda: relocate(self.uri))
            own_root = {ROOT_TAG: ROOT_NAME}
        else:
            own_root = {}
        exp = self._retry(lambda: self.client.get_experiment_by_name(name))
        if exp is None:
            try:
                exp_id = self._retry(lambda: self.client.create_experiment(name, artifact_location=artifact_location))
            except MlflowException:
                exp = self._retry(lambda: self.client.get_experiment_by_name(name))
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
        tags = dict(exp.tags) if exp is not None else {}
        if exp is not None and own_root and exp.artifact_location.rstrip("/") != artifact_location.rstrip("/"):
            own_root = {}  # an experiment with a root of its own (made elsewhere) keeps it, untagged
        for key, value in {**EXPERIMENT_TAGS, **own_root}.items():
            if key not in tags:  # a kind the user chose in the UI stays
                self._retry(lambda k=key, v=value: self.client.set_experiment_tag(exp_id, k, v))
        return exp_id

    def search(self, experiment_id: str, filter_string: str, max_results: int = 10_000) -> list:
        return self._retry(
            lambda: self.client.search_runs(
                [experiment_id], filter_string=filter_string, max_results=max_results,
                order_by=["attributes.start_time ASC"],
            )
        )

    def find_sweep_run(self, experiment_id: str, sweep_id: str):
        runs = self.search(
            experiment_id, f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_ROLE}` = 'sweep'"
        )
        return runs[0] if runs else None

    def start_sweep_run(self, experiment_id: str, sweep_id: str, params: Mapping[str, str]) -> str:
        """The parent run of sweep ``sweep_id``: reused (set RUNNING again) when the same sweep
        is rerun, so its children stay under one parent. Found or created under the store's
        claim lock, so two concurrent sweeps of one command share one parent."""
        ident = process_identity()
        with self.store_lock():
            existing = self.find_sweep_run(experiment_id, sweep_id)
            if existing is not None:
                run_id = existing.info.run_id
                self._retry(lambda: self.client.update_run(run_id, status="RUNNING"))
                self.set_tags(run_id, ident)
                if TAG_END_REASON in existing.data.tags:  # why the last attempt ended is history now
                    self._retry(lambda: self.client.delete_tag(run_id, TAG_END_REASON))
                return run_id
            run = self._retry(
                lambda: self.client.create_run(
                    experiment_id,
                    run_name=f"sweep {sweep_id}",
                    tags={TAG_SWEEP_ID: sweep_id, TAG_ROLE: "sweep", **ident},
                )
            )
        self.log_params(run.info.run_id, params)
        return run.info.run_id

    def find_finished_job(self, experiment_id: str, sweep_id: str, cfg_hash: str):
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_CONFIG_HASH}` = '{cfg_hash}'"
            " and attributes.status = 'FINISHED'",
        )
        return runs[0] if runs else None

    def find_finished_key(self, experiment_id: str, skip_key: str):
        """The newest FINISHED job run with skip key ``skip_key`` in the experiment, any sweep."""
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SKIP_KEY}` = '{skip_key}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'FINISHED'",
        )
        return runs[-1] if runs else None

    def end_stale(self, run, reason: str, status: str = "FAILED") -> None:
        """End a RUNNING run whose process is gone, saying why (``route_bench.end_reason``)."""
        run_id = run.info.run_id
        self.set_tags(run_id, {TAG_END_REASON: reason})
        self.end_run(run_id, status)

    def _stale_reason(self, run, found_by: str) -> str:
        tags = run.data.tags
        return (f"stale: process {tags.get(TAG_PID)} on {tags.get(TAG_HOST)} that ran it is gone "
                f"(found by {found_by}, pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')})")

    def mark_stale_runs(self, experiment_id: str, sweep_id: str, found_by: str = "a new sweep") -> list[str]:
        """End FAILED every RUNNING job run of sweep ``sweep_id`` whose process is provably gone
        (same host, pid not alive or reused); runs of live or unknown processes stay."""
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'RUNNING'",
        )
        ended = []
        for run in runs:
            if process_alive(run.data.tags) is False:
                self.end_stale(run, self._stale_reason(run, found_by))
                ended.append(run.info.run_id)
        return ended

    def end_orphans(self, experiment_id: str, parent_run_id: str, status: str, reason: str,
                    wait_s: float = 5.0) -> list[str]:
        """End the RUNNING children of ``parent_run_id`` whose process is gone (a killed worker),
        waiting up to ``wait_s`` for live ones to end themselves; returns the ended run ids."""
        deadline = time.monotonic() + wait_s
        ended: list[str] = []
        while True:
            running = [r for r in self.child_runs(experiment_id, parent_run_id) if r.info.status == "RUNNING"]
            live = []
            for run in running:
                mine = run.data.tags.get(TAG_PID) == str(os.getpid()) and run.data.tags.get(TAG_HOST) == socket.gethostname()
                alive = process_alive(run.data.tags)
                if alive is False or mine:  # this process runs no job any more when it ends its sweep
                    self.end_stale(run, reason, status)
                    ended.append(run.info.run_id)
                elif alive is True:
                    live.append(run)
            if not live or time.monotonic() >= deadline:
                return ended
            time.sleep(0.25)

    def claim_job(
        self, experiment_id: str, run_name: str, tags: Mapping[str, str], skip_key: str,
        parent_run_id: str | None = None, *, reuse_finished: bool = True, timeout_s: float = 3600.0,
        poll_s: float = 1.0, on_wait: Callable[[Any], None] | None = None,
    ) -> Claim:
        """Reuse a FINISHED run with ``skip_key``, wait for a live RUNNING one, or create this
        process's RUNNING run tagged with it (see the module docstring: atomic under the claim
        lock for SQLite, search-create-search for servers). A RUNNING claim of a process that is
        gone is ended FAILED (stale) and does not count. Raises ClaimTimeout when a live claim
        is held longer than ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        tags = {**dict(tags), TAG_SKIP_KEY: skip_key, **process_identity()}
        waited_for: str | None = None
        while True:
            with self.store_lock() as locked:
                if reuse_finished:
                    done = self.find_finished_key(experiment_id, skip_key)
                    if done is not None:
                        return Claim(reused=done, waited_for=waited_for)
                holder = self._live_claim(experiment_id, skip_key)
                if holder is None and reuse_finished:
                    # a claim can end (FINISHED) between the two searches above, since ending a run
                    # takes no lock: runs only go RUNNING -> ended, so looking again closes the gap
                    done = self.find_finished_key(experiment_id, skip_key)
                    if done is not None:
                        return Claim(reused=done, waited_for=waited_for)
                if holder is None:
                    run_id = self.start_job_run(experiment_id, run_name, tags, parent_run_id=parent_run_id)
                    if locked:
                        return Claim(run_id=run_id, waited_for=waited_for)
                    holder = self._older_claim(experiment_id, skip_key, run_id)
                    if holder is None:
                        return Claim(run_id=run_id, waited_for=waited_for)
                    self._retry(lambda: self.client.delete_run(run_id))  # yield to the older claim
            if waited_for is None:
                waited_for = holder.info.run_id
                if on_wait is not None:
                    on_wait(holder)
            if time.monotonic() >= deadline:
                t = holder.data.tags
                raise ClaimTimeout(
                    f"job is still being run by process {t.get(TAG_PID, '?')} on {t.get(TAG_HOST, '?')} "
                    f"(run {holder.info.run_id}) after {timeout_s:.0f}s of waiting"
                )
            time.sleep(poll_s)

    def _running_with_key(self, experiment_id: str, skip_key: str) -> list:
        return self.search(
            experiment_id,
            f"tags.`{TAG_SKIP_KEY}` = '{skip_key}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'RUNNING'",
        )

    def _live_claim(self, experiment_id: str, skip_key: str):
        """The RUNNING run holding ``skip_key`` whose process is alive (or on another host)."""
        for run in self._running_with_key(experiment_id, skip_key):
            if process_alive(run.data.tags) is False:
                self.end_stale(run, self._stale_reason(run, "a job claiming the same skip key"))
                continue
            return run
        return None

    def _older_claim(self, experiment_id: str, skip_key: str, mine: str):
        """A live RUNNING claim older than run ``mine`` (start time, then run id), else None."""
        runs = [r for r in self._running_with_key(experiment_id, skip_key)
                if r.info.run_id == mine or process_alive(r.data.tags) is not False]
        if not runs:
            return None
        first = min(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))
        return None if first.info.run_id == mine else first

    def start_job_run(
        self, experiment_id: str, run_name: str, tags: Mapping[str, str], parent_run_id: str | None = None
    ) -> str:
        tags = dict(tags)
        if parent_run_id:
            tags[TAG_PARENT] = parent_run_id
        run = self._retry(lambda: self.client.create_run(experiment_id, run_name=run_name, tags=tags))
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self._retry(lambda: self.client.set_terminated(run_id, status=status))

    def child_runs(self, experiment_id: str, parent_run_id: str) -> list:
        return self.search(experiment_id, f"tags.`{TAG_PARENT}` = '{parent_run_id}'")

    # ---- logging ------------------------------------------------------------------------------
    def log_params(self, run_id: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):  # MLflow: at most 100 params per batch
            chunk = items[i : i + 100]
            self._retry(lambda: self.client.log_batch(run_id, params=chunk))

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(mlflow_name(k), str(v)[:5000]) for k, v in sorted(tags.items())]
        for i in range(0, len(items), 100):
            chunk = items[i : i + 100]
            self._retry(lambda: self.client.log_batch(run_id, tags=chunk))

    def set_note(self, run_id: str, text: str) -> None:
        """The run's description (tag ``mlflow.note.content``), cut to MLflow's 8000 characters."""
        from mlflow.entities import RunTag

        tag = RunTag(TAG_NOTE, str(text)[:NOTE_MAX_CHARS])
        self._retry(lambda: self.client.log_batch(run_id, tags=[tag]))

    def set_experiment_note(self, run_id: str, text: str) -> None:
        """The description of the run's experiment (experiment tag ``mlflow.note.content``): the
        MLflow UI shows it in the experiment list's Description column and above the runs table,
        so the latest sweep's verdict is on the first page a user opens."""
        experiment_id = self._retry(lambda: self.client.get_run(run_id)).info.experiment_id
        self._retry(lambda: self.client.set_experiment_tag(experiment_id, TAG_NOTE, str(text)[:NOTE_MAX_CHARS]))

    def log_dataset(
        self, run_id: str, name: str, digest: str, source_type: str, source: Mapping[str, Any],
        profile: Mapping[str, Any] | None = None, context: str = "eval",
    ) -> None:
        """Record the run's input dataset (the UI's Datasets column): name, digest (cut to
        DATASET_DIGEST_CHARS), source and a profile (sizes). Logged as an MLflow dataset entity,
        so nothing is read or downloaded."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        entity = Dataset(
            name=str(name), digest=str(digest)[:DATASET_DIGEST_CHARS], source_type=str(source_type),
            source=json.dumps(dict(source), sort_keys=True, default=str),
            profile=json.dumps(dict(profile), sort_keys=True, default=str) if profile else None,
        )
        item = DatasetInput(dataset=entity, tags=[InputTag(key="mlflow.data.context", value=context)])
        self._retry(lambda: self.client.log_inputs(run_id, datasets=[item]),
                    transient=lambda exc: _is_transient(exc) or _is_dataset_race(exc))

    def log_metrics(self, run_id: str, metrics: Iterable[tuple[str, float, int]]) -> int:
        """Log ``(name, value, step)`` triples in batches of 1000; names via ``mlflow_name``.
        Non-finite values are logged as they are (MLflow stores NaN); None is skipped."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [
            Metric(mlflow_name(name), float(value), now, int(step))
            for name, value, step in metrics
            if value is not None
        ]
        for i in range(0, len(items), 1000):
            chunk = items[i : i + 1000]
            self._retry(lambda: self.client.log_batch(run_id, metrics=chunk))
        return len(items)

    def log_artifacts(self, run_id: str, local_dir: str | os.PathLike) -> None:
        self._retry(lambda: self.client.log_artifacts(run_id, str(local_dir)))

    def log_table(self, run_id: str, frame: Any, artifact_file: str) -> None:
        """A DataFrame as an MLflow table (``MlflowClient.log_table``: JSON ``orient="split"``,
        listed in the run's ``mlflow.loggedArtifacts`` tag, so the UI shows it as a table).
        ``log_table`` APPENDS to an existing file of that name; a rerun of a sweep (same parent
        run) must replace it instead, so an existing file is overwritten in the same format."""
        import tempfile

        folder = os.path.dirname(artifact_file) or None
        existing = {a.path for a in self._retry(lambda: self.client.list_artifacts(run_id, folder))}
        if artifact_file not in existing:
            self._retry(lambda: self.client.log_table(run_id, data=frame, artifact_file=artifact_file))
            return
        with tempfile.TemporaryDirectory(prefix="route-bench-table-") as tmp:
            path = Path(tmp) / os.path.basename(artifact_file)
            frame.to_json(path, orient="split", index=False, date_format="iso")
            self._retry(lambda: self.client.log_artifact(run_id, str(path), folder))

    def fail_run(self, run_id: str, error_text: str, artifact_dir: str | os.PathLike | None = None) -> None:
        """Mark a run FAILED with the error as tag (first 5000 chars) and ``error.txt``."""
        try:
            self.set_tags(run_id, {TAG_ERROR: error_text})
            if artifact_dir is not None:
                path = Path(artifact_dir) / "error.txt"
                path.write_text(error_text, encoding="utf-8")
                self._retry(lambda: self.client.log_artifact(run_id, str(path)))
        finally:
            self.end_run(run_id, "FAILED")
