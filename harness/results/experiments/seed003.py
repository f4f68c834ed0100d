"""Seed 003: budget-aware retrieval triggers (protocol B at the 50% budget): each router family's
deployable, conservative and exact accuracy, how often nominal thresholds overspend, by
calibration size, which router to deploy, what each family pays, and the three-stage trigger
cascade beside BUR-linear."""

from __future__ import annotations

import math
import re
from typing import Any

from harness.markdown import md_escape
from harness.published import figure
from harness.results.answer_tables import RETRIEVAL_RESCUES_MORE, decision_table, memory_vs_rag
from harness.results.cite import NOT_RUN, Page
from harness.results.experiments.seed003_cascade import trigger_cascade_section
from harness.results.spec import ClaimSpec, Experiment
from harness.results.sweeps import SweepView, metric_value as _m
from harness.results_summary import share_above
from harness.store_schema import TAG_POLICY, TAG_ROUTER_FAMILY

PCT = dict(scale=100.0, decimals=1)
REFERENCES = ("random", "oracle")  # rows beside the routers, not routers themselves

ROUTER_FAMILIES = (  # (policy config, paper's name, deployable figure, exact figure)
    ("bur_linear", "BUR-linear", "s3.dep50_bur_linear", "s3.exact50_bur_linear"),
    ("signal_unc_min_confidence", "minimum token confidence", "s3.dep50_min_conf", "s3.exact50_min_conf"),
    ("signal_unc_mean_entropy", "entropy", "s3.dep50_entropy", "s3.exact50_entropy"),
    ("query_ridge", "query-only (Adaptive-RAG-style)", "s3.dep50_query", None),
    ("bur_gbm", "BUR-GBM", None, None),
    ("signal_bm25_top1", "BM25 top score", None, None),
    ("signal_bm25_margin12", "BM25 margin", None, None),
    ("random", "random", None, "s3.exact50_random"),
    ("oracle", "oracle", None, "s3.exact50_oracle"),
)

# seed 003's calibration-size finding, verbatim (a statement, not a figure: harness.published keeps numbers)
CAL_SIZE_QUOTE_003 = ("Across five random splits and calibration sizes from 32 to 250, nominal 50% thresholds violate the "
                      "held-out budget in roughly half of method–setting combinations, whereas budget-safe thresholds "
                      "nearly eliminate violations but retrieve conservatively.")


def _metric_key(view: SweepView) -> str:
    return view.param("arms.metric", "correct").replace("@", "_at_")


def _routers(view: SweepView, cost: str) -> list:
    """The run of every router family at ``cost`` (None where the sweep did not run it)."""
    return [view.find(p, cost) for p, *_ in ROUTER_FAMILIES if p not in REFERENCES]


def render(page: Page, view: SweepView, client: Any) -> None:
    """Memory vs RAG, the 50% budget by router family, the calibration sizes, the decision table, the costs."""
    m = _metric_key(view)
    memory_vs_rag(page, view)
    cost0 = view.costs()[0]
    page.add(f"At the 50% budget (protocol B, {view.param('budget.n_splits', '5')} calibration/test splits; "
             "accuracy in %, usage = realized share of questions sent to RAG; the paper's Qwen2.5-1.5B figures):", "")
    page.table(["router", "paper deployable", "ours deployable", "ours usage", "ours violation rate",
                "ours overshoot > tol", "ours conservative acc / usage", "paper exact", "ours exact"],
               [row for policy, label, dep, exact in ROUTER_FAMILIES
                for row in _budget_rows(page, view.find(policy, cost0), policy, label, dep, exact, m)])
    routers = _routers(view, cost0)
    _best_router_line(page, view, routers, cost0, m)
    _violation_lines(page, routers)
    for policy, name, usage_fig, acc_fig in (("bur_linear", "BUR-linear", "s3.bur_usage", "s3.bur_acc"),
                                             ("query_ridge", "query-only", "s3.query_usage", "s3.query_acc")):
        _conservative_line(page, view.find(policy, cost0), name, usage_fig, acc_fig, m)
    page.add("")
    _calibration_sizes(page, [r for r in routers if r is not None], view.param("budget.n_splits", "5"))
    decision_table(page, view, client)
    _cost_by_family(page, view, cost0)
    trigger_cascade_section(page, view, cost0)


