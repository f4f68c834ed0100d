"""The report as Markdown (``report.md``): the three-sentence summary, the verdicts, then each
protocol's section (decision tables first, open; the others' text folded), the conclusions
(folded), the frontiers, the per-job table folded at the end, where the report came from. Every
name and value escaped (``harness.markdown``)."""

from __future__ import annotations

import re

from harness.markdown import md_code, md_escape
from harness.protocols.sweep_stage import conclusion_lines
from harness.report.model import SweepReport
from harness.report.page_content import (
    JOBS_NOTE, NO_VERDICT, about_rows, best_values, job_cells, job_head, ordered_results,
)
from harness.report.summary import summary_sentences


def _slug(title: str) -> str:
    """The anchor GitHub gives a Markdown heading (lower case, punctuation dropped, spaces -> -)."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def render_markdown(rep: SweepReport, plot_name: str | None) -> str:
    """The report in Markdown: the verdicts first, then each protocol's section (decision tables
    first), the conclusions, the frontiers, the per-job table folded at the end."""
    results = ordered_results(rep)
    concluded = conclusion_lines(rep.results)
    lines = _title(rep, results, concluded) + _verdicts(rep, results)
    for _, result in results:  # each protocol's sweep stage: the ones with a verdict first, open
        lines += [result.as_markdown() if result.lead_as_markdown() else fold(result.title, result.as_markdown())]
    if concluded:
        lines += [fold("Conclusions", "\n".join(f"- {md_escape(x)}" for x in concluded))]
    lines += ["## Frontiers", ""]
    lines += [f"![frontiers]({plot_name})", ""] if plot_name else ["No frontier series were logged for this sweep.", ""]
    lines += _jobs(rep)
    lines += ["## About this report", ""]
    lines += [f"- {k}: {md_code(v)}" if k != "picked" else f"- {md_escape(v)}" for k, v in about_rows(rep)]
    return "\n".join(lines + [""])


def _title(rep: SweepReport, results: list, concluded: list[str]) -> list[str]:
    """The title, the line of context and the contents."""
    toc = ["Verdicts", *[r.title for _, r in results], *(["Conclusions"] if concluded else []), "Frontiers",
           "Jobs", "About this report"]
    return [
        f"# Sweep {md_escape(rep.sweep_id)}",
        "",
        md_escape(" ".join(summary_sentences(rep, NO_VERDICT))),
        "",
        f"experiment {md_code(rep.experiment)} · {len(rep.rows)} jobs · parent run {md_code(rep.parent_run_id or '(none)')}",
        "",
        "Contents: " + " · ".join(f"[{md_escape(t)}](#{_slug(t)})" for t in toc),
        "",
    ]


def fold(title: str, text: str) -> str:
    """A section's Markdown folded under its heading: the ``## title`` line stays (the contents
    link to it), the rest goes into ``<details>`` (GitHub renders the Markdown inside)."""
    head = f"## {md_escape(title)}"
    body = text.strip()
    body = body[len(head):].strip() if body.startswith(head + "\n") or body == head else body
    return "\n".join([head, "", "<details><summary>Show</summary>", "", body, "", "</details>", ""])


def _verdicts(rep: SweepReport, results: list) -> list[str]:
    """The verdicts section: each result's lead (else the no-verdict line), then the warnings."""
    lines = ["## Verdicts", ""]
    leads = [r.lead_as_markdown() for _, r in results if r.lead_as_markdown()]
    lines += [lead for lead in leads] if leads else [NO_VERDICT, ""]
    lines += [line for w in rep.warnings for line in (f"> **warning:** {md_escape(w)}", "")]
    return lines


def _jobs(rep: SweepReport) -> list[str]:
    """The per-job table, folded, the best value per column in bold."""
    best = best_values(rep)
    head = job_head(rep)
    lines = ["## Jobs", "", f"<details><summary>One row per job ({len(rep.rows)} jobs, {len(head)} columns)"
             "</summary>", "", JOBS_NOTE, "",
             "| " + " | ".join(md_escape(h) for h in head) + " |", "|" + "---|" * len(head)]
    for r in rep.rows:
        cells = [f"**{t}**" if is_best else t for _, t, is_best in job_cells(rep, best, r)]
        lines.append("| " + " | ".join(md_escape(x) for x in cells) + " |")
    return lines + ["", "</details>", ""]
