"""Seed 003's three-stage trigger cascade on the results page: the paper's statement beside ours.

Why a section of its own: the paper reports the cascade only in words (fewer probe retrievals
than BUR-linear, a better accuracy-cost trade-off on 2Wiki, not uniformly best); ours is a table
per budget from the job that ran it (protocol ``trigger_cascade`` in BUR-linear's job,
docs/metrics.md §18), with each stage's questions and cost, and a sentence that counts what the
table shows, so the reader compares a statement with a statement.
"""

from __future__ import annotations

from harness.markdown import md_escape
from harness.results.cite import Page
from harness.protocols.trigger_cascade import BUDGET_KEY, PREFIX
from harness.results.sweeps import SweepView, metric_value as _m

CASCADE_QUOTE_003 = ("a three-stage cascade reduces probe retrieval relative to BUR-linear. The cascade improves the "
                     "2Wiki accuracy-cost trade-off but is not uniformly best.")
PCT = dict(scale=100.0, decimals=1)


def _budgets(run) -> list[str]:
    return sorted({g.group(1) for k in run.data.metrics if (g := BUDGET_KEY.fullmatch(k))}, key=float)


def trigger_cascade_section(page: Page, view: SweepView, cost0: str) -> None:
    """The cascade beside its last stage alone, per budget, then the two statements."""
    run = next((r for r in view.runs if f"{PREFIX}/level" in r.data.metrics
                and r.data.params.get("cost.name") == cost0), None)
    if run is None:
        page.add(f"Trigger cascade (the paper: \"{CASCADE_QUOTE_003}\"): not in this sweep (protocol trigger_cascade "
                 "runs in the job of its last stage, `bur_linear`).", "")
        return
    stages = run.data.tags.get(f"{PREFIX}.stages", "").split(",")
    last, unit = stages[-1], run.data.params.get("protocol.settings.trigger_cascade.cost", "ms")
    page.add(f"Trigger cascade {' -> '.join(f'`{md_escape(s)}`' for s in stages)} (docs/metrics.md §18) beside "
             f"`{md_escape(last)}` alone under the same mean-cost budgets (shares of the range between always memory "
             f"and always RAG, cost in {md_escape(unit)} on this machine; thresholds set on the other half; accuracy "
             "and retrieval in %; probes: questions that paid a probe retrieval before deciding; reached: questions "
             "that paid each stage):", "")
    rows, fewer, worse, better, over = [], 0, 0, 0, 0
    for b in _budgets(run):
        k = f"{PREFIX}/b{b}"
        row = [b, page.metric(run, f"{k}/outcome", **PCT), page.metric(run, f"{k}/alone/{last}/outcome", **PCT),
               page.metric(run, f"{k}/cost", decimals=1), page.metric(run, f"{k}/alone/{last}/cost", decimals=1),
               page.metric(run, f"{k}/usage", **PCT), page.metric(run, f"{k}/probes", decimals=0),
               page.metric(run, f"{k}/alone/{last}/probes", decimals=0)]  # cited in page order, cell by cell
        row.append(" / ".join(page.metric(run, f"{k}/stage/{s}/reached", decimals=0) for s in stages))
        row.append(" / ".join(page.metric(run, f"{k}/stage/{s}/cost", decimals=1) for s in stages))
        row.append(f"{page.metric(run, f'{k}/gain_vs_last', **PCT)} [{page.metric(run, f'{k}/ci_low_vs_last', **PCT)}, "
                   f"{page.metric(run, f'{k}/ci_high_vs_last', **PCT)}]")
        rows.append(row + [_verdict_words(run, b, last)])
        fewer += _m(run, f"{k}/probes") < _m(run, f"{k}/alone/{last}/probes")
        verdict = run.data.tags.get(f"{PREFIX}.verdict_vs_last.b{b}", "")
        worse += verdict.startswith("deploy ") and ", no cascade" in verdict
        better += verdict.startswith("deploy cascade")
        over += verdict.startswith("over budget")
    page.table(["budget", "cascade acc", f"{last} acc", "cascade cost", f"{last} cost", "cascade retrieves",
                "cascade probes", f"{last} probes", "reached per stage", "cost per stage", f"cascade - {last} [interval]",
                "verdict"], rows)
    n = len(rows)
    page.add(f"- The paper: \"{CASCADE_QUOTE_003}\"",
             f"- Ours ({md_escape(run.data.params.get('dataset.name', 'this dataset'))}, "
             f"{page.metric(run, 'n/questions', decimals=0)} questions): the cascade ran fewer probe retrievals than {last} alone at {fewer} of {n} budgets; its "
             f"accuracy was significantly higher at {better}, lower at {worse}, "
             + (f"different but with one side over its budget (no verdict) at {over}, " if over else "")
             + f"and not distinguishable at {n - better - worse - over} (paired by document at level {page.metric(run, f'{PREFIX}/level', decimals=4)}, Bonferroni over budgets and "
             "comparisons).", "")


def _verdict_words(run, b: str, last: str) -> str:
    """The verdict against the last stage alone, in words only (its numbers are the cited cells)."""
    verdict = run.data.tags.get(f"{PREFIX}.verdict_vs_last.b{b}", "")
    if verdict.startswith("deploy cascade"):
        return "deploy the cascade"
    if verdict.startswith("over budget"):
        return "over budget: no verdict"
    if verdict.startswith("deploy "):
        return f"deploy `{md_escape(last)}` alone"
    return "cannot tell" if verdict else ""