def _budget_rows(page: Page, r, policy: str, label: str, dep: str | None, exact: str | None, m: str) -> list:
    """The family's row at the 50% budget; without a run, the paper's figures and "not in this
    sweep" (or no row when the paper has none)."""
    if r is None:  # the paper's figures stay on the page; ours say what is missing
        if dep or exact:
            return [[f"{label} (`{policy}`)", figure(dep).text if dep else "", NOT_RUN, "", "", "", "",
                     figure(exact).text if exact else "", NOT_RUN]]
        return []
    return [[
        f"{label} (`{policy}`)",
        figure(dep).text if dep else "", page.metric(r, f"budget/0.50/deployable/{m}", **PCT),
        page.metric(r, "budget/0.50/deployable/realized_usage", **PCT),
        page.metric(r, "budget/0.50/deployable/violation_rate", **PCT),
        page.metric(r, "budget/0.50/deployable/tolerance_overshoot_rate", **PCT),
        f"{page.metric(r, f'budget/0.50/conservative/{m}', **PCT)} / {page.metric(r, 'budget/0.50/conservative/realized_usage', **PCT)}",
        figure(exact).text if exact else "", page.metric(r, f"budget/0.50/exact/{m}", **PCT),
    ]]


def _best_router_line(page: Page, view: SweepView, routers: list, cost0: str, m: str) -> None:
    """The best router at exact 50% usage (a maximum over routers: optimistic, as in the paper)."""
    ranked = [r for r in routers if r is not None and math.isfinite(_m(r, f"budget/0.50/exact/{m}"))]
    if not ranked:
        return
    top = max(_m(r, f"budget/0.50/exact/{m}") for r in ranked)
    best = [r for r in ranked if abs(_m(r, f"budget/0.50/exact/{m}") - top) <= 1e-12]
    names = ", ".join(md_escape(r.data.tags.get(TAG_POLICY, "?")) for r in best)
    page.add(f"- Exact 50% usage, the best router (a maximum over routers on the test halves, optimistic, as in the "
             f"paper): SmolLM2-1.7B in the paper {figure('s3.smol_exact50_best').text} (random "
             f"{figure('s3.smol_exact50_random').text}, oracle {figure('s3.smol_exact50_oracle').text}); ours "
             f"{page.metric(best[0], f'budget/0.50/exact/{m}', **PCT)}% ({names}{', tied' if len(best) > 1 else ''}; random "
             f"{page.metric(view.find('random', cost0), f'budget/0.50/exact/{m}', **PCT)}%, oracle "
             f"{page.metric(view.find('oracle', cost0), f'budget/0.50/exact/{m}', **PCT)}%).")


def _violation_lines(page: Page, routers: list) -> None:
    """How often the nominal 50% thresholds overspend: the mean over routers, then the range."""
    page.add(f"- Violation rate of the nominal 50% thresholds over router x split combinations: paper "
             f"{figure('s3.violation50').text}, ours "
             f"{page.mean([(r, 'budget/0.50/deployable/violation_rate') for r in routers], **PCT)}%.")
    rated = sorted((r for r in routers if r is not None and math.isfinite(_m(r, "budget/0.50/deployable/violation_rate"))),
                   key=lambda r: _m(r, "budget/0.50/deployable/violation_rate"))
    if rated:
        page.add(f"- Per router, the split-level violation rate ranges: paper {figure('s3.violation_range').text}; ours "
                 f"{page.metric(rated[0], 'budget/0.50/deployable/violation_rate', **PCT)}% to "
                 f"{page.metric(rated[-1], 'budget/0.50/deployable/violation_rate', **PCT)}%.")


def _conservative_line(page: Page, r, name: str, usage_fig: str, acc_fig: str, m: str) -> None:
    """What the conservative (budget-safe) rule does to one router's usage and accuracy."""
    page.add(f"- Conservative rule, {name}: paper usage {figure(usage_fig).text}, accuracy {figure(acc_fig).text}; "
             f"ours usage {page.metric(r, 'budget/0.50/deployable/realized_usage', **PCT)}% -> "
             f"{page.metric(r, 'budget/0.50/conservative/realized_usage', **PCT)}%, accuracy "
             f"{page.metric(r, f'budget/0.50/deployable/{m}', **PCT)}% -> {page.metric(r, f'budget/0.50/conservative/{m}', **PCT)}%.")


