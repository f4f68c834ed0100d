"""The verdicts as text: the console table, the legend, one sentence per verdict, Markdown and
HTML tables (the report and the parent run's ``verdicts.md``).

Why apart: ``harness.protocols.verdict`` decides the verdicts (a DataFrame, one row per cost and
budget); this module only words and lays them out, in the same words everywhere.
"""

from __future__ import annotations

import html
import math
import re
import textwrap

import pandas as pd

from harness.markdown import md_escape
from harness.protocols.verdict_cells import _interval, _num

WIDTH = 100  # the console's line width


def short_verdict(row) -> str:
    """The verdict's lead, for the console's verdict column (the numbers stand in their own
    columns): "deploy R", "over budget: R", "F is as good" / "F is better", "no room to route",
    "cannot tell: about N questions needed" (a per-split choice's name, which holds its counts,
    is "the split choice *")."""
    text, kind = str(row["verdict"]), str(row["kind"])
    router = str(row["policy"])
    short = "the split choice *" if router.startswith("best on ") else router
    if kind == "deploy":
        return f"deploy {short}"
    if kind == "over budget":
        return f"over budget: {short}"
    if kind == "no router":
        if "no room to route" in text:
            return "no room to route"
        return f"{row['arm']} is {'as good' if ' is as good as ' in text else 'better'}"
    if "equally valid routers" in text:
        return "cannot tell: tied routers differ"
    if "calibration choice ties in" in text:
        return "cannot tell: tie too wide to test"
    if "no deployable router" in text:
        return "cannot tell: no router"
    text = re.sub(r" \([^()]* vs [^()]*\)", "", text.replace(router, short))
    return text.split(" for ", 1)[0] if "questions needed" in text else text


def _text(x) -> str:
    """A text column's value, "" for a missing one (a CSV read back gives NaN)."""
    return x if isinstance(x, str) else ""


def _g(x: float) -> str:
    return f"{float(x):g}"


def _console_row(r) -> list[str]:
    d = r._asdict()
    x = float(r.diff)
    diff = "" if not math.isfinite(x) else ("+" if x >= 0 else "") + _num(x)
    if diff and math.isfinite(float(r.ci_low)):
        diff += f" {_interval(r.ci_low, r.ci_high)}"
    level = f"{float(r.level):.2g}" if math.isfinite(float(r.level)) else ""
    known = all(math.isfinite(float(x)) for x in (r.splits, r.overspent)) and r.splits
    over = f"{int(r.overspent)} of {int(r.splits)}" + (" !" if _text(r.flag) else "") if known else ""
    return [_g(r.cost), _g(r.budget), short_verdict(d), diff, level,
            "" if not math.isfinite(float(r.usage)) else f"{float(r.usage):.2f}", over]


def format_console(frame: pd.DataFrame, width: int = WIDTH) -> str:
    """The sweep's verdict table: a title, one line per cost and budget, at most ``width``
    characters (a longer line is wrapped under its verdict), then what the columns mean and
    the flags."""
    if frame.empty:
        return ""
    lines = _console_lines(frame, width)
    refs = " / ".join(sorted({r.chosen for r in frame.itertuples() if r.chosen})) or "best on calibration"
    frontier = frame.attrs.get("frontier", "deployable")
    title = f"Verdict per cost and budget (protocol B test halves, {frontier} rule; router: {refs})"
    return "\n".join([*wrap(title, width), *lines,
                      *[w for f in [legend_text(frame), *_flags(frame), *_tie_notes(frame)] for w in wrap(f, width)]])


def _console_lines(frame: pd.DataFrame, width: int) -> list[str]:
    """The header and one aligned line per cost and budget; a line longer than ``width`` puts
    its numbers on a second line under the verdict."""
    header = ["cost", "rho", "verdict", "router - fixed", "level", "usage", "over"]
    body = [_console_row(r) for r in frame.itertuples()]
    widths = [max(len(x[i]) for x in [header] + body) for i in range(len(header))]
    lines = []
    for n, x in enumerate([header] + body):
        line = "  ".join(x[i].ljust(widths[i]) for i in range(len(x))).rstrip()
        if len(line) > width and n:  # a long verdict: the numbers go under it
            lead = "  ".join(x[i].ljust(widths[i]) for i in range(2))
            lines += [f"{lead}  {x[2]}"[:width], " " * (len(lead) + 4) + "  ".join(x[3:])]
        else:
            lines.append(line)
    return lines


