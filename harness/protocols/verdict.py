"""One verdict per cost and budget: deploy a router, deploy none, or cannot tell (docs/numbers.md).

Why: the decision table marks every policy against a reference, and a reader takes ``ref`` for
"recommended" even where keeping the cheap arm everywhere does as well. A team asks one thing
per operating point: is there a router worth deploying over the fixed decisions it replaces?
This module answers it from numbers the harness already computes (``harness.paired``), in the
same words on the console, in MLflow and in the report.

The rule, per (cost, budget) of the decision table (``verdict_cells`` decides, ``verdict_stats``
computes; docs/metrics.md §9):
- The router is the table's reference: in each split the deployable policy with the best
  calibration-half utility, chosen before any test outcome ("best on calibration"). Where a
  split's choice was a tie, every equally valid router (each combination of tied choices whose
  decisions differ) is tested, and a verdict holds only if it holds for each of them.
- Its rivals are the fixed decisions that fit the budget, named by their arms: always the base
  arm (usage 0), always the extra arm (usage 1) only at a budget of 1 or more. Each is compared
  with the router on the same test questions (per question, the router's expected utility minus
  the fixed decision's; sign-flip by document, ``harness.paired.paired_comparison``); so is the
  oracle at the budget (the best any router could do there: the headroom).
- Three claims per cell, decided in one step-down family over the sweep's cells at alpha: the
  router differs from the fixed decisions (intersection-union over the rivals when it is ahead
  of all), it is as good as one (two one-sided tests against a margin min(margin, fraction x
  the oracle's headroom): it can fail), and there is no room to route (the oracle itself is
  within the margin). Every interval and plan is at the level its claim was decided at.
- "deploy R: R beats F by X [lo, hi] at level L ..."; "over budget: ..." instead when R
  overspends rho beyond sampling error in more than half of the splits; "deploy no router: F is
  better than R by X", "... no room to route: ...", "... F is as good as R (...)"; otherwise
  "cannot tell (R vs F): about N questions needed for 80% power at level L (here n)", or why
  there is no plan.
"""

from __future__ import annotations

import math
import re
import textwrap
from typing import Iterable

import pandas as pd

from harness.markdown import md_escape
from harness.protocols.verdict_cells import COLUMNS, CellTest, Setting, _interval, _num, decide_all

WIDTH = 100  # the console's line width
KINDS = ("deploy", "no router", "over budget", "cannot tell")


# ---------------------------------------------------------------- the verdicts


def _router_of(part: pd.DataFrame, ref_rows: pd.DataFrame, comps: list[dict]):
    """The router of one cell and budget: its usage, splits, violations and overspent splits,
    from its comparisons (``decision_table._router_comparisons``), or from the row marked
    ``ref`` for comparisons logged without them; None when there is neither."""
    c = next((c for c in comps if "router_usage" in c), None)
    if c is not None:
        splits = int(c["router_splits"])
        return {"policy": str(c["policy"]), "usage": float(c["router_usage"]), "splits": splits,
                "violations": int(c["router_violations"]), "overspent": int(c.get("router_overspent", 0)),
                "alternatives": int(c.get("alternatives", 1))}
    if ref_rows.empty:
        return None
    r = ref_rows.iloc[0]
    splits = int(r["n_runs"]) if r["n_runs"] == r["n_runs"] else 0
    v = float(r["violation_rate"])
    return {"policy": str(r["policy"]), "usage": float(r["usage"]), "splits": splits,
            "violations": int(round(v * splits)) if v == v else 0, "overspent": 0, "alternatives": 1}


