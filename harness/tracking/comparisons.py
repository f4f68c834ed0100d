"""Policy-vs-policy comparisons of one sweep, read back from its logged decision tables.

Why here: the comparison (``harness.compare``) needs the per-question held-out decisions of
every job of a cell, which each job logged as ``decisions.parquet``; the sweep callback (at the
sweep's end) and the report command (for any sweep, later) read them the same way, through this
module.

A *cell* is a set of jobs that differ only in the policy and the seed (same cost, budget grid,
dataset, arms, protocol options): the jobs of one cell answered the same question on the same
held-out documents, so their decisions can be paired. Seeds of one policy are stacked (the
decisions get a ``seed`` column). Cells are named by the parameters that vary between cells
(``cost.c=0.02``).

The decision table (``harness.decision_table``) uses the same cells: ``sweep_decision_table``
reads each FINISHED job's protocol B tables (``frontiers.parquet``, ``budget_decisions.parquet``)
into ``JobRecord``s; jobs without ``frontiers.parquet`` (protocol B not run) are left out.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.compare import compare_with_reference, format_comparison
from harness.errors import HarnessError

DECISIONS_ARTIFACT = "decisions.parquet"
FRONTIERS_ARTIFACT = "frontiers.parquet"
BUDGET_DECISIONS_ARTIFACT = "budget_decisions.parquet"
TAG_POLICY = "route_bench.policy"
CELL_EXCLUDED_PREFIXES = ("policy.", "tracking.", "experiment.")
CELL_EXCLUDED_KEYS = ("seed",)


@dataclass
class CellComparison:
    """One cell: its name, the comparison table (None when it could not be made) and why not."""

    cell: str
    table: pd.DataFrame | None
    reason: str = ""
    alpha: float | None = None  # the cell's own protocol.alpha (None: the caller's)

    def text(self, alpha: float = 0.05) -> str:
        head = f"Policies vs the reference at {self.cell or 'this sweep'} (held-out utility, paired by question)"
        if self.table is None:
            return f"{head}\n  not compared: {self.reason}"
        return f"{head}\n{format_comparison(self.table, self.alpha if self.alpha is not None else alpha)}"


def cell_test_settings(members: list, alpha: float = 0.05, power: float = 0.8) -> tuple[float, float]:
    """(alpha, power) a cell's runs were configured with (``protocol.alpha`` / ``protocol.power``
    are part of the cell key, so one cell has one of each); the given values where not logged."""
    params = members[0].data.params if members else {}
    return float(params.get("protocol.alpha", alpha)), float(params.get("protocol.power", power))


def _cell_key(params: dict[str, str]) -> tuple:
    return tuple(
        sorted(
            (k, v)
            for k, v in params.items()
            if k not in CELL_EXCLUDED_KEYS and not k.startswith(CELL_EXCLUDED_PREFIXES)
        )
    )


def _cell_names(keys: list[tuple]) -> dict[tuple, str]:
    """Name each cell by the parameters whose values differ between cells."""
    varying = sorted({k for key in keys for k, v in key if len({dict(other).get(k) for other in keys}) > 1})
    return {key: " ".join(f"{k}={dict(key).get(k)}" for k in varying) for key in keys}


def _labels(runs: list) -> dict[str, str]:
    """run id -> policy label: the policy name, or the run name when two runs of one cell and
    seed share a policy name (e.g. one plugin with two weights)."""
    seen: dict[tuple, int] = {}
    for r in runs:
        name = r.data.tags.get(TAG_POLICY) or r.data.params.get("policy.name", "?")
        seen[(name, r.data.params.get("seed"))] = seen.get((name, r.data.params.get("seed")), 0) + 1
    out = {}
    for r in runs:
        name = r.data.tags.get(TAG_POLICY) or r.data.params.get("policy.name", "?")
        clash = seen[(name, r.data.params.get("seed"))] > 1
        out[r.info.run_id] = (r.info.run_name or r.info.run_id) if clash else name
    return out


DEV_METRICS = ("dev/nested_utility", "dev/oof_utility")  # honest first; both see development data only


def development_scores(runs: list, labels: dict[str, str]) -> dict[str, float] | None:
    """Per policy label, the mean over its runs (seeds) of the first development metric that
    every run logged (``DEV_METRICS`` order), or None when no such metric is common to all:
    the reference is then chosen on held-out data, and the table says so."""
    for name in DEV_METRICS:
        if all(name in r.data.metrics for r in runs):
            values: dict[str, list[float]] = {}
            for r in runs:
                values.setdefault(labels[r.info.run_id], []).append(float(r.data.metrics[name]))
            return {label: sum(v) / len(v) for label, v in values.items()}
    return None


def _decisions(client: Any, run, folder: Path) -> pd.DataFrame | None:
    frame = _artifact(client, run, DECISIONS_ARTIFACT, folder)
    if frame is not None:
        frame["seed"] = int(run.data.params.get("seed", 0))
    return frame


def group_cells(runs: list) -> list[tuple[str, list]]:
    """The FINISHED runs grouped into cells, as (cell name, runs), sorted by name."""
    cells: dict[tuple, list] = {}
    for r in runs:
        if r.info.status == "FINISHED":
            cells.setdefault(_cell_key(dict(r.data.params)), []).append(r)
    names = _cell_names(list(cells))
    return [(names[key], members) for key, members in sorted(cells.items(), key=lambda kv: names[kv[0]])]


PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def _local_artifact(run, name: str) -> Path | None:
    """The artifact's own file when the run's artifacts live on this machine (a SQLite or file
    store's ``file://`` artifact root): read in place instead of a copy through MLflow's
    artifact repository (a sweep's end reads three files per job)."""
    from urllib.parse import unquote, urlparse

    uri = str(getattr(run.info, "artifact_uri", "") or "")
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = Path(unquote(parsed.path)) / name
    return path if path.is_file() else None


def _artifact(client: Any, run, name: str, folder: Path) -> pd.DataFrame | None:
    """A run's Parquet artifact, or None when it has none: read in place when local, else
    downloaded through MLflow. MLflow's per-file progress bar is
    switched off for the download (dozens of bars would bury the sweep's tables and the report
    command's one-line errors) unless the user set ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR``."""
    local = _local_artifact(run, name)
    if local is not None:
        return pd.read_parquet(local)
    quiet = PROGRESS_ENV not in os.environ
    if quiet:
        os.environ[PROGRESS_ENV] = "false"
    try:
        path = client.download_artifacts(run.info.run_id, name, str(folder))
    except Exception:  # noqa: BLE001 - a run without the artifact is reported, not fatal
        return None
    finally:
        if quiet:
            os.environ.pop(PROGRESS_ENV, None)
    return pd.read_parquet(path)


def decision_records(client: Any, runs: list, folder: Path) -> list:
    """``harness.decision_table.JobRecord`` of every FINISHED run with ``frontiers.parquet``."""
    from harness.decision_table import JobRecord

    records = []
    for i, (cell, members) in enumerate(group_cells(runs)):
        labels = _labels(members)
        for r in members:
            where = folder / f"{i}-{r.info.run_id}"
            frontiers = _artifact(client, r, FRONTIERS_ARTIFACT, where)
            if frontiers is None:
                continue
            records.append(
                JobRecord(
                    policy=labels[r.info.run_id],
                    seed=int(r.data.params.get("seed", 0)),
                    cost=float(r.data.params.get("cost.c", 0.0)),
                    frontiers=frontiers,
                    decisions=_artifact(client, r, BUDGET_DECISIONS_ARTIFACT, where),
                    cell=cell,
                )
            )
    return records


def sweep_decision_table(client: Any, runs: list, *, n_boot: int = 1000, alpha: float = 0.05) -> pd.DataFrame:
    """The decision table of a sweep's runs (``harness.decision_table.decision_table``), each
    cell tested at its own runs' ``protocol.alpha`` and ``protocol.power``."""
    from harness.decision_table import decision_table

    by_setting: dict[tuple[float, float], list] = {}
    for r in runs:
        by_setting.setdefault(cell_test_settings([r], alpha), []).append(r)
    tables = []
    with tempfile.TemporaryDirectory(prefix="route-bench-decisions-") as tmp:
        for i, ((a, pw), members) in enumerate(sorted(by_setting.items())):
            records = decision_records(client, members, Path(tmp) / str(i))
            tables.append(decision_table(records, n_boot=n_boot, alpha=a, power=pw))
    if len(tables) == 1:
        return tables[0]
    table = pd.concat(tables, ignore_index=True)
    table.attrs.update(alpha="per cell (protocol.alpha)", n_boot=n_boot)
    return table


def sweep_comparisons(client: Any, runs: list, *, n_boot: int = 1000, alpha: float = 0.05) -> list[CellComparison]:
    """Compare the FINISHED runs of a sweep per cell (``runs``: one run per job config)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="route-bench-compare-") as tmp:
        for i, (name, members) in enumerate(group_cells(runs)):
            labels = _labels(members)
            per_policy: dict[str, list[pd.DataFrame]] = {}
            missing = []
            for r in members:
                frame = _decisions(client, r, Path(tmp) / f"{i}-{r.info.run_id}")
                if frame is None:
                    missing.append(labels[r.info.run_id])
                else:
                    per_policy.setdefault(labels[r.info.run_id], []).append(frame)
            if missing:
                out.append(CellComparison(name, None, f"no {DECISIONS_ARTIFACT} in the runs of {sorted(set(missing))} (protocol A not run, or tracking.log_decisions=false)"))
                continue
            if len(per_policy) < 2:
                out.append(CellComparison(name, None, "fewer than two policies"))
                continue
            decisions = {label: pd.concat(frames, ignore_index=True) for label, frames in per_policy.items()}
            try:
                cell_alpha, cell_power = cell_test_settings(members, alpha)
                table = compare_with_reference(
                    decisions, dev_scores=development_scores(members, labels), n_boot=n_boot,
                    alpha=cell_alpha, power=cell_power,
                )
            except HarnessError as exc:
                out.append(CellComparison(name, None, str(exc)))
                continue
            out.append(CellComparison(name, table, alpha=cell_alpha))
    return out


def comparisons_frame(cells: list[CellComparison]) -> pd.DataFrame:
    """All cells' tables stacked, with a ``cell`` column (for CSV artifacts)."""
    frames = [c.table.assign(cell=c.cell) for c in cells if c.table is not None]
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    return frame[["cell"] + [c for c in frame.columns if c != "cell"]]
