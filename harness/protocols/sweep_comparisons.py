"""Policy-vs-policy comparisons of one sweep, read back from its logged decision tables.

Why here: the comparison (``harness.protocols.compare``) needs the per-question held-out decisions of
every job of a cell, which each job logged as ``decisions.parquet``; the sweep callback (at the
sweep's end) and the report command (for any sweep, later) read them the same way, through this
module.

A *cell* is a set of jobs that differ only in the policy and the seed (same cost, budget grid,
dataset, arms, protocol options): the jobs of one cell answered the same question on the same
held-out documents, so their decisions can be paired. Seeds of one policy are stacked (the
decisions get a ``seed`` column). Cells are named by the parameters that vary between cells
(``cost.c=0.02``).

The decision table (``harness.protocols.decision_table``) uses the same cells: ``sweep_decision_table``
reads each FINISHED job's protocol B tables (``frontiers.parquet``, ``budget_decisions.parquet``)
into ``JobRecord``s; jobs without ``frontiers.parquet`` (protocol B not run) are left out.

Protocol C's comparison (``harness.protocols.sweep_gain``: which policy's score predicts the gain
better, Williams' test with Bonferroni, seed 002) groups the jobs in *gain cells* built from this
module's cell key (``cell_key``) and names them with ``cell_names``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.errors import HarnessError
from harness.protocols.compare import compare_with_reference, conclusion, format_comparison, open_comparisons
from harness.protocols.decision_table import JobRecord, decision_table
from harness.protocols.sweep_stage import SweepJob
from harness.protocols.verdict_stats import Comparisons
from harness.store_schema import TAG_POLICY

DECISIONS_ARTIFACT = "decisions.parquet"
FRONTIERS_ARTIFACT = "frontiers.parquet"
BUDGET_DECISIONS_ARTIFACT = "budget_decisions.parquet"
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

    def conclusion(self, alpha: float = 0.05) -> str:
        """One line for the sweep's end (``harness.protocols.compare.conclusion``)."""
        where = self.cell or "this sweep"
        if self.table is None:
            return f"Policy vs policy at {where}: not compared ({self.reason})."
        return conclusion(self.table, where, self.alpha if self.alpha is not None else alpha)

    def open_comparisons(self, alpha: float = 0.05) -> list[dict]:
        if self.table is None:
            return []
        return open_comparisons(self.table, self.cell or "this sweep", self.alpha if self.alpha is not None else alpha)


def cell_test_settings(members: list, alpha: float = 0.05, power: float = 0.8) -> tuple[float, float]:
    """(alpha, power) a cell's runs were configured with (``protocol.alpha`` / ``protocol.power``
    are part of the cell key, so one cell has one of each); the given values where not logged."""
    params = members[0].params if members else {}
    return float(params.get("protocol.alpha", alpha)), float(params.get("protocol.power", power))


def cell_margin(members: list, margin: float = 0.01) -> float:
    """The cell's ``protocol.equivalence_margin`` (part of the cell key); ``margin`` where not
    logged (runs made before it existed)."""
    params = members[0].params if members else {}
    return float(params.get("protocol.equivalence_margin", margin))


def cell_verdict_settings(members: list) -> tuple[float, str]:
    """The cell's ``protocol.equivalence_fraction`` and ``protocol.verdict_frontier`` (the
    defaults where not logged)."""
    params = members[0].params if members else {}
    return (float(params.get("protocol.equivalence_fraction", 0.5)),
            str(params.get("protocol.verdict_frontier", "deployable")))


def cell_key(params: dict[str, str]) -> tuple:
    return tuple(
        sorted(
            (k, v)
            for k, v in params.items()
            if k not in CELL_EXCLUDED_KEYS and not k.startswith(CELL_EXCLUDED_PREFIXES)
        )
    )


def short_cost(value: Any) -> Any:
    """A derived cost (price x measured cost) is a long float: 6 significant digits on screen;
    a short value (``0.02``, ``0.0``) is shown as logged."""
    try:
        return f"{float(value):.6g}" if len(str(value)) > 10 else value
    except (TypeError, ValueError):
        return value


