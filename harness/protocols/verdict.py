"""One verdict per cost and budget: deploy a router, deploy none, or cannot tell (docs/numbers.md).

Why: the decision table marks every policy against a reference, and a reader takes ``ref`` for
"recommended" even where keeping the cheap arm everywhere does as well. A team asks one thing
per operating point: is there a router worth deploying over the fixed decisions it replaces?
This module answers it from numbers the harness already computes (``harness.paired``), in the
same words on the console, in MLflow and in the report.

The rule, per (cost, budget) of the decision table:
- The router is the table's reference: the deployable policy with the best calibration-half
  utility, chosen before any test outcome ("best on calibration"). When several tie there,
  every tied router must reach the same verdict, else "cannot tell" (a tie never decides).
- Its rivals are the fixed decisions that fit the budget: always-keep (usage 0) always,
  always-extra (usage 1) only at a budget of 1 or more. Each is compared with the router on the
  same test questions (``fixed_comparisons``: per question, the router's expected utility minus
  the fixed decision's; sign-flip by document, ``harness.paired.paired_comparison``).
- The cell's p: when the router's difference is positive against every rival, the largest of
  their p (it must beat all of them: an intersection-union test); else the smallest p among the
  rivals it trails. These p are Holm-adjusted over the sweep's cells (cells whose per-question
  differences are identical, e.g. a router that never runs the extra arm at several costs,
  counted once with their largest p).
- "deploy R: beats F by X [lo, hi], usage U, violations V of S" when it beats every rival at
  the adjusted alpha (F the rival it is least sure to beat, [lo, hi] the unadjusted interval
  that inverts the test); "deploy no router: F is better by X [lo, hi]" when a rival beats it;
  "deploy no router: F is as good" when the router makes F's decisions or is equivalent to F
  within the margin (two one-sided tests); otherwise "cannot tell: about N questions needed"
  (N from the sample-size plan of the comparison with F) or why there is no plan.
- A router over budget in more than ``HIGH_VIOLATION`` of the splits is flagged.
"""

from __future__ import annotations

import math
import textwrap
from typing import Iterable

import numpy as np
import pandas as pd

from harness.paired import paired_comparison
from harness.stats import holm_adjust

FIXED_ARMS = (("always_keep", 0.0), ("always_extra", 1.0))  # the fixed decisions and their usage
HIGH_VIOLATION = 0.5  # a router over budget in more than half of the splits is flagged
WIDTH = 100  # the console's line width
BUDGET_TOL = 1e-9
REF_NAMES = {"calibration": "best on calibration", "test (optimistic)": "best on test (optimistic)"}
COLUMNS = (
    "cost", "budget", "kind", "verdict", "policy", "chosen", "arm", "diff", "ci_low", "ci_high", "p", "p_holm",
    "equivalent", "plan_questions", "usage", "violation_rate", "violations", "splits", "flag", "note", "cell",
)
KINDS = ("deploy", "no router", "cannot tell")


def ref_name(reference_from: str) -> str:
    """How the reference (the router of a verdict) was chosen, in words."""
    return REF_NAMES.get(str(reference_from), f"best on {reference_from}" if reference_from else "reference")


# ---------------------------------------------------------------- the router against the fixed arms


def fixed_comparisons(decisions: pd.DataFrame, cost: float, *, alpha: float = 0.05, power: float = 0.8,
                      margin: float = 0.01, seed: int = 0) -> list[dict]:
    """The router of ``decisions`` (its deployable per-question rows at one budget, stacked over
    seeds and splits: ``doc_id``, ``qid``, ``prob``, ``base``, ``extra``, ``utility`` at the
    cost) against each fixed decision on the same questions: always-keep's utility is the base
    outcome, always-extra's the extra outcome minus ``cost``. One dict per arm with the
    ``paired_comparison`` numbers of router - arm and ``key``: the hypothesis it tests (the
    arm and the per-question differences), the same only at costs that change no difference
    (a router that never runs the extra arm)."""
    import hashlib

    d = decisions
    groups = d["doc_id"].astype(str).to_numpy()
    base, extra = d["base"].to_numpy(dtype=float), d["extra"].to_numpy(dtype=float)
    prob, utility = d["prob"].to_numpy(dtype=float), d["utility"].to_numpy(dtype=float)
    outcome = base + prob * (extra - base)
    n_q = int(d["qid"].nunique())
    out = []
    for arm, usage in FIXED_ARMS:
        arm_outcome = extra if usage else base
        diffs = utility - (arm_outcome - cost * usage)
        c = paired_comparison(diffs, groups, seed=seed, alpha=alpha, power=power,
                              outcome_diffs=outcome - arm_outcome, n_questions=n_q, margin=margin)
        h = hashlib.sha256(arm.encode())
        for col in [k for k in ("seed", "split", "qid", "doc_id") if k in d.columns]:
            h.update("\x1f".join(map(str, d[col].tolist())).encode())
        h.update(np.ascontiguousarray(np.round(diffs, 12) + 0.0).tobytes())
        out.append({"arm": arm, "arm_usage": usage, "diff": c["point"], "key": h.hexdigest(),
                    **{k: c[k] for k in ("ci_low", "ci_high", "p", "equivalent", "detectable", "plan_questions",
                                         "plan_docs", "plan_why", "plan_capped", "same", "discordant_docs")}})
    return out