def verdicts(table: pd.DataFrame, comparisons: Iterable[dict], *, alpha: float | None = None) -> pd.DataFrame:
    """One row per cell, cost and budget of the decision table ``table``, from the router-vs-fixed
    ``comparisons`` (``decision_table._router_comparisons``); columns ``COLUMNS``, the sentence
    in ``verdict`` (module docstring)."""
    shown_alpha: object = alpha
    if alpha is None:  # the table's; a table of cells at several levels: each cell at its own
        shown_alpha = table.attrs.get("alpha", 0.05)
        alpha = float(shown_alpha) if isinstance(shown_alpha, (int, float)) else 0.05
    setting = Setting(margin=float(table.attrs.get("margin", 0.01)), fraction=float(table.attrs.get("fraction", 0.5)),
                      power=float(table.attrs.get("power", 0.8)))
    by: dict[tuple, list[dict]] = {}
    for c in comparisons:
        by.setdefault((c["cell"], round(float(c["cost"]), 12), round(float(c["budget"]), 9)), []).append(c)
    ranking = table[(table["kind"] != "fixed") & table["budget"].notna()]
    cells = []
    for (cell, cost, budget), part in ranking.groupby(["cell", "cost", "budget"], sort=True):
        comps = by.get((cell, round(float(cost), 12), round(float(budget), 9)), [])
        row = {k: math.nan for k in COLUMNS}
        row.update(cell=cell, cost=float(cost), budget=float(budget), arm="", note="", flag="", policy="", chosen="")
        router = _router_of(part, part[part["mark"] == "ref"], comps)
        level = next((float(c["alpha"]) for c in comps if "alpha" in c), alpha)
        own = next((Setting(float(c["margin"]), float(c["fraction"]), float(c["power"])) for c in comps
                    if "fraction" in c), setting)  # a table of cells at several settings: each its own
        cells.append(CellTest.build(row, router, comps, part, level, own))
    decide_all(cells, alpha)
    out = pd.DataFrame([c.row for c in cells], columns=list(COLUMNS))
    out.attrs.update(alpha=shown_alpha, margin=setting.margin, fraction=setting.fraction,
                     family=len({k for c in cells for k in c.keys()}),
                     frontier=table.attrs.get("frontier", "deployable"))
    return out


# ---------------------------------------------------------------- words and renderings


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
    refs = " / ".join(sorted({r.chosen for r in frame.itertuples() if r.chosen})) or "best on calibration"
    frontier = frame.attrs.get("frontier", "deployable")
    title = f"Verdict per cost and budget (protocol B test halves, {frontier} rule; router: {refs})"
    star = lambda r: "the split choice *" if str(r.policy).startswith("best on ") else r.policy  # noqa: E731
    flags = [f"! {star(r)} at c={_g(r.cost)}, rho={_g(r.budget)}: {r.flag}" for r in frame.itertuples() if _text(r.flag)]
    if len(flags) > 2:
        worst = sorted({star(r) for r in frame.itertuples() if _text(r.flag)})
        flags = [f"! overspends beyond sampling error in more than half of the splits in {len(flags)} cells "
                 f"({', '.join(worst)})"]
    if any(str(r.policy).startswith("best on ") for r in frame.itertuples()):
        flags.insert(0, "* the splits chose different routers: each split's calibration choice (verdicts.csv)")
    notes = [f"{r.policy} at c={_g(r.cost)}, rho={_g(r.budget)}: {r.note}" for r in frame.itertuples() if _text(r.note)]
    if len(notes) > 2:
        notes = [f"{len(notes)} cells chose their router from a tie on calibration; every equally valid router "
                 "was tested (verdicts.csv, note)"]
    return "\n".join([*wrap(title, width), *lines,
                      *[w for f in [legend_text(frame), *flags, *notes] for w in wrap(f, width)]])


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
    import html

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


def _key(cost: float, budget: float) -> str:
    return f"verdict/c{_g(cost)}/b{_g(budget)}"


def mlflow_params(frame: pd.DataFrame) -> dict[str, str]:
    """``verdict/c<cost>/b<budget>`` -> the sentence (a sortable column of the runs table), and
    ``.../policy`` -> the router it is about. Cells of several sweep cells at one cost keep the
    first (the names carry cost and budget only)."""
    out: dict[str, str] = {}
    for r in frame.itertuples():
        key = _key(r.cost, r.budget)
        if key in out:
            continue
        out[key] = str(r.verdict)[:500]
        out[f"{key}/policy"] = str(r.policy)
    return out


def mlflow_metrics(frame: pd.DataFrame) -> dict[str, float]:
    """Per cost and budget: ``deploy`` (1 deploy a router, 0 no router, -1 cannot tell), the
    router's difference to the fixed decision and its interval, usage, violation rate, Holm p
    and the questions a plan needs (only the finite ones)."""
    out: dict[str, float] = {}
    code = {"deploy": 1.0, "no router": 0.0, "cannot tell": -1.0, "over budget": -2.0}
    for r in frame.itertuples():
        key = _key(r.cost, r.budget)
        if f"{key}/deploy" in out:
            continue
        values = {"deploy": code.get(r.kind, -1.0), "diff": r.diff, "ci_low": r.ci_low, "ci_high": r.ci_high,
                  "usage": r.usage, "violation_rate": r.violation_rate, "p_holm": r.p_holm,
                  "questions_needed": r.plan_questions if r.kind == "cannot tell" else math.nan}
        for name, v in values.items():
            if v is not None and math.isfinite(float(v)):
                out[f"{key}/{name}"] = float(v)
    return out