def cell_names(keys: list[tuple]) -> dict[tuple, str]:
    """Name each cell by the parameters whose values differ between cells."""
    varying = sorted({k for key in keys for k, v in key if len({dict(other).get(k) for other in keys}) > 1})

    def shown(k: str, v: Any) -> str:
        return f"{k}={short_cost(v) if k == 'cost.c' else v}"

    # a key a cell does not set (e.g. cost.unit of a plain-c cost) is left out of its name
    return {key: " ".join(shown(k, dict(key).get(k)) for k in varying if dict(key).get(k) not in (None, "None"))
            for key in keys}


def _labels(runs: list) -> dict[str, str]:
    """run id -> policy label: the policy name, or the run name when two runs of one cell and
    seed share a policy name (e.g. one plugin with two weights)."""
    seen: dict[tuple, int] = {}
    for r in runs:
        name = r.tags.get(TAG_POLICY) or r.params.get("policy.name", "?")
        seen[(name, r.params.get("seed"))] = seen.get((name, r.params.get("seed")), 0) + 1
    out = {}
    for r in runs:
        name = r.tags.get(TAG_POLICY) or r.params.get("policy.name", "?")
        clash = seen[(name, r.params.get("seed"))] > 1
        out[r.run_id] = (r.run_name or r.run_id) if clash else name
    return out


DEV_METRICS = ("dev/nested_utility", "dev/oof_utility")  # honest first; both see development data only


def development_scores(runs: list, labels: dict[str, str]) -> dict[str, float] | None:
    """Per policy label, the mean over its runs (seeds) of the first development metric that
    every run logged (``DEV_METRICS`` order), or None when no such metric is common to all:
    the reference is then chosen on held-out data, and the table says so."""
    for name in DEV_METRICS:
        if all(name in r.metrics for r in runs):
            values: dict[str, list[float]] = {}
            for r in runs:
                values.setdefault(labels[r.run_id], []).append(float(r.metrics[name]))
            return {label: sum(v) / len(v) for label, v in values.items()}
    return None


def development_by_unit(runs: list, labels: dict[str, str], frames: dict[str, pd.DataFrame]):
    """(unit keys, unit -> policy label -> development utility) for choosing the reference
    inside each unit (``compare.ReferenceChoice``), or None. A unit is a seed, or a seed and
    repeat when the runs repeated their splits (each repeat's estimate is a column of its
    decisions, ``frames`` by run id). The metric is the first of ``DEV_METRICS`` that every run
    logged; None when none is. ``((), {})`` when a run repeated its splits without per-repeat
    estimates: the mean over repeats has seen the other repeats' held-out questions."""
    for name in DEV_METRICS:
        if not all(name in r.metrics for r in runs):
            continue
        repeated = [r for r in runs if int(float(r.metrics.get("n/repeats", 1))) > 1]
        basis: dict[tuple, dict[str, float]] = {}
        if repeated:
            if not all(r.run_id in frames and name in frames[r.run_id].columns for r in runs):
                return (), {}  # the means over repeats overlap the other repeats' held-out questions
            for r in runs:
                per = frames[r.run_id].groupby("repeat")[name].first()
                for rep, value in per.items():
                    basis.setdefault((int(r.params.get("seed", 0)), int(rep)), {})[labels[r.run_id]] = float(value)
            return ("seed", "repeat"), basis
        for r in runs:
            basis.setdefault((int(r.params.get("seed", 0)),), {})[labels[r.run_id]] = float(r.metrics[name])
        return ("seed",), basis
    return None


def _decisions(run: SweepJob) -> pd.DataFrame | None:
    frame = run.table(DECISIONS_ARTIFACT)
    if frame is not None:
        frame["seed"] = int(run.params.get("seed", 0))
    return frame


def group_cells(runs: list) -> list[tuple[str, list]]:
    """The FINISHED runs grouped into cells, as (cell name, runs), sorted by name."""
    cells: dict[tuple, list] = {}
    for r in runs:
        if r.finished:
            cells.setdefault(cell_key(dict(r.params)), []).append(r)
    names = cell_names(list(cells))
    return [(names[key], members) for key, members in sorted(cells.items(), key=lambda kv: names[kv[0]])]


