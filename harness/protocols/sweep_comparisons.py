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

Protocol C's comparison (``gain_comparisons``: which policy's score predicts the gain better,
Williams' test with Bonferroni, seed 002) reads ``gain_decisions.parquet`` in *gain cells*: the
cell key without cost and budget (protocol C reads neither) and with the seed (it draws the
split), so only jobs that scored the same test questions are paired.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.protocols.compare import compare_with_reference, conclusion, format_comparison, open_comparisons
from harness.errors import HarnessError
from harness.protocols.sweep_stage import SweepJob
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


def _cell_key(params: dict[str, str]) -> tuple:
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


def _cell_names(keys: list[tuple]) -> dict[tuple, str]:
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
            cells.setdefault(_cell_key(dict(r.params)), []).append(r)
    names = _cell_names(list(cells))
    return [(names[key], members) for key, members in sorted(cells.items(), key=lambda kv: names[kv[0]])]


def decision_records(runs: list[SweepJob]) -> list:
    """``harness.protocols.decision_table.JobRecord`` of every FINISHED run with ``frontiers.parquet``."""
    from harness.protocols.decision_table import JobRecord

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
    from harness.protocols.decision_table import decision_table
    from harness.protocols.verdict_stats import Comparisons

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


# ---- protocol C: which policy predicts the gain better (seed 002 section 5) --------------------
GAIN_DECISIONS_ARTIFACT = "gain_decisions.parquet"
# protocol C reads neither the cost nor the budget grid: jobs that differ only there scored the
# same test questions the same way, so they form one gain cell (and one policy is kept once)
GAIN_CELL_EXCLUDED_PREFIXES = ("cost.", "budget.")
GAIN_COLUMNS = (
    "cell", "seed", "kind", "policy", "policy_a", "policy_b", "n",
    "pearson", "pearson_p", "spearman", "spearman_p", "kendall", "kendall_p",
    "r_a", "r_b", "r_ab", "t", "p", "n_pairs", "p_adj", "alpha", "verdict", "run_id",
)


def _gain_cell_key(params: dict[str, str]) -> tuple:
    """``_cell_key`` without ``cost.*`` / ``budget.*`` and WITH the seed: the seed draws protocol
    C's split, so only jobs of one seed scored the same test questions."""
    kept = [(k, v) for k, v in _cell_key(params) if not k.startswith(GAIN_CELL_EXCLUDED_PREFIXES)]
    return tuple(sorted(kept + [("seed", str(params.get("seed", "0")))]))


def _ran_gain(run) -> bool:
    """False only when the run's logged ``protocol.run`` lists no ``gain`` (spares a download)."""
    listed = run.params.get("protocol.run")
    if listed is None:
        return True
    return "gain" in [s.strip().strip("'\"") for s in str(listed).strip("[]").split(",")]


def gain_correlations(score, gain) -> dict[str, float]:
    """n and Pearson, Spearman, Kendall (tau-b) with two-sided p, from ``scipy.stats``
    (recomputed from a job's ``gain_decisions.parquet``, independently of the job's own
    ``gain/...`` metrics); nan when fewer than 3 questions or either input is constant."""
    from scipy import stats as sps

    score = np.asarray(score, dtype=float)
    gain = np.asarray(gain, dtype=float)
    out: dict[str, float] = {"n": len(score)}
    undefined = len(score) < 3 or np.ptp(score) == 0 or np.ptp(gain) == 0
    for name, fn in (("pearson", sps.pearsonr), ("spearman", sps.spearmanr), ("kendall", sps.kendalltau)):
        if undefined:
            out[name], out[f"{name}_p"] = math.nan, math.nan
        else:
            res = fn(score, gain)
            out[name], out[f"{name}_p"] = float(res.statistic), float(res.pvalue)
    return out


def _gain_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """(the artifact's qid, score, gain sorted by qid, "") or (None, why it cannot be used)."""
    missing = [c for c in ("qid", "score", "gain") if c not in frame.columns]
    if missing:
        return None, f"{GAIN_DECISIONS_ARTIFACT} lacks column(s) {missing}"
    out = frame.loc[:, ["qid", "score", "gain"]].assign(qid=frame["qid"].astype(str))
    dup = int(out["qid"].duplicated().sum())
    if dup:
        return None, f"{GAIN_DECISIONS_ARTIFACT} lists {dup} question(s) twice"
    return out.sort_values("qid", kind="stable").reset_index(drop=True), ""