def _flags(frame: pd.DataFrame) -> list[str]:
    """The overspending flags under the table (one summary line when more than two), after
    the note on the splits' different choices ("*")."""
    star = lambda r: "the split choice *" if str(r.policy).startswith("best on ") else r.policy  # noqa: E731
    flags = [f"! {star(r)} at c={_g(r.cost)}, rho={_g(r.budget)}: {r.flag}" for r in frame.itertuples() if _text(r.flag)]
    if len(flags) > 2:
        worst = sorted({star(r) for r in frame.itertuples() if _text(r.flag)})
        flags = [f"! overspends beyond sampling error in more than half of the splits in {len(flags)} cells "
                 f"({', '.join(worst)})"]
    if any(str(r.policy).startswith("best on ") for r in frame.itertuples()):
        flags.insert(0, "* the splits chose different routers: each split's calibration choice (verdicts.csv)")
    return flags


def _tie_notes(frame: pd.DataFrame) -> list[str]:
    """The cells whose router came from a tie on calibration (one summary line when more than two)."""
    notes = [f"{r.policy} at c={_g(r.cost)}, rho={_g(r.budget)}: {r.note}" for r in frame.itertuples() if _text(r.note)]
    if len(notes) > 2:
        notes = [f"{len(notes)} cells chose their router from a tie on calibration; every equally valid router "
                 "was tested (verdicts.csv, note)"]
    return notes


def legend_text(frame: pd.DataFrame) -> str:
    """What "router - fixed" means and the test behind the verdicts (console, report)."""
    alpha, family = frame.attrs.get("alpha", 0.05), frame.attrs.get("family", len(frame))
    alpha = alpha if isinstance(alpha, (int, float)) else "per cell (protocol.alpha)"
    return (f"router - fixed: utility difference, its interval inverting the test at the level its verdict was "
            f"decided at; over: splits over rho beyond sampling error; every claim decided in one family at "
            f"family-wise alpha {alpha} (Holm-Shaffer, {family} claims, {len(frame)} cells).")


def wrap(text: str, width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` characters (a word longer than that stands alone)."""
    return textwrap.wrap(text, width=width, subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False) or [""]


def sentences(frame: pd.DataFrame) -> str:
    """Every verdict as one sentence line: the parent run's description and the report."""
    lines = []
    for r in frame.itertuples():
        extra = "; ".join(x for x in (r.flag, r.note) if x)
        lines.append(f"c={_g(r.cost)}, rho={_g(r.budget)}: {r.verdict}" + (f" ({extra})" if extra else ""))
    return "\n".join(lines)


def format_markdown(frame: pd.DataFrame) -> str:
    """The verdicts as a Markdown table (the report, the parent run's ``verdicts.md``)."""
    lines = ["| cost | budget | verdict | router chosen | flag |", "|---|---|---|---|---|"]
    for r in frame.itertuples():
        extra = "; ".join(x for x in (r.flag, r.note) if x)
        lines.append(f"| {_g(r.cost)} | {_g(r.budget)} | {md_escape(r.verdict)} | {md_escape(r.chosen)} | "
                     f"{md_escape(extra)} |")
    return "\n".join(lines)


def format_html(frame: pd.DataFrame) -> str:
    """The verdicts as an HTML table (the report's first section), each kind a CSS class
    (``deploy``, ``no-router``, ``cannot-tell``) so a reader finds the decisions by colour."""
    e = html.escape
    out = ['<table id="verdicts">',
           "<thead><tr><th>cost</th><th>budget</th><th>verdict</th><th>router chosen</th><th>flag</th></tr></thead>",
           "<tbody>"]
    for r in frame.itertuples():
        extra = "; ".join(x for x in (r.flag, r.note) if x)
        kind = str(r.kind).replace(" ", "-")
        out.append(f'<tr class="{e(kind)}"><td>{_g(r.cost)}</td><td>{_g(r.budget)}</td><td>{e(str(r.verdict))}</td>'
                   f"<td>{e(str(r.chosen))}</td><td>{e(extra)}</td></tr>")
    return "\n".join(out + ["</tbody>", "</table>"])
