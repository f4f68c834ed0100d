"""The names and values the store is written with (shared with the report command; see
docs/sweeps.md):

- Experiment ``<dataset.name>/<base>-vs-<extra>`` (``experiment_name``), under
  ``<experiment.name>/`` for a named experiment.
- Metric names: the protocol's slash-separated names passed through ``mlflow_name``. MLflow
  accepts only ``[/\\w.\\- :]`` in names, so ``@`` becomes ``_at_`` (``heldout/hit@10`` is
  logged as ``heldout/hit_at_10``); every other disallowed character becomes ``_``.
- Params: the resolved config flattened (``flatten_params``: ``cost.c``), each value cut to
  ``PARAM_MAX_CHARS``; ``config_hash``: same job, same hash; ``git_commit``: the code's version.
- The store: ``resolve_tracking_uri`` (explicit > $MLFLOW_TRACKING_URI > a SQLite file in the
  launch folder) and its artifact root (``artifact_location``).
- A sweep's parent run: ``sweep_run_name`` (its id first: the part that tells two sweeps apart
  is what the UI shows when it cuts a name). The experiment's page in the MLflow UI:
  ``experiment_ui_path`` (it opens on the runs table, see there).

Why one module: the naming rules are a contract; writing them once keeps the app, the sweep
callback and the report command from drifting apart.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Mapping

from harness.io import digest_of

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
PARAM_MAX_CHARS = 500  # a readable cut; MLflow's own limit is 6000. The full config is config.yaml
# keys that never change a job's numbers (``verbose`` only changes what is printed, ``executor``
# only where a build's pieces are computed, ``limits`` only how long a plugin may take)
HASH_EXCLUDED_KEYS = ("tracking", "hydra", "verbose", "executor", "limits")

_BAD_NAME_CHARS = re.compile(r"[^/\w.\- :]")


def mlflow_name(name: str) -> str:
    """A metric/param/tag name MLflow accepts: ``@`` -> ``_at_``, other bad characters -> ``_``."""
    return _BAD_NAME_CHARS.sub("_", str(name).replace("@", "_at_"))


def sweep_run_name(sweep_id: str) -> str:
    """``<first 8 hex digits of the id> sweep``: the MLflow UI's runs table shows about 18
    characters of a top-level run's name (its default column width) and its chart legends fewer,
    so the part that tells two sweeps apart comes first; the full id is the run's tag."""
    return f"{str(sweep_id)[:8]} sweep"


# MLflow 3.17's UI decides an experiment's view (GenAI traces or the runs table) from the
# ``workflowType`` of the address, else the browser's own choice (the "GenAI / Model training"
# switch, kept in its localStorage, GenAI when never chosen); it no longer reads the experiment's
# ``mlflow.experimentKind`` tag (tests/test_mlflow_ui_browser.py shows both).
UI_WORKFLOW_QUERY = "workflowType=machine_learning"


def experiment_ui_path(experiment_id: str) -> str:
    """The experiment's page in the MLflow UI, opening on its runs table (``UI_WORKFLOW_QUERY``)."""
    return f"#/experiments/{experiment_id}?{UI_WORKFLOW_QUERY}"


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


def short_param(value: Any) -> str:
    """A param value as MLflow shows it: a list as one ``[a,b]`` value, cut to PARAM_MAX_CHARS
    (a long list with a ``...(+N more)`` marker)."""
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
            out[mlflow_name(name)] = short_param(value)
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
            out[mlflow_name(f"route_bench.generator.{name}.{key}")] = short_param(" | ".join(seen))
    return out
