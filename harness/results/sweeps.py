"""Finding the runs the page shows: per named experiment and dataset, the latest finished
sweep and one job run per config hash; reading their metrics and CSV artifacts.

Which runs (choices where nothing else says):
- A named experiment's runs live in MLflow experiments ``<experiment.name>/<dataset>/<base>-vs-
  <extra>`` (``harness.tracking.naming.experiment_name``): one per dataset it was run on.
- Of each, the latest FINISHED sweep (parent run ``route_bench.role=sweep``), and of its job
  runs one per config hash (``pick_runs``: latest FINISHED). A sweep that did not finish is not
  used; the page says which sweeps it used (id, parent run, start time).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.store_schema import TAG_POLICY, TAG_ROLE, TAG_SWEEP_ID
from harness.tracking.store_reader import experiments, pick_runs, search_runs
from harness.tracking.sweep_jobs import local_artifact


@dataclass
class SweepView:
    """The runs of one named experiment on one dataset: the latest finished sweep's jobs."""

    experiment: str  # MLflow experiment name
    parent: Any
    runs: list

    @property
    def sweep_id(self) -> str:
        return self.parent.data.tags.get(TAG_SWEEP_ID, "")

    @property
    def dataset(self) -> str:
        """The dataset part of the MLflow experiment name (``<name>/<dataset>/...``)."""
        return self.experiment.split("/")[1] if "/" in self.experiment else self.experiment

    def command(self) -> str:
        """The command that ran this sweep (its parent run's task overrides)."""
        overrides = self.parent.data.params.get("sweep.task_overrides", "").strip().strip("[]")
        shown = []
        for o in (o.strip() for o in overrides.split(",") if o.strip()):
            key, _, value = o.partition("=")
            if key.startswith("tracking."):
                continue  # where the store was: not part of the experiment
            if key.endswith(".path") and value:
                o = f"{key}=<{Path(value).name}>"  # a file of the machine that ran it: its name only
            shown.append(o)
        return "python -m harness -m " + " ".join(shown)

    def expected_jobs(self) -> int | None:
        grid = sweep_grid(self.parent.data.params.get("sweep.params", ""))
        if not grid:
            return None
        n = 1
        for values in grid.values():
            n *= max(1, len(values))
        return n

    def seeds(self) -> list[int]:
        return sorted({run_seed(r) for r in self.runs})

    def find(self, policy: str, cost: str | None = None) -> Any:
        """The job run of ``policy`` (at cost config ``cost``: ``default``, ``measured_ms``...)."""
        for r in self.runs:
            if r.data.tags.get(TAG_POLICY) == policy and (cost is None or r.data.params.get("cost.name") == cost):
                return r
        return None

    def costs(self) -> list[str]:
        names = sorted({r.data.params.get("cost.name", "") for r in self.runs})
        return sorted(names, key=lambda n: (n != "default", n))

    def policies(self) -> list[str]:
        seen: list[str] = []
        for r in self.runs:
            p = r.data.tags.get(TAG_POLICY, "")
            if p not in seen:
                seen.append(p)
        return seen

    def tag_values(self, tag: str) -> list[str]:
        return sorted({r.data.tags.get(tag, "") for r in self.runs if r.data.tags.get(tag)})

    def param(self, name: str, default: str = "") -> str:
        vals = {r.data.params.get(name, default) for r in self.runs}
        return next(iter(vals)) if len(vals) == 1 else default


def find_sweeps(client: Any, name: str) -> list[SweepView]:
    """Every dataset's latest FINISHED sweep of experiment ``name`` (module docstring)."""
    views = []
    for exp in experiments(client, None, ""):
        if not exp.name.startswith(name + "/"):
            continue
        view = _latest_sweep(client, exp)
        if view is not None:
            views.append(view)
    # the dataset a fresh clone has first (the experiment's default), then the others by name
    return sorted(views, key=lambda v: ("/qasper_yesno/" not in v.experiment + "/", v.experiment))


def _latest_sweep(client: Any, exp: Any) -> SweepView | None:
    """The latest FINISHED sweep of one MLflow experiment with its finished job runs, or None."""
    parents = search_runs(
        client, [exp.experiment_id], f"tags.`{TAG_ROLE}` = 'sweep' and attributes.status = 'FINISHED'",
        order_by=["attributes.end_time DESC"])  # a rerun sweep keeps its parent run
    if not parents:
        return None
    parent = parents[0]
    sweep = parent.data.tags.get(TAG_SWEEP_ID, "")
    children = search_runs(
        client, [exp.experiment_id], f"tags.`{TAG_SWEEP_ID}` = '{sweep}' and tags.`{TAG_ROLE}` = 'job'")
    runs = [r for r in pick_runs(children) if r.info.status == "FINISHED"]
    if not runs:
        return None
    return SweepView(exp.name, parent, sorted(runs, key=lambda r: (run_seed(r), r.info.run_name or "")))


def run_seed(run) -> int:
    try:
        return int(run.data.params.get("seed", 0))
    except ValueError:
        return 0


def sweep_grid(params: str) -> dict[str, list[str]]:
    """``[policy=a,b,cost=x,y]`` (the parent run's ``sweep.params``) -> {key: [values]}."""
    grid: dict[str, list[str]] = {}
    key = None
    for token in params.strip().strip("[]").split(","):
        if "=" in token:
            key, _, token = token.partition("=")
            grid[key.strip()] = []
        if key is not None and token.strip():
            grid[key.strip()].append(token.strip())
    return grid


def metric_value(run, name: str) -> float:
    """A logged metric as a float; nan when the run or the metric is missing (never cited)."""
    return float(run.data.metrics.get(name, math.nan)) if run is not None else math.nan


def artifact_frame(client: Any, run_id: str, path: str):
    """The run's CSV artifact ``path`` as a DataFrame, or None when it was not logged."""
    import pandas as pd

    try:
        own = local_artifact(client.get_run(run_id), path, getattr(client, "tracking_uri", None))
        if own is not None:  # a copied store reads its own copy (``artifact_root``)
            return pd.read_csv(own)
        with tempfile.TemporaryDirectory() as tmp:
            local = client.download_artifacts(run_id, path, tmp)
            return pd.read_csv(local)
    except Exception:  # noqa: BLE001 - absent artifact: the page says "not logged"
        return None
