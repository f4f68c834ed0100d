"""The decision table as text: the console block per cost, the report's fixed-width, key-value,
Markdown and HTML tables, the per-budget pages and the sweep end's conclusion lines.

Why apart: ``harness.protocols.decision_table`` computes the table (a DataFrame, columns
``COLUMNS``); this module only reads it, so the numbers never depend on how they are shown.
"""

from __future__ import annotations

import html
import math
import sys
import textwrap

import numpy as np
import pandas as pd

from harness.markdown import md_escape
from harness.paired import plan_words
from harness.protocols.decision_table import COLUMNS
from harness.protocols.verdict_cells import ref_name


def _pm() -> str:
    """"±" where the console can print it, else "+-"."""
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "±".encode(enc)
        return "±"
    except (LookupError, UnicodeEncodeError):
        return "+-"


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if v != 0 and abs(v) < 1e-4:
            return f"{v:.1e}"
        return f"{float(v):.{digits}f}"
    return str(v)


def _cell_title(cell: str, cost: float) -> str:
    return cell if cell else f"cost.c={cost:g}"


def legend(table: pd.DataFrame) -> str:
    alpha = table.attrs.get("alpha", 0.05)
    alpha = f"{alpha:g}" if isinstance(alpha, (int, float)) else str(alpha)
    return (
        f"ref: the reference, the deployable policy best on calibration (on each split's own calibration half, "
        "chosen before any test outcome) | =: cannot be told apart | "
        f"< >: worse / better than ref (paired by question, sign-flip by document, Holm alpha {alpha} over the "
        "table's budgets x policies, a comparison whose decisions no cost changes counted once) | "
        "policy - ref > 0: better, its interval at the level its mark was decided at (level) | ub: oracle, upper "
        "bound, not tested | fixed: one arm everywhere, a reference"
    )


def _alpha_power(table: pd.DataFrame, part: pd.DataFrame) -> tuple[float, float]:
    alpha = table.attrs.get("alpha", 0.05)
    return (float(alpha) if isinstance(alpha, (int, float)) else 0.05), float(table.attrs.get("power", 0.8))


def budget_conclusions(table: pd.DataFrame, part: pd.DataFrame, prefix: str = "") -> list[str]:
    """One line per budget of one cost's rows ``part``: how many policies were told from the
    reference, whether any difference is detectable with these test questions, and the smallest
    sample-size plan among the policies that cannot be told apart (docs/metrics.md §12)."""
    alpha, power = _alpha_power(table, part)
    lines = []
    tested = part[part["mark"].isin(["<", ">", "="])]
    for budget in sorted(set(tested["budget"].dropna().astype(float))):
        rows = tested[(tested["budget"].astype(float) - budget).abs() <= 1e-9]
        told = int(rows["mark"].isin(["<", ">"]).sum())
        open_rows = rows[rows["mark"] == "="]
        same = open_rows["note"].astype(str).str.contains("same decisions", regex=False)
        open_rows = open_rows[~same]
        line = f"{prefix}rho={budget:g}: {told} of {len(rows)} policies told from the reference {rows['reference'].iat[0]}"
        if len(open_rows):
            detectable = int(open_rows["detectable"].astype(bool).sum())
            if detectable == 0:
                line += (f"; no difference is detectable with these questions for the {len(open_rows)} that "
                         "cannot be told apart")
            else:
                line += f"; {len(open_rows)} cannot be told apart ({detectable} with a detectable difference)"
            equivalent = int(open_rows["equivalent"].astype(bool).sum())
            line += (f"; {equivalent} of them equivalent within +-{float(table.attrs.get('margin', 0.01)):g} "
                     "(two one-sided tests), the others inconclusive")
            plans = open_rows[open_rows["plan_questions"].notna()]
            if len(plans):
                best = plans.loc[plans["plan_questions"].astype(float).idxmin()]
                c = {"plan_why": "", "plan_capped": False, "plan_questions": best["plan_questions"],
                     "plan_docs": best["plan_docs"]}
                level = float(best["level"]) if best["level"] == best["level"] else alpha
                comparison = f"{best['policy']} vs {best['reference']}"
                line += f"; the closest ({best['policy']}) needs {plan_words(c, level, power, comparison)}"
                if best["questions"] == best["questions"] and best["plan_questions"] <= best["questions"]:
                    line += (f", no more than the {int(best['questions']):,} tested: this sample fell short by chance "
                             "or its effect is smaller")
        lines.append(line + ".")
    return lines