def _same_gain_rows(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return a["qid"].tolist() == b["qid"].tolist() and np.array_equal(
        a[["score", "gain"]].to_numpy(float), b[["score", "gain"]].to_numpy(float), equal_nan=True
    )


def _gain_labels(members: list, frames: dict[str, pd.DataFrame]) -> dict[str, str]:
    """run id -> label for the runs to compare: the policy name; of several runs with one name
    (the same policy at several costs) one is kept when their scores and gains are identical,
    else each is named by its run name."""
    by_name: dict[str, list] = {}
    for r in members:
        if r.run_id in frames:
            by_name.setdefault(r.tags.get(TAG_POLICY) or r.params.get("policy.name", "?"), []).append(r)
    out: dict[str, str] = {}
    for name, rs in by_name.items():
        first = frames[rs[0].run_id]
        if all(_same_gain_rows(first, frames[r.run_id]) for r in rs[1:]):
            out[rs[0].run_id] = name
        else:
            for r in rs:
                out[r.run_id] = r.run_name or r.run_id
    return out


GAIN_REFERENCES = ("oracle", "random")  # listed with their correlations, kept out of Williams' pairs


def _policy_name(members: list, run_id: str) -> str:
    r = next(m for m in members if m.run_id == run_id)
    return r.tags.get(TAG_POLICY) or r.params.get("policy.name", "?")


def _gain_cell_rows(cell: str, seed: str, members: list, artifacts: dict[str, pd.DataFrame], alpha: float) -> list[dict]:
    from harness.protocols.common import fmt
    from harness.protocols.gain import compare_policies_williams

    base = {"cell": cell, "seed": seed, "alpha": alpha}
    rows: list[dict] = []
    frames: dict[str, pd.DataFrame] = {}
    for r in members:
        name = r.tags.get(TAG_POLICY) or r.params.get("policy.name", "?")
        if r.run_id not in artifacts:
            rows.append({**base, "kind": "policy", "policy": name, "run_id": r.run_id, "verdict":
                         f"not compared: no {GAIN_DECISIONS_ARTIFACT} (protocol C not run, or tracking.log_decisions=false)"})
            continue
        frame, why = _gain_frame(artifacts[r.run_id])
        if frame is None:
            rows.append({**base, "kind": "policy", "policy": name, "run_id": r.run_id, "verdict": f"not compared: {why}"})
            continue
        frames[r.run_id] = frame
    labels = _gain_labels(members, frames)
    scored: dict[str, pd.DataFrame] = {}
    correlations: dict[str, dict[str, float]] = {}
    for rid, label in sorted(labels.items(), key=lambda kv: kv[1]):
        frame = frames[rid]
        corr = gain_correlations(frame["score"], frame["gain"])
        note = ""
        if len(frame) < 3:
            note = f"not compared: {len(frame)} test question(s)"
        elif np.ptp(frame["score"].to_numpy(float)) == 0:
            note = "not compared: constant score (a fixed decision), so no correlation with the gain (Pearson undefined)"
        elif np.ptp(frame["gain"].to_numpy(float)) == 0:
            note = "not compared: the gain is the same on every test question (no correlation defined)"
        elif _policy_name(members, rid) in GAIN_REFERENCES:
            note = ("a reference, not compared (the oracle's score is the gain itself; random's correlation is "
                    "tested by its own p): pairs and Bonferroni cover the predictors only")
        else:
            scored[label], correlations[label] = frame, corr
        rows.append({**base, "kind": "policy", "policy": label, "run_id": rid, **corr, "verdict": note})
    # pairs, the higher Pearson r first (so t >= 0 reads "A predicts better")
    order = sorted(scored, key=lambda k: (-correlations[k]["pearson"], k))
    pairs: list[dict] = []
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            fa, fb = scored[a], scored[b]
            row = {**base, "kind": "pair", "policy": f"{a} vs {b}", "policy_a": a, "policy_b": b,
                   "r_a": correlations[a]["pearson"], "r_b": correlations[b]["pearson"]}
            qa, qb = set(fa["qid"]), set(fb["qid"])
            if qa != qb:
                row["verdict"] = (f"not compared: the test questions differ ({len(qa - qb)} only in {a}'s, "
                                  f"{len(qb - qa)} only in {b}'s); Williams' test needs the same questions")
                pairs.append(row)
                continue
            # both sorted by qid: the same order
            if not np.array_equal(fa["gain"].to_numpy(float), fb["gain"].to_numpy(float)):
                n_diff = int((fa["gain"].to_numpy(float) != fb["gain"].to_numpy(float)).sum())
                row["verdict"] = f"not compared: the gain differs on {n_diff} of the shared test questions"
                pairs.append(row)
                continue
            if len(fa) <= 3:
                row["verdict"] = f"not compared: Williams' test needs more than 3 questions, got {len(fa)}"
                pairs.append(row)
                continue
            w = compare_policies_williams(fa["score"], fb["score"], fa["gain"])
            row.update(n=int(w["n"]), r_a=w["r_a"], r_b=w["r_b"], r_ab=w["r_ab"], t=w["t"], p=w["p"])
            pairs.append(row)
    tested = [row for row in pairs if "t" in row]
    for row in tested:
        a, b = row["policy_a"], row["policy_b"]
        row["n_pairs"] = len(tested)
        row["p_adj"] = min(1.0, row["p"] * len(tested)) if not math.isnan(row["p"]) else math.nan
        if math.isnan(row["p_adj"]):
            row["verdict"] = f"cannot tell {a} from {b} apart (Williams' t undefined for these correlations)"
        elif row["p_adj"] < alpha:
            win, lose = (a, b) if row["t"] > 0 else (b, a)
            row["verdict"] = f"{win} predicts the gain better than {lose} (Williams p_adj = {fmt(row['p_adj'])})"
        else:
            row["verdict"] = f"cannot tell {a} from {b} apart (p_adj = {fmt(row['p_adj'])})"
    return rows + pairs


def gain_comparisons(runs: list[SweepJob], *, alpha: float = 0.05) -> pd.DataFrame:
    """Which policy's score predicts the gain better (protocol C, seed 002 sections 5-6).

    For the FINISHED runs holding ``gain_decisions.parquet``, grouped into gain cells (jobs of
    one seed that differ only in the policy, the cost or the budget grid: ``_gain_cell_key``),
    one row per policy (``kind`` "policy": n and Pearson, Spearman, Kendall with p, recomputed
    from the artifact by :func:`gain_correlations`) and one per pair of policies (``kind``
    "pair"): Pearson r of each with the gain, Williams' t and two-sided p
    (``harness.protocols.gain.compare_policies_williams``), p_adj = min(1, p * n_pairs)
    (Bonferroni over the pairs of the cell that were tested) and a verdict. A policy with a
    constant score (always-keep, always-extra) is listed, not compared; a pair whose test
    questions (qid sets) or gains differ is listed with the reason and not tested. Each cell is
    judged at its runs' ``protocol.alpha`` (``alpha`` where not logged). Empty when no run holds
    the artifact (no job ran protocol C)."""
    cells: dict[tuple, list] = {}
    for r in runs:
        if r.finished and _ran_gain(r):
            cells.setdefault(_gain_cell_key(dict(r.params)), []).append(r)
    names = _cell_names(list(cells))
    rows: list[dict] = []
    for key in sorted(cells, key=lambda k: (names[k], k)):
        members = sorted(cells[key], key=lambda r: (r.run_name or "", r.run_id))
        artifacts = {}
        for r in members:
            frame = r.table(GAIN_DECISIONS_ARTIFACT)
            if frame is not None:
                artifacts[r.run_id] = frame
        if not artifacts:
            continue
        cell_alpha, _ = cell_test_settings(members, alpha)
        rows.extend(_gain_cell_rows(names[key], dict(key)["seed"], members, artifacts, cell_alpha))
    return pd.DataFrame(rows, columns=list(GAIN_COLUMNS))


def format_gain_comparisons(frame: pd.DataFrame) -> str:
    """The text of :func:`gain_comparisons`: per cell a table of the correlations, a table of
    the Williams tests, and one plain sentence per pair."""
    from harness.protocols.common import text_table

    blocks = []
    for cell in dict.fromkeys(frame["cell"]):
        part = frame[frame["cell"] == cell]
        pol, pairs = part[part["kind"] == "policy"], part[part["kind"] == "pair"]
        alpha = float(part["alpha"].iat[0])
        lines = [f"Gain prediction (protocol C) at {cell or 'this sweep'}: correlation of each policy's score "
                 "with the gain on its test questions"]
        lines.append(text_table(
            ["policy", "n", "Pearson", "p", "Spearman", "p", "Kendall", "p"],
            [[r.policy, "" if pd.isna(r.n) else int(r.n), r.pearson, r.pearson_p, r.spearman, r.spearman_p,
              r.kendall, r.kendall_p] for r in pol.itertuples()],
        ))
        lines.extend(f"  {r.policy}: {r.verdict}" for r in pol.itertuples() if isinstance(r.verdict, str) and r.verdict)
        tested = pairs[pairs["n_pairs"].notna()]  # Williams' test ran (its t may be undefined)
        if len(pairs) == 0:
            lines.append("Williams' test: fewer than two policies with a non-constant score, nothing to compare.")
        else:
            m = int(tested["n_pairs"].iat[0]) if len(tested) else 0
            lines.append(f"Williams' two-tailed test (Pearson r of two policies with the same gain on the same "
                         f"questions), Bonferroni over {m} pair(s), alpha {alpha:g}:")
            if len(tested):
                lines.append(text_table(
                    ["A", "B", "n", "r A", "r B", "r A,B", "t", "p", "p_adj"],
                    [[r.policy_a, r.policy_b, int(r.n), r.r_a, r.r_b, r.r_ab, r.t, r.p, r.p_adj]
                     for r in tested.itertuples()],
                ))
            lines.extend(f"  {r.policy_a} vs {r.policy_b}: {r.verdict}" for r in pairs.itertuples())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