def _calibration_sizes(page: Page, routers: list, n_splits: str) -> None:
    """The calibration-size diagnostic (``budget.cal_sizes``, docs/metrics.md §6) at the 50%
    budget beside the paper's statement: per size, the violation and overshoot rates of the
    nominal (deployable) and budget-safe (conservative) thresholds over router x split."""
    sizes = sorted({int(g.group(1)) for r in routers for k in r.data.metrics
                    if (g := re.fullmatch(r"budget/cal(\d+)/skipped", k))})
    if not sizes:
        page.add("(The calibration-size diagnostic was not run in this sweep: `budget.cal_sizes` is empty.)", "")
        return
    page.add(f"Calibration size (the paper: \"{CAL_SIZE_QUOTE_003}\") Ours at the 50% budget: each split's thresholds "
             "re-set on n_cal questions of its calibration half (whole documents, seeded; the routers' out-of-fold "
             "scores of the full half, not refitted) and applied to the unchanged test half; rates in % over "
             f"{len(routers)} routers x {n_splits} splits:", "")
    rows = []
    for n in sizes:
        if any(r.data.metrics.get(f"budget/cal{n}/skipped", 1.0) for r in routers):
            rows.append([str(n), "skipped: larger than a calibration half", "", "", "", "", ""])
            continue
        cells = [page.mean([(r, f"budget/0.50/cal{n}/{fr}/{stat}") for r in routers], **PCT)
                 for fr in ("deployable", "conservative")
                 for stat in ("violation_rate", "tolerance_overshoot_rate", "realized_usage")]
        rows.append([str(n)] + cells)
    page.table(["n_cal", "ours nominal violation", "ours nominal overshoot > tol", "ours nominal usage",
                "ours budget-safe violation", "ours budget-safe overshoot > tol", "ours budget-safe usage"], rows)


def _cost_by_family(page: Page, view: SweepView, cost0: str) -> None:
    page.add("Cost by router family at the 50% budget (deployable rule; per question, what each family pays before "
             "and after its decision: seed 003's decomposition):", "")
    rows = []
    for policy, label, *_ in ROUTER_FAMILIES:
        r = view.find(policy, cost0)
        if r is None:
            continue
        rows.append([f"{label}", md_escape(r.data.tags.get(TAG_ROUTER_FAMILY, "")),
                     page.metric(r, "cost/0.5/deployable/prompt_tokens", decimals=1),
                     page.metric(r, "cost/0.5/deployable/output_tokens", decimals=1),
                     page.metric(r, "cost/0.5/deployable/ms", decimals=1)])
    page.table(["router", "family", "ours prompt tokens per question", "ours output tokens per question",
                "ours ms per question (this machine)"], rows)


def _mean_violation_rate(view: SweepView) -> tuple:
    """The nominal thresholds' violation rate, averaged over the routers that logged it."""
    rates = [_m(r, "budget/0.50/deployable/violation_rate") for r in _routers(view, view.costs()[0]) if r is not None]
    rates = [v for v in rates if math.isfinite(v)]
    return (sum(rates) / len(rates) if rates else math.nan,)


CLAIMS = (
    RETRIEVAL_RESCUES_MORE,
    ClaimSpec("003", "nominal 50% thresholds overspend in most router x split combinations", share_above,
              _mean_violation_rate, lambda view: {"what": "the thresholds overspend"}, figures=("s3.violation50",)),
)

DIFFERENCES = (
    "Data: the paper ran 2,000 HotpotQA / 2Wiki / MuSiQue questions each; a fresh clone has QASPER's yes/no "
    "questions (scientific papers, yes/no answers), and with the HotpotQA dev file the same experiment runs "
    "on HotpotQA (a 100-question sample here).",
    "Generator: the paper's Qwen2.5-1.5B / SmolLM2-1.7B / Granite-3.1-2B (1.5-2B parameters); ours is the "
    "packaged SmolLM2-135M-Instruct "
    "(10 to 18 times smaller), a weak reader: on QASPER yes/no its answers from BM25's evidence are worse than "
    "its answers from memory (the table above), and on HotpotQA it is right on a few questions either way, "
    "where the paper's models gain 7 to 28 points from retrieval.",
    "Question types: QASPER's are yes/no questions, where a guess would be right about half the time (the named "
    "experiments score the options Yes / No, so every answer is one of them), so answering from memory scores "
    "far above the paper's 10-15%; HotpotQA's answers are entities, as in the paper.",
    "Metric: correct = EM or token F1 >= 0.8 (the paper: F1 above 0.80); for questions whose references are "
    "all yes or no (all of QASPER yes/no, and HotpotQA's yes/no comparison questions) correct = the first yes/no "
    "word of the answer matches, where the paper scores HotpotQA's yes/no questions by EM/F1 like any other: "
    "\"The answer is yes.\" is correct here and wrong there (F1 0.5).",
    "Uncertainty: on yes/no questions the exact entropy of the Yes / No option distribution (one decision; "
    "mean = max entropy); on decoded answers (HotpotQA) the token entropy over the top 5 alternatives llama.cpp "
    "returns, renormalised, where the paper's is over the full distribution; that understates flat steps (on "
    "\"What is the capital of France?\" a mean of 0.28 nats against 0.60 exact, docs/generation.md).",
    "Retrieval: BM25 top 5 over the question's own candidates (HotpotQA) or paper (QASPER), as in the paper's "
    "main setting.",
)

EXPERIMENT = Experiment("seed003_budget_triggers", "003", "Budget-aware retrieval triggers (seed 003)", render, CLAIMS,
                        DIFFERENCES)