def format_console(table: pd.DataFrame) -> str:
    """Per cell (cost), one line per policy with the budgets as columns, each cell
    "utility±sd mark" (deployable test utility, sd over splits x seeds); fixed decisions as one
    value at their usage; a legend and the named reference ties under it."""
    if table.empty:
        return "Decision table: no protocol B results in this sweep"
    pm = _pm()
    blocks = [_console_block(table, cost, cell, part, pm)
              for (cost, cell), part in table.groupby(["cost", "cell"], sort=True)]
    return "\n\n".join(blocks)


def _console_block(table: pd.DataFrame, cost: float, cell: str, part: pd.DataFrame, pm: str) -> str:
    """One cost's block of ``format_console``: its title, the policies by budget, the fixed
    decisions, the legend, the ties and untested rows, and one conclusion line per budget."""
    budgets = sorted(set(part["budget"].dropna().astype(float)))
    ranking = part[part["kind"] != "fixed"]
    n_runs = ranking["n_runs"].max() if len(ranking) else part["n_runs"].max()
    widths, body = _policy_lines(ranking, budgets, pm)
    for r in part[part["kind"] == "fixed"].itertuples():  # one value at every budget: not widened
        body.append(f"{r.policy.ljust(widths[0])}  {r.utility:.3f}{pm}{r.utility_sd:.3f} fixed (usage {r.usage:g}, any budget)")
    title = (
        f"Decision table at {_cell_title(cell, cost)}: deployable test utility {pm} its spread (sd) over "
        f"{int(n_runs) if n_runs == n_runs else 0} overlapping test halves (splits x seeds; not a standard "
        "error), marked against the reference at each budget"
    )
    ties = [
        f"tie for the reference at rho={float(r.budget):g}: {r.reference} = {r.reference_tied} "
        f"(calibration utility; {r.reference} used)"
        for r in part[(part["mark"] == "ref") & (part["reference_tied"] != "")].itertuples()
    ]
    unresolved = sorted({f"{r.policy}: {r.note}" for r in part[part["mark"] == "?"].itertuples() if r.note})
    if (part["reference_from"] == "test (optimistic)").any():
        ties.append("reference chosen on TEST utility (these runs logged no cal_utility): optimistic")
    return "\n".join([title, *body, legend(table), *ties, *(f"not tested: {u}" for u in unresolved),
                      *budget_conclusions(table, part)])


def _policy_lines(ranking: pd.DataFrame, budgets: list[float], pm: str) -> tuple[list[int], list[str]]:
    """(column widths, the header and one line per ranking policy, best utility first): the
    aligned part of a ``format_console`` block."""
    header = ["policy"] + [f"rho={b:g}" for b in budgets]
    lines: list[list[str]] = []
    order = list(dict.fromkeys(ranking.sort_values("utility", ascending=False, kind="stable")["policy"]))
    for label in order:
        rows = ranking[ranking["policy"] == label]
        cells = [_console_cell(rows, b, pm) for b in budgets]
        lines.append([label + (" (upper bound)" if (rows["kind"] == "oracle").any() else "")] + cells)
    widths = [max(len(x[i]) for x in [header] + lines) for i in range(len(header))]
    body = ["  ".join(x[i].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header] + lines]
    return widths, body


def _console_cell(rows: pd.DataFrame, budget: float, pm: str) -> str:
    """One policy at one budget: "utility±sd mark" ("ub" for the oracle), "" where it has no row."""
    at = rows[(rows["budget"].astype(float) - budget).abs() <= 1e-9]
    if at.empty:
        return ""
    r = at.iloc[0]
    mark = r["mark"] if r["kind"] != "oracle" else "ub"
    return f"{r['utility']:.3f}{pm}{r['utility_sd']:.3f} {mark}".rstrip()