# ---------------------------------------------------------------- the verdicts


def _fits(usage: float, budget: float) -> bool:
    return usage <= budget + BUDGET_TOL


def _router_kind(comps: list[dict], p_adj: float, alpha: float) -> tuple[str, dict]:
    """(kind, the decisive comparison) for one router against the fitting arms, ``p_adj`` the
    cell's adjusted p: "deploy" / "better" (an arm beats it) / "as good" / "open"."""
    if comps and all(c["diff"] > 0 and not c["same"] for c in comps) and p_adj < alpha:
        return "deploy", max(comps, key=lambda c: c["p"])
    trailing = [c for c in comps if c["diff"] < 0 and not c["same"]]
    if trailing and p_adj < alpha:
        return "better", min(trailing, key=lambda c: c["p"])
    for c in comps:
        if c["same"] or c["equivalent"]:
            return "as good", c
    return "open", max(comps, key=lambda c: c["p"])


def _cell_p(comps: list[dict]) -> float:
    if all(c["diff"] > 0 and not c["same"] for c in comps):
        return max(c["p"] for c in comps)
    trailing = [c["p"] for c in comps if c["diff"] < 0 and not c["same"]]
    return min(trailing) if trailing else 1.0


def _num(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "nan"


def _interval(c: dict) -> str:
    if math.isfinite(c["ci_low"]) and math.isfinite(c["ci_high"]):
        return f"[{_num(c['ci_low'])}, {_num(c['ci_high'])}]"
    return "[no informative interval]"


PLAN_WHY = {  # harness.paired.sample_size_plan's reasons, short
    "no discordant document to plan from": "no discordance",
    "the discordant documents split evenly: no number of questions gives the power": "even split",
}


def _plan(c: dict) -> str:
    if c["plan_why"] or not math.isfinite(float(c["plan_questions"])):
        why = str(c["plan_why"] or "no discordant document to plan from")
        return f"no plan ({PLAN_WHY.get(why, why)})"
    more = "more than" if c["plan_capped"] else "about"
    return f"{more} {int(c['plan_questions'])} questions needed"


def _router_of(part: pd.DataFrame, ref_rows: pd.DataFrame, comparisons: list[dict]):
    """The router of one cell and budget: the row marked ``ref``, or, when the splits chose
    different policies on their calibration halves (no row is ``ref``), that per-split choice,
    its usage and violations carried by its comparisons (``decision_table._test_budget``);
    None when there is neither."""
    if not ref_rows.empty:
        return ref_rows.iloc[0]
    c = next((c for c in comparisons if "router_usage" in c), None)
    if c is None:
        return None
    splits = int(c["router_splits"])
    return pd.Series({"policy": str(part["reference"].iat[0]), "reference_from": part["reference_from"].iat[0],
                      "reference_tied": "", "usage": float(c["router_usage"]), "n_runs": splits,
                      "violation_rate": c["router_violations"] / splits if splits else math.nan})


def verdicts(table: pd.DataFrame, comparisons: Iterable[dict], *, alpha: float | None = None) -> pd.DataFrame:
    """One row per cell, cost and budget of the decision table ``table``, from the router-vs-fixed
    ``comparisons`` (dicts of ``fixed_comparisons`` with ``cell``, ``cost``, ``budget``,
    ``policy``); columns ``COLUMNS``, the sentence in ``verdict`` (module docstring)."""
    shown_alpha: object = alpha
    if alpha is None:  # the table's; a table of cells at several levels: each cell at its own
        shown_alpha = table.attrs.get("alpha", 0.05)
        alpha = float(shown_alpha) if isinstance(shown_alpha, (int, float)) else 0.05
    margin = float(table.attrs.get("margin", 0.01))
    by: dict[tuple, list[dict]] = {}
    for c in comparisons:
        by.setdefault((c["cell"], round(float(c["cost"]), 12), round(float(c["budget"]), 9), c["policy"]), []).append(c)
    ranking = table[(table["kind"] != "fixed") & table["budget"].notna()]
    cells = []
    for (cell, cost, budget), part in ranking.groupby(["cell", "cost", "budget"], sort=True):
        ref_rows = part[part["mark"] == "ref"]
        row = {k: math.nan for k in COLUMNS}
        row.update(cell=cell, cost=float(cost), budget=float(budget), arm="", note="", flag="", policy="", chosen="")
        key = (cell, round(float(cost), 12), round(float(budget), 9))
        ref = _router_of(part, ref_rows, by.get((*key, str(part["reference"].iat[0])), []))
        if ref is None:
            row.update(kind="cannot tell", verdict="cannot tell: no deployable router at this budget")
            cells.append((row, None, []))
            continue
        tied = [t.strip() for t in str(ref["reference_tied"] or "").split(",") if t.strip()] if not ref_rows.empty else []
        routers = [ref["policy"], *tied]
        comps = {r: [c for c in by.get((*key, r), []) if _fits(c["arm_usage"], float(budget))] for r in routers}
        violations = ref["violation_rate"]
        splits = int(ref["n_runs"]) if ref["n_runs"] == ref["n_runs"] else 0
        row.update(policy=ref["policy"], chosen=ref_name(ref["reference_from"]), usage=float(ref["usage"]),
                   violation_rate=float(violations), splits=splits,
                   violations=int(round(float(violations) * splits)) if violations == violations else math.nan)
        if violations == violations and float(violations) > HIGH_VIOLATION:
            row["flag"] = f"over budget in {row['violations']} of {splits} splits"
        if tied:
            row["note"] = f"tied on calibration with {', '.join(tied)}"
        if not all(comps.values()):
            row.update(kind="cannot tell", verdict="cannot tell: no per-question decisions of the router")
            cells.append((row, None, []))
            continue
        p = max(_cell_p(cs) for cs in comps.values())
        hyp = tuple(sorted(c["key"] for cs in comps.values() for c in cs))
        cells.append((row, (p, hyp), comps))
    # Holm over the sweep's cells, a cell whose decisions no cost changes counted once (its largest p)
    groups: dict[tuple, list[int]] = {}
    for i, (_, test, _) in enumerate(cells):
        if test is not None:
            groups.setdefault(test[1], []).append(i)
    keys = list(groups)
    adjusted = holm_adjust([max(cells[i][1][0] for i in groups[k]) for k in keys]) if keys else []
    p_adj = {i: float(a) for k, a in zip(keys, adjusted) for i in groups[k]}
    rows = []
    for i, (row, test, comps) in enumerate(cells):
        if test is not None:
            row["p_holm"] = p_adj[i]
            level = next((float(c["alpha"]) for cs in comps.values() for c in cs if "alpha" in c), alpha)
            row.update(_decide(row, comps, p_adj[i], level, margin))
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    out.attrs.update(alpha=shown_alpha, margin=margin, family=len(keys))
    return out


def _decide(row: dict, comps: dict[str, list[dict]], p_adj: float, alpha: float, margin: float) -> dict:
    """The verdict of one cell from its routers' comparisons (every tied router must agree)."""
    decided = {r: _router_kind(cs, p_adj, alpha) for r, cs in comps.items()}
    kinds = {(kind, c["arm"]) for kind, c in decided.values()}
    kind, c = decided[row["policy"]]
    numbers = dict(arm=c["arm"], diff=c["diff"], ci_low=c["ci_low"], ci_high=c["ci_high"], p=c["p"],
                   equivalent=bool(c["equivalent"]), plan_questions=c["plan_questions"])
    if len(kinds) > 1:
        return {**numbers, "kind": "cannot tell",
                "verdict": f"cannot tell: tied on calibration ({', '.join(comps)}) with different verdicts"}
    if kind == "deploy":
        text = (f"deploy {row['policy']}: beats {c['arm']} by {_num(c['diff'])} {_interval(c)}, usage "
                f"{_num(row['usage'], 2)}, violations {row['violations']} of {row['splits']}")
        return {**numbers, "kind": "deploy", "verdict": text}
    if kind == "better":
        return {**numbers, "kind": "no router",
                "verdict": f"deploy no router: {c['arm']} is better by {_num(-c['diff'])} {_interval(_flip(c))}"}
    if kind == "as good":
        why = "the same decisions" if c["same"] else f"equivalent within +-{margin:g}"
        return {**numbers, "kind": "no router", "verdict": f"deploy no router: {c['arm']} is as good ({why})"}
    return {**numbers, "kind": "cannot tell", "verdict": f"cannot tell: {_plan(c)}"}


def _flip(c: dict) -> dict:
    return {**c, "ci_low": -c["ci_high"], "ci_high": -c["ci_low"]}


# ---------------------------------------------------------------- words and renderings


def short_verdict(row) -> str:
    """The verdict's lead, for the console's verdict column (the numbers stand in their own
    columns): "deploy R", "deploy no router: F is as good" / "... is better", "cannot tell:
    about N questions needed"."""
    text = str(row["verdict"])
    if row["kind"] == "deploy":
        lead = text.split(":", 1)[0]
        # a per-split choice's name holds its counts (verdicts.csv): short on the console
        return "deploy the split choice *" if lead.startswith("deploy best on ") else lead
    if row["kind"] == "no router":
        return text.split(" by ", 1)[0].split(" (", 1)[0]
    return text


def _g(x: float) -> str:
    return f"{float(x):g}"


def format_console(frame: pd.DataFrame, width: int = WIDTH) -> str:
    """The sweep's verdict table: a title, one line per cost and budget, at most ``width``
    characters (a longer line is wrapped under its verdict), then what the columns mean and
    the flags."""
    if frame.empty:
        return ""
    header = ["cost", "rho", "verdict", "policy - fixed [95%]", "usage", "over budget"]
    body = []
    for r in frame.itertuples():
        d = r._asdict()
        diff = "" if not math.isfinite(float(r.diff)) else (
            f"{float(r.diff):+.3f} {_interval(d)}" if math.isfinite(float(r.ci_low)) else f"{float(r.diff):+.3f}")
        over = "" if not r.splits else f"{int(r.violations)} of {int(r.splits)}" + (" !" if r.flag else "")
        body.append([_g(r.cost), _g(r.budget), short_verdict(d), diff,
                     "" if not math.isfinite(float(r.usage)) else f"{float(r.usage):.2f}", over])
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
    title = f"Verdict per cost and budget (protocol B, test halves; the router: the policy {refs})"
    legend = legend_text(frame)
    flags = [f"! {'the split choice *' if str(r.policy).startswith('best on ') else r.policy} at c={_g(r.cost)}, "
             f"rho={_g(r.budget)}: {r.flag}" for r in frame.itertuples() if r.flag]
    if len(flags) > 2:
        worst = sorted({"the split choice *" if str(r.policy).startswith("best on ") else r.policy
                        for r in frame.itertuples() if r.flag})
        flags = [f"! over budget in more than half of the splits in {len(flags)} cells ({', '.join(worst)})"]
    if any(str(r.policy).startswith("best on ") for r in frame.itertuples()):
        flags.insert(0, "* the splits chose different routers: each split's calibration choice (verdicts.csv)")
    notes = [f"{r.policy} at c={_g(r.cost)}, rho={_g(r.budget)}: {r.note}" for r in frame.itertuples() if r.note]
    if len(notes) > 2:
        notes = [f"{len(notes)} cells chose their router from a tie on calibration (verdicts.csv, note)"]
    return "\n".join([*wrap(title, width), *lines, *[w for f in [legend, *flags, *notes] for w in wrap(f, width)]])


def legend_text(frame: pd.DataFrame) -> str:
    """What "policy - fixed" means and the test behind the verdicts (console, report)."""
    alpha, family = frame.attrs.get("alpha", 0.05), frame.attrs.get("family", len(frame))
    alpha = alpha if isinstance(alpha, (int, float)) else "per cell (protocol.alpha)"
    return (f"policy - fixed: the router's utility minus always_keep's (or always_extra's where usage 1 fits the "
            f"budget), 95% interval unadjusted; verdicts at Holm alpha {alpha} over the {family} distinct "
            f"comparisons of {len(frame)} cells.")


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
    from harness.protocols.decision_table import md_escape

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
    code = {"deploy": 1.0, "no router": 0.0, "cannot tell": -1.0}
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
