"""Protocol C's comparison of one sweep: which policy's score predicts the gain better.

Why here: ``gain_comparisons`` reads ``gain_decisions.parquet`` of every FINISHED job (seed 002
sections 5-6) in *gain cells*: the cell key of ``harness.protocols.sweep_comparisons`` without
cost and budget (protocol C reads neither) and with the seed (it draws the split), so only jobs
that scored the same test questions are paired; Williams' test with Bonferroni over the pairs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from harness.protocols.common import fmt, text_table
from harness.protocols.gain import compare_policies_williams
from harness.protocols.sweep_comparisons import cell_key, cell_names, cell_test_settings
from harness.protocols.sweep_stage import SweepJob
from harness.store_schema import TAG_POLICY

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
    """``cell_key`` without ``cost.*`` / ``budget.*`` and WITH the seed: the seed draws protocol
    C's split, so only jobs of one seed scored the same test questions."""
    kept = [(k, v) for k, v in cell_key(params) if not k.startswith(GAIN_CELL_EXCLUDED_PREFIXES)]
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
    """One gain cell's rows: one per policy (its correlations, or why it is not compared), then
    one per pair of predictors (Williams' test, Bonferroni over the pairs tested)."""
    base = {"cell": cell, "seed": seed, "alpha": alpha}
    rows, frames = _readable_frames(base, members, artifacts)
    labels = _gain_labels(members, frames)
    scored: dict[str, pd.DataFrame] = {}
    correlations: dict[str, dict[str, float]] = {}
    for rid, label in sorted(labels.items(), key=lambda kv: kv[1]):
        frame = frames[rid]
        corr = gain_correlations(frame["score"], frame["gain"])
        note = _not_compared(frame, _policy_name(members, rid))
        if not note:
            scored[label], correlations[label] = frame, corr
        rows.append({**base, "kind": "policy", "policy": label, "run_id": rid, **corr, "verdict": note})
    # pairs, the higher Pearson r first (so t >= 0 reads "A predicts better")
    order = sorted(scored, key=lambda k: (-correlations[k]["pearson"], k))
    pairs = [_pair_row(base, a, b, scored, correlations) for i, a in enumerate(order) for b in order[i + 1:]]
    _williams_verdicts([row for row in pairs if "t" in row], alpha)
    return rows + pairs


def _readable_frames(base: dict, members: list, artifacts: dict[str, pd.DataFrame]
                     ) -> tuple[list[dict], dict[str, pd.DataFrame]]:
    """(a "not compared" row per run without a usable artifact, run id -> its qid, score and
    gain for the others)."""
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
    return rows, frames


def _not_compared(frame: pd.DataFrame, policy_name: str) -> str:
    """Why a policy's score is kept out of Williams' pairs ("" when it is a predictor to compare)."""
    note = ""
    if len(frame) < 3:
        note = f"not compared: {len(frame)} test question(s)"
    elif np.ptp(frame["score"].to_numpy(float)) == 0:
        note = "not compared: constant score (a fixed decision), so no correlation with the gain (Pearson undefined)"
    elif np.ptp(frame["gain"].to_numpy(float)) == 0:
        note = "not compared: the gain is the same on every test question (no correlation defined)"
    elif policy_name in GAIN_REFERENCES:
        note = ("a reference, not compared (the oracle's score is the gain itself; random's correlation is "
                "tested by its own p): pairs and Bonferroni cover the predictors only")
    return note


def _pair_row(base: dict, a: str, b: str, scored: dict[str, pd.DataFrame],
              correlations: dict[str, dict[str, float]]) -> dict:
    """Williams' test of one pair of predictors, or why it was not tested (other test questions,
    another gain, too few questions)."""
    fa, fb = scored[a], scored[b]
    row = {**base, "kind": "pair", "policy": f"{a} vs {b}", "policy_a": a, "policy_b": b,
           "r_a": correlations[a]["pearson"], "r_b": correlations[b]["pearson"]}
    qa, qb = set(fa["qid"]), set(fb["qid"])
    if qa != qb:
        row["verdict"] = (f"not compared: the test questions differ ({len(qa - qb)} only in {a}'s, "
                          f"{len(qb - qa)} only in {b}'s); Williams' test needs the same questions")
        return row
    # both sorted by qid: the same order
    if not np.array_equal(fa["gain"].to_numpy(float), fb["gain"].to_numpy(float)):
        n_diff = int((fa["gain"].to_numpy(float) != fb["gain"].to_numpy(float)).sum())
        row["verdict"] = f"not compared: the gain differs on {n_diff} of the shared test questions"
        return row
    if len(fa) <= 3:
        row["verdict"] = f"not compared: Williams' test needs more than 3 questions, got {len(fa)}"
        return row
    w = compare_policies_williams(fa["score"], fb["score"], fa["gain"])
    row.update(n=int(w["n"]), r_a=w["r_a"], r_b=w["r_b"], r_ab=w["r_ab"], t=w["t"], p=w["p"])
    return row


def _williams_verdicts(tested: list[dict], alpha: float) -> None:
    """Bonferroni over the tested pairs (``p_adj``) and each pair's verdict, in place."""
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
    names = cell_names(list(cells))
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