HEADERS = {
    "cell": "cell", "cost": "cost", "budget": "budget", "policy": "policy", "kind": "kind", "n_runs": "splits x seeds",
    "cal_utility": "calibration utility", "utility": "utility", "utility_sd": "utility sd", "outcome": "outcome",
    "outcome_sd": "outcome sd", "usage": "usage", "usage_sd": "usage sd", "violation_rate": "violation rate",
    "random_utility": "random utility (matched usage)", "oracle_utility": "oracle utility (matched usage)",
    "exact_utility": "exact-frontier utility", "exact_utility_sd": "exact-frontier utility sd",
    "diff_vs_ref": "policy - ref", "ci_low": "CI low (sign-flip)", "ci_high": "CI high (sign-flip)",
    "level": "interval level (Holm step)", "questions": "questions tested", "p": "p",
    "p_holm": "Holm p (budget)", "p_holm_table": "Holm p (whole table)", "mdd": "MDD", "max_diff": "largest showable difference", "detectable": "detectable",
    "discordant_docs": "discordant documents", "discordant_questions": "discordant questions",
    "plan_questions": "questions for the power", "plan_docs": "documents for the power",
    "p_better": "P(better)", "equivalent": "equivalent (TOST)", "mark": "mark", "reference": "reference", "reference_from": "reference chosen on",
    "reference_tied": "tied for reference", "note": "note",
}


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _text_cells(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = [HEADERS[c] for c in COLUMNS]
    rows = []
    for r in table[list(COLUMNS)].itertuples(index=False):
        cells = []
        n_runs = r[COLUMNS.index("n_runs")]
        for col, v in zip(COLUMNS, r):
            if col in ("cost", "budget"):
                cells.append("" if v is None or math.isnan(float(v)) else f"{float(v):g}")
            elif col == "violation_rate" and _finite(v) and _finite(n_runs) and n_runs > 0:
                # its resolution: a rate over n splits x seeds moves in steps of 1 / n
                cells.append(f"{_num(v)} ({round(float(v) * n_runs)} of {int(n_runs)})")
            else:
                cells.append(_num(v))
        rows.append(cells)
    return header, rows


def format_text(table: pd.DataFrame) -> str:
    """Every column, fixed width (the report command's stdout), with the legend."""
    header, rows = _text_cells(table)
    widths = [max(len(x[i]) for x in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(x[i].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [legend(table)])


def format_markdown(table: pd.DataFrame) -> str:
    header, rows = _text_cells(table)
    esc = md_escape
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines + ["", md_escape(legend(table))])


BUDGET_HEADER = ("cost", "policy", "mark", "utility", "usage", "over budget", "policy - ref [95%]", "Holm p", "note")


def budget_cells(table: pd.DataFrame, budget: float) -> list[list[str]]:
    """The decision table at one budget, the columns a decision needs (``BUDGET_HEADER``; every
    column: ``decision_table.csv``): per cost, the reference first (``ref``, named by how it was
    chosen), then the policies by utility, then the fixed decisions."""
    pm = "±"
    at = table[((table["budget"].astype(float) - budget).abs() <= 1e-9) | (table["kind"] == "fixed")]
    rows = []
    for r in at.itertuples():
        mark = r.mark
        if r.mark == "ref":
            mark = f"ref ({ref_name(r.reference_from)})"
        elif r.kind == "oracle":
            mark = "upper bound"
        elif r.kind == "fixed":
            mark = f"fixed (usage {r.usage:g})"
        diff = ""
        if r.mark in ("<", ">", "=") and r.diff_vs_ref == r.diff_vs_ref:
            ci = (f" [{r.ci_low:.3f}, {r.ci_high:.3f}]" if r.ci_low == r.ci_low and r.ci_high == r.ci_high
                  else " [no interval]")
            diff = f"{r.diff_vs_ref:+.3f}{ci}"
        over = "" if r.kind == "fixed" or r.violation_rate != r.violation_rate else (
            f"{int(round(r.violation_rate * r.n_runs))} of {int(r.n_runs)}")
        rows.append([f"{r.cost:g}", str(r.policy), str(mark), f"{r.utility:.3f}{pm}{r.utility_sd:.3f}",
                     f"{r.usage:.2f}", over, diff, _num(r.p_holm_table, 3), str(r.note)])
    return rows


def budget_markdown(table: pd.DataFrame, budget: float) -> str:
    """The decision table at one budget as a small Markdown table that the MLflow UI renders
    whole (``decision_table_rho<budget>.md`` on the parent run; ``budget_cells``)."""
    lines = [f"# Decision table at budget {budget:g}", "", "| " + " | ".join(BUDGET_HEADER) + " |",
             "|" + "---|" * len(BUDGET_HEADER)]
    lines += ["| " + " | ".join(md_escape(c) for c in cells) + " |" for cells in budget_cells(table, budget)]
    return "\n".join(lines + ["", md_escape(legend(table)), ""])


def budget_html(table: pd.DataFrame, budget: float) -> str:
    """``budget_cells`` as an HTML table (the report's decision table at one budget)."""
    e = html.escape
    out = [f'<table class="decision-budget" data-budget="{budget:g}">',
           "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in BUDGET_HEADER) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for cells in budget_cells(table, budget)]
    return "\n".join(out + ["</tbody>", "</table>"])


def format_keyvalue(table: pd.DataFrame, width: int = 100) -> str:
    """Every column as ``key: value`` lines, one block per row (the report command's stdout for
    ``--budget`` / ``--cost``: a row of every column is hundreds of characters wide); no line
    longer than ``width``; empty values left out; the legend last, wrapped."""
    header, rows = _text_cells(table)
    lead = ("cost", "budget", "policy", "kind", "mark")
    at = {c: i for i, c in enumerate(COLUMNS)}
    pad = max(len(h) for h in header) + 2
    lines: list[str] = []
    for cells in rows:
        where = ", ".join(f"{c} {cells[at[c]]}" for c in ("cost", "budget") if cells[at[c]])
        mark = f", mark {cells[at['mark']]}" if cells[at["mark"]] else ""
        lines += ["", *textwrap.wrap(f"{cells[at['policy']]} ({where}; {cells[at['kind']]}{mark})", width)]
        for col, name, value in zip(COLUMNS, header, cells):
            if col in lead or value == "":
                continue
            lines += textwrap.wrap(value, width, initial_indent=f"  {name + ':':<{pad}}", subsequent_indent=" " * (pad + 2),
                                   break_long_words=True)
    legend_lines = textwrap.wrap(legend(table), width, subsequent_indent="  ")
    return "\n".join([*lines[1:], "", *legend_lines])


def format_html(table: pd.DataFrame, *, standalone: bool = False) -> str:
    e = html.escape
    header, rows = _text_cells(table)
    out = ['<table id="decision-table">', "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead>",
           "<tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td data-col="{c}">{e(v)}</td>' for c, v in zip(COLUMNS, row)) + "</tr>")
    out += ["</tbody>", "</table>", f"<p>{e(legend(table))}</p>"]
    if not standalone:
        return "\n".join(out)
    head = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Decision table</title>\n'
            "<style>table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 6px}</style>\n</head>\n"
            "<body>\n<h1>Decision table</h1>")
    return "\n".join([head, *out, "</body>", "</html>", ""])


def open_comparisons(table: pd.DataFrame) -> list[dict]:
    """The deployable policies marked "=" (other decisions than the reference, not told apart),
    as ``harness.paired.closing_line`` reads them."""
    out = []
    for (cost, cell), part in table.groupby(["cost", "cell"], sort=True):
        alpha, power = _alpha_power(table, part)
        rows = part[(part["mark"] == "=") & ~part["note"].astype(str).str.contains("same decisions", regex=False)]
        for r in rows.itertuples():
            out.append({"where": f"{r.policy} vs {r.reference} at {_cell_title(cell, cost)}, rho={float(r.budget):g}",
                        "detectable": bool(r.detectable), "questions": float(r.plan_questions),
                        "docs": float(r.plan_docs), "capped": False,
                        "alpha": float(r.level) if r.level == r.level else alpha, "power": power,
                        "protocol": "protocol B", "unit": "questions of the test halves", "share": 1.0,
                        "have": int(r.questions) if r.questions == r.questions else 0})
    return out


def conclusions(table: pd.DataFrame) -> str:
    """The decision table's lines for the sweep's end: per cost, one line per budget
    (``budget_conclusions``)."""
    lines = []
    for (cost, cell), part in table.groupby(["cost", "cell"], sort=True):
        lines += budget_conclusions(table, part, prefix=f"Decision table at {_cell_title(cell, cost)}, ")
    return "\n".join(lines)
