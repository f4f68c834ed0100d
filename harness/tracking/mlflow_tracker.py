"""Everything MLflow in one place: store location, experiments, parent/child runs, params,
metrics, frontier series, artifacts, FAILED runs and skip-if-finished.

Layout (shared with the report command; see README "Tracking"):

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
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from harness.io import digest_of

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
TAG_SWEEP_ID = "route_bench.sweep_id"
TAG_ROLE = "route_bench.role"
TAG_CONFIG_HASH = "route_bench.config_hash"
TAG_POLICY = "route_bench.policy"
TAG_ERROR = "route_bench.error"
TAG_PARENT = "mlflow.parentRunId"
TAG_NOTE = "mlflow.note.content"  # the run's description in the MLflow UI (Markdown)
TAG_GIT_COMMIT = "route_bench.git_commit"
TAG_MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"  # shown by the UI; set only when known
TAG_DATASET = "route_bench.dataset"
TAG_ARMS = "route_bench.arms"
TAG_BUDGET_GRID = "route_bench.budget_grid"
NOTE_MAX_CHARS = 8000  # MLflow's limit of a tag value
DATASET_DIGEST_CHARS = 16  # MLflow keeps at most 36 characters of a dataset digest
PARAM_MAX_CHARS = 500  # a readable cut; MLflow's own limit is 6000. The full config is config.yaml
# keys that never change a job's numbers (``verbose`` only changes what is printed)
HASH_EXCLUDED_KEYS = ("tracking", "hydra", "verbose")

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
    """Artifacts of a SQLite store go to ``artifacts/`` next to the database file; other stores
    (a server, a file store) decide themselves (None)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        return (db.parent / "artifacts").resolve().as_uri()
    return None


def experiment_name(cfg: Mapping[str, Any]) -> str:
    """``tracking.experiment`` if set, else ``<dataset.name>/<arms.base>-vs-<arms.extra>``."""
    explicit = (cfg.get("tracking") or {}).get("experiment")
    if explicit:
        return str(explicit)
    arms = cfg.get("arms") or {}
    return f"{cfg['dataset']['name']}/{arms.get('base', 'keep')}-vs-{arms.get('extra', 'hybrid')}"


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


def _is_transient(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "unable to open database" in text


def _is_dataset_race(exc: BaseException) -> bool:
    """Two parallel jobs logging the same dataset: the slower insert of the shared dataset row
    fails on its UNIQUE key. Retried, the store finds the row and only links it to the run."""
    return "unique constraint failed: datasets." in str(exc).lower()


class Tracker:
    """A thin, retrying wrapper of ``MlflowClient`` bound to one tracking URI.

    Parallel joblib workers share one SQLite file: every store call is retried with backoff
    when SQLite reports the database as locked (``retries`` attempts).
    """

    def __init__(self, uri: str, retries: int = 5):
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.retries = max(1, int(retries))
        self.client = self._retry(lambda: MlflowClient(tracking_uri=uri))

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
        """Id of experiment ``name``, created if missing (safe when two processes race)."""
        from mlflow.exceptions import MlflowException

        exp = self._retry(lambda: self.client.get_experiment_by_name(name))
        if exp is not None:
            return exp.experiment_id
        try:
            return self._retry(lambda: self.client.create_experiment(name, artifact_location=artifact_location))
        except MlflowException:
            exp = self._retry(lambda: self.client.get_experiment_by_name(name))
            if exp is None:
                raise
            return exp.experiment_id

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
        is rerun, so its children stay under one parent."""
        existing = self.find_sweep_run(experiment_id, sweep_id)
        if existing is not None:
            run_id = existing.info.run_id
            self._retry(lambda: self.client.update_run(run_id, status="RUNNING"))
            return run_id
        run = self._retry(
            lambda: self.client.create_run(
                experiment_id,
                run_name=f"sweep {sweep_id}",
                tags={TAG_SWEEP_ID: sweep_id, TAG_ROLE: "sweep"},
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
