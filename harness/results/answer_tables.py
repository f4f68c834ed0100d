"""Tables of the answer-level experiments that route between memory and RAG (seed 003 and
BoolQ): memory vs RAG on the whole table, and the sweep's decision table at the 50% budget."""

from __future__ import annotations

import math
from typing import Any

from harness.markdown import md_escape
from harness.published import figure
from harness.results.cite import Page, fmt
from harness.results.spec import ClaimSpec
from harness.results.sweeps import SweepView, artifact_frame, metric_value as _m
from harness.results_summary import more_than

DECISION_TABLE = "decision_table.csv"

# memory vs RAG: (row, the paper's Qwen2.5-1.5B figure, its SmolLM2-1.7B figure, our cell from any run)
MEMORY_VS_RAG_ROWS = (
    ("accuracy from memory (%)", "s3.acc_noret", "s3.smol_noret",
     lambda page, run, m: page.metric(run, f"table/base/{m}", scale=100.0, decimals=1)),
    ("accuracy with RAG (%)", "s3.acc_rag", "s3.smol_rag",
     lambda page, run, m: page.metric(run, f"table/extra/{m}", scale=100.0, decimals=1)),
    ("RAG helps (rescues, %)", "s3.benefit", "s3.smol_benefit",
     lambda page, run, m: page.ratio(run, "table/rescues", "table/n_questions", scale=100.0, decimals=1)),
    ("RAG harms (%)", "s3.harm", "s3.smol_harm",
     lambda page, run, m: page.ratio(run, "table/harms", "table/n_questions", scale=100.0, decimals=1)),
)


def memory_vs_rag(page: Page, view: SweepView) -> None:
    """Accuracy from memory and with RAG, rescue and harm rates on the whole table, the paper's beside."""
    m = view.param("arms.metric", "correct").replace("@", "_at_")
    any_run = view.runs[0]
    page.add("Memory vs RAG on the whole table (accuracy, rescue and harm rates; the paper's Qwen2.5-1.5B harm "
             "rate is its Table 2's candidate-BM25 figure, the other Qwen figures its Table 1's):", "")
    rows = [[label, figure(qwen).text, figure(smol).text, cell(page, any_run, m)]
            for label, qwen, smol, cell in MEMORY_VS_RAG_ROWS]
    rows.append(["questions", "2,000", "2,000", page.metric(any_run, "table/n_questions", decimals=0)])
    page.table(["", "paper, Qwen2.5-1.5B", "paper, SmolLM2-1.7B", "ours"], rows)


def _rescue_and_harm_shares(view: SweepView) -> tuple:
    """Rescues and harms as shares of the questions, as the memory-vs-RAG table cites them."""
    any_run = view.runs[0]
    n = _m(any_run, "table/n_questions")
    return (_m(any_run, "table/rescues") / n if n else math.nan,
            _m(any_run, "table/harms") / n if n else math.nan)


RETRIEVAL_RESCUES_MORE = ClaimSpec(
    "003", "retrieval rescues more questions than it harms", more_than, _rescue_and_harm_shares,
    lambda view: {"what": "rescues and harms are"}, figures=("s3.benefit", "s3.harm"))


def decision_table(page: Page, view: SweepView, client: Any) -> None:
    """Which router to deploy at the 50% budget: the sweep's decision table (deployable rows per
    cost), then per cost the reference and who is worse, better or untested against it."""
    frame = artifact_frame(client, view.parent.info.run_id, DECISION_TABLE)
    if frame is None or not len(frame):
        page.add("(The sweep's decision table was not logged.)", "")
        return
    budget = frame[(frame["budget"].astype(float) - 0.5).abs() < 1e-9] if "budget" in frame else frame.iloc[0:0]
    page.add("Which router to deploy at the 50% budget: the sweep's decision table (deployable utility; reference = the "
             "best *calibration-half* utility; mark `<` / `>` = worse / better than the reference at Holm-adjusted "
             "alpha 0.05, `=` = the test questions cannot tell it from the reference):", "")
    rows, verdicts = [], []
    for cost in sorted(budget["cost"].astype(float).unique()):
        sub = budget[(budget["cost"].astype(float) == cost) & (budget["kind"] == "deployable")]
        rows += [_decision_row(page, view, frame, r) for _, r in sub.iterrows()]
        verdicts += _reference_line(cost, sub)
    page.table(["cost", "router", "mark", "utility", "usage", "diff vs ref", "p (Holm)"], rows)
    refs = [v.split("reference ")[1].split(";")[0] for v in verdicts]
    if len(refs) == 2:
        verdicts.append("- The measured cost " + ("does not change the reference (the router with the best "
                                                  "utility on each split's calibration half; a router marked = cannot be "
                                                  "told from it)."
                                                  if refs[0] == refs[1] else f"changes the reference (the router with "
                                                  f"the best utility on each split's calibration half): {refs[0]} at one cost, "
                                                  f"{refs[1]} at the other."))
    page.add(*verdicts, "")


def _decision_row(page: Page, view: SweepView, frame, r) -> list[str]:
    """One router's row of the decision table, every number a cited cell of the CSV."""
    match = {"cost": r["cost"], "budget": r["budget"], "policy": r["policy"], "kind": r["kind"]}
    path = DECISION_TABLE
    pid = view.parent.info.run_id
    mark = str(r["mark"]) if isinstance(r["mark"], str) else ""
    return [page.cell(pid, path, frame, match, "cost", decimals=5), md_escape(r["policy"]), mark or "",
            page.cell(pid, path, frame, match, "utility"), page.cell(pid, path, frame, match, "usage", decimals=3),
            page.cell(pid, path, frame, match, "diff_vs_ref") if mark != "ref" else "",
            page.cell(pid, path, frame, match, "p_holm", decimals=3) if mark != "ref" else ""]


def _reference_line(cost: float, sub) -> list[str]:
    """The cost's reference and the routers worse, better or untested against it (none when the
    reference column is empty)."""
    marks = set(sub["mark"].fillna("").astype(str))
    # the reference column: a policy, or the per-split calibration choice when the splits chose differently
    ref = [md_escape(v) for v in sub["reference"].fillna("").astype(str) if v]
    if not ref:
        return []
    worse = sorted(sub[sub["mark"] == "<"]["policy"].tolist())
    better = sorted(sub[sub["mark"] == ">"]["policy"].tolist())
    untested = sorted(sub[~sub["mark"].isin(["ref", "=", "<", ">"])]["policy"].tolist())
    return [f"- c = {fmt(cost, decimals=5)}: reference {ref[0]}; "
            + (f"worse than it: {', '.join(md_escape(x) for x in worse)}; " if worse else "")
            + (f"better than it: {', '.join(md_escape(x) for x in better)}; " if better else "")
            + (f"not tested: {', '.join(md_escape(x) for x in untested)}; " if untested else "")
            + ("every other router: cannot be told apart from it on these test questions."
               if marks <= {"ref", "=", ""} else "the rest cannot be told apart from it.")]