def decision_records(runs: list[SweepJob]) -> list:
    """``harness.protocols.decision_table.JobRecord`` of every FINISHED run with ``frontiers.parquet``."""
    records = []
    for cell, members in group_cells(runs):
        labels = _labels(members)
        for r in members:
            frontiers = r.table(FRONTIERS_ARTIFACT)
            if frontiers is None:
                continue
            records.append(
                JobRecord(
                    policy=labels[r.run_id],
                    seed=int(r.params.get("seed", 0)),
                    cost=float(r.params.get("cost.c", 0.0)),
                    frontiers=frontiers,
                    decisions=r.table(BUDGET_DECISIONS_ARTIFACT),
                    cell=cell,
                    arms=(str(r.params.get("arms.base", "")), str(r.params.get("arms.extra", ""))),
                )
            )
    return records


def sweep_decision_table(runs: list[SweepJob], *, n_boot: int = 1000, alpha: float = 0.05) -> pd.DataFrame:
    """The decision table of a sweep's runs (``harness.protocols.decision_table.decision_table``), each
    cell tested at its own runs' ``protocol.alpha`` and ``protocol.power``."""
    # cells named over the whole sweep (a sweep over protocol.alpha has a cell per level), then
    # tested in groups of one setting
    cells = dict(group_cells(runs))
    by_setting: dict[tuple[float, float, float], list] = {}
    for rec in decision_records(runs):
        members = cells[rec.cell]
        key = (*cell_test_settings(members, alpha), cell_margin(members), *cell_verdict_settings(members))
        by_setting.setdefault(key, []).append(rec)
    tables = []
    for (a, pw, mg, fraction, frontier), records in sorted(by_setting.items()):
        tables.append(decision_table(records, n_boot=n_boot, alpha=a, power=pw, margin=mg, fraction=fraction,
                                     frontier=frontier))
    if not tables:
        tables.append(decision_table([], n_boot=n_boot, alpha=alpha))
    if len(tables) == 1:
        return tables[0]
    table = pd.concat(tables, ignore_index=True)
    table.attrs.update(alpha="per cell (protocol.alpha)", n_boot=n_boot,
                       fixed_comparisons=Comparisons(c for t in tables for c in t.attrs.get("fixed_comparisons", [])))
    return table


def sweep_comparisons(runs: list[SweepJob], *, n_boot: int = 1000, alpha: float = 0.05) -> list[CellComparison]:
    """Compare the FINISHED runs of a sweep per cell (``runs``: one run per job config)."""
    out = []
    for name, members in group_cells(runs):
        labels = _labels(members)
        per_policy: dict[str, list[pd.DataFrame]] = {}
        by_run: dict[str, pd.DataFrame] = {}
        missing = []
        for r in members:
            frame = _decisions(r)
            if frame is None:
                missing.append(labels[r.run_id])
            else:
                per_policy.setdefault(labels[r.run_id], []).append(frame)
                by_run[r.run_id] = frame
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
                decisions, dev_scores=development_scores(members, labels),
                dev_by_unit=development_by_unit(members, labels, by_run), n_boot=n_boot,
                alpha=cell_alpha, power=cell_power, margin=cell_margin(members),
            )
        except HarnessError as exc:
            out.append(CellComparison(name, None, str(exc)))
            continue
        table.attrs["share"] = 1.0 - float(members[0].params.get("protocol.dev_frac", 0.8))  # held-out share
        out.append(CellComparison(name, table, alpha=cell_alpha))
    return out


def comparisons_frame(cells: list[CellComparison]) -> pd.DataFrame:
    """All cells' tables stacked, with a ``cell`` column (for CSV artifacts)."""
    frames = [c.table.assign(cell=c.cell) for c in cells if c.table is not None]
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    return frame[["cell"] + [c for c in frame.columns if c != "cell"]]
