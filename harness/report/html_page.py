"""The report as one self-contained HTML page (``report.html``): a small inline stylesheet (wide
tables scroll sideways), the frontier PNG as a data URI, in the order of the Markdown
(``harness.report.markdown_page``): the three-sentence summary first, the verdicts, the answer's
own section open and every other section's text folded (``<details>``); every name and value
escaped."""

from __future__ import annotations

import base64
import html
import re

from harness.protocols.sweep_stage import conclusion_lines
from harness.report.frontier_plot import PLOT_NAME
from harness.report.model import SweepReport
from harness.report.page_content import (
    JOBS_NOTE, NO_VERDICT, about_rows, best_values, job_cells, job_head, ordered_results,
)
from harness.report.summary import summary_sentences

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;font-size:15px;
 line-height:1.45;color:#1f2328;max-width:1280px;margin:0 auto;padding:0 18px 48px}
h1{font-size:1.55em;margin:.6em 0 .15em}h2{font-size:1.25em;margin-top:1.5em;padding-bottom:.15em;
 border-bottom:1px solid #d0d7de}h3{font-size:1.02em;margin:1em 0 .3em}
p.meta,nav{color:#57606a;font-size:.9em;margin:.2em 0}nav a{margin-right:.9em;white-space:nowrap}
table{border-collapse:collapse;font-size:.88em;margin:.3em 0}
th,td{border:1px solid #c4c9cf;padding:3px 7px;text-align:left;vertical-align:top}
thead th{background:#eaeef2}tbody tr:nth-child(even){background:#f6f8fa}
td.best{font-weight:bold;background:#dcf3dc}
tr.deploy td:nth-child(3){color:#116329;font-weight:600}tr.cannot-tell td:nth-child(3){color:#6e4c00}
.scroll{overflow-x:auto;max-width:100%}.decision-budget td:not(:last-child){white-space:nowrap}
pre{overflow-x:auto;background:#f6f8fa;padding:8px 10px;font-size:.85em}
p.warning{background:#fff3cd;border-left:4px solid #d4a72c;padding:5px 9px}p.legend{font-size:.85em;color:#57606a}
details{margin:.5em 0}details>summary{cursor:pointer;font-weight:600}img{max-width:100%;height:auto}
code{font-size:.9em}p.summary{font-size:1.05em;max-width:980px;margin:.35em 0 .5em}
details.fold>summary>h2{display:inline-block;border-bottom:none;margin:.9em 0 .3em}
""".strip()


def render_html(rep: SweepReport, plot_bytes: bytes | None) -> str:
    """The report as one self-contained HTML page (inline stylesheet, the plot as a data URI),
    in the order of ``render_markdown``; every name and value escaped."""
    e = html.escape
    results = ordered_results(rep)
    concluded = conclusion_lines(rep.results)
    ids = {name: "protocol-" + re.sub(r"[^A-Za-z0-9_-]", "-", name) for name, _ in results}
    toc = [("verdicts", "Verdicts"), *[(ids[n], r.title) for n, r in results],
           *([("conclusions", "Conclusions")] if concluded else []), ("frontiers", "Frontiers"), ("jobs", "Jobs"),
           ("about", "About this report")]
    out = _head(rep, toc) + _verdicts(rep, results)
    for name, result in results:  # the answer's own section open, the others' text folded
        page = result.as_html() if result.lead_as_html() else fold(result.title, result.as_html())
        out += [f'<section id="{ids[name]}">', page, "</section>"]
    if concluded:
        out += ['<section id="conclusions">',
                fold("Conclusions", "\n".join(["<ul>", *[f"<li>{e(x)}</li>" for x in concluded], "</ul>"])),
                "</section>"]
    out += _frontiers(plot_bytes) + _jobs(rep)
    out += ['<section id="about">', "<h2>About this report</h2>", "<ul>",
            *[f"<li>{e(k)}: <code>{e(v)}</code></li>" if k != "picked" else f"<li>{e(v)}</li>" for k, v in about_rows(rep)],
            "</ul>", "</section>", "</body>", "</html>", ""]
    return "\n".join(out)


def _head(rep: SweepReport, toc: list[tuple[str, str]]) -> list[str]:
    """The document head (title, stylesheet), the title, the line of context and the contents."""
    e = html.escape
    return [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Sweep {e(rep.sweep_id)}</title>",
        f"<style>\n{STYLE}\n</style>",
        "</head>",
        "<body>",
        f"<h1>Sweep {e(rep.sweep_id)}</h1>",
        f'<p class="summary">{e(" ".join(summary_sentences(rep, NO_VERDICT)))}</p>',
        f'<p class="meta">experiment <code>{e(rep.experiment)}</code> · {len(rep.rows)} jobs · parent run '
        f"<code>{e(rep.parent_run_id or '(none)')}</code></p>",
        '<nav aria-label="contents">Contents: ' + "".join(f'<a href="#{i}">{e(t)}</a>' for i, t in toc) + "</nav>",
    ]


def fold(title: str, page: str) -> str:
    """``page`` (a section's HTML) folded under its heading: ``<details>`` whose summary is the
    section's ``<h2>`` (taken from the page when it opens with it, so it is not shown twice)."""
    head = f"<h2>{html.escape(title)}</h2>"
    body = page.lstrip()
    body = body[len(head):] if body.startswith(head) else body
    return f'<details class="fold"><summary>{head}</summary>\n{body.strip()}\n</details>'


def _verdicts(rep: SweepReport, results: list) -> list[str]:
    """The verdicts section: each result's lead (else the no-verdict line), then the warnings."""
    e = html.escape
    out = ['<section id="verdicts">', "<h2>Verdicts</h2>"]
    leads = [r.lead_as_html() for _, r in results if r.lead_as_html()]
    out += [f'<div class="scroll">\n{lead}</div>' for lead in leads] if leads else [f"<p>{e(NO_VERDICT)}</p>"]
    out += [f'<p class="warning"><strong>warning:</strong> {e(w)}</p>' for w in rep.warnings]
    out.append("</section>")
    return out


def _frontiers(plot_bytes: bytes | None) -> list[str]:
    """The frontiers section: the PNG embedded as a data URI and linked, else a line saying none."""
    out = ['<section id="frontiers">', "<h2>Frontiers</h2>"]
    if plot_bytes:
        b64 = base64.b64encode(plot_bytes).decode("ascii")
        out += [f'<p><img alt="frontiers" src="data:image/png;base64,{b64}"></p>',
                f'<p><a href="{PLOT_NAME}">{PLOT_NAME}</a></p>']
    else:
        out.append("<p>No frontier series were logged for this sweep.</p>")
    return out + ["</section>"]


def _jobs(rep: SweepReport) -> list[str]:
    """The per-job table, folded; the best value per column has class ``best``."""
    e = html.escape
    best = best_values(rep)
    head = job_head(rep)
    out = ['<section id="jobs">', "<h2>Jobs</h2>",
           f"<details><summary>One row per job ({len(rep.rows)} jobs, {len(head)} columns)</summary>",
           f"<p>{e(JOBS_NOTE)}</p>", '<div class="scroll">', '<table id="comparison">',
           "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for r in rep.rows:
        cells = []
        for key, text, is_best in job_cells(rep, best, r):
            attrs = (f' data-key="{e(key)}"' if key else "") + (' class="best"' if is_best else "")
            cells.append(f"<td{attrs}>{e(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return out + ["</tbody>", "</table>", "</div>", "</details>", "</section>"]
