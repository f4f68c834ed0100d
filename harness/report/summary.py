"""The three sentences a report opens on: what the sweep compared, what its verdicts say (counted
by kind), and what to do next or what these questions cannot tell.

Why: the verdict table and the sections under it are long; a reader who stops after the first
paragraph must still leave with the answer and its limits. Every number is read from the report
(its jobs, the verdict table ``harness.protocols.verdict``, the open comparisons); nothing is
recomputed. The Markdown and the HTML page show the same sentences.
"""

from __future__ import annotations

import math

from harness.protocols.verdict import KINDS
from harness.report.model import SweepReport

FIXED_KEY = "budget/fixed/realized_usage"  # logged by a fixed decision's job (always one arm)


def _number(text: str) -> str:
    """A cost as the tables print it (``0.0`` -> ``0``); a text that is no number stays."""
    try:
        return f"{float(text):g}"
    except (TypeError, ValueError):
        return str(text)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def compared(rep: SweepReport) -> str:
    """What the sweep compared: its policies (the fixed decisions named), costs and jobs."""
    policies = list(dict.fromkeys(r.policy for r in rep.rows))
    fixed = [p for p in policies if any(r.policy == p and FIXED_KEY in r.metrics for r in rep.rows)]
    kinds = (f" ({_count(len(policies) - len(fixed), 'routing policy', 'routing policies')} and "
             f"{_count(len(fixed), 'fixed decision')}: {', '.join(sorted(fixed))})") if fixed else ""
    costs = sorted({_number(r.cost) for r in rep.rows if str(r.cost) != ""},
                   key=lambda c: (0, float(c)) if _is_number(c) else (1, c))
    at = f" at {_count(len(costs), 'cost')} ({', '.join(costs)})" if costs else ""
    unfinished = sum(r.status != "FINISHED" for r in rep.rows)
    tail = f", {unfinished} of them not finished" if unfinished else ""
    return (f"Sweep {rep.sweep_id} compared {_count(len(policies), 'policy', 'policies')}{kinds}{at} "
            f"in {_count(len(rep.rows), 'job')}{tail}.")


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def verdict_frame(rep: SweepReport):
    """The sweep's verdict table (a result's ``verdicts`` table with a ``kind`` column), else None."""
    for result in rep.results.values():
        frame = getattr(result, "tables", {}).get("verdicts")
        if frame is not None and len(frame) and "kind" in frame.columns:
            return frame
    return None


def verdict_counts(frame) -> dict[str, int]:
    """Cells per verdict kind (``harness.protocols.verdict.KINDS``)."""
    return {k: int((frame["kind"] == k).sum()) for k in KINDS}


def verdicts_said(frame) -> str:
    """The verdicts counted by kind, over the cost x budget cells."""
    n = verdict_counts(frame)
    over = f", {n['over budget']} over budget" if n["over budget"] else ""
    return (f"Of its {_count(len(frame), 'cost x budget cell')}, {n['deploy']} deploy a router, "
            f"{n['no router']} deploy no router{over} and {n['cannot tell']} cannot tell.")


def _closest_plan(frame) -> str:
    """The cannot-tell cell needing the fewest questions for its verdict, in the verdict's words."""
    open_cells = frame[frame["kind"] == "cannot tell"]
    plans = [r for r in open_cells.itertuples() if isinstance(r.plan_questions, (int, float))
             and math.isfinite(float(r.plan_questions))]
    if not plans:
        verb = "has" if len(open_cells) == 1 else "have"
        return f"the {_count(len(open_cells), 'cell')} that cannot tell {verb} no sample-size plan (verdict table)"
    best = min(plans, key=lambda r: (float(r.plan_questions), float(r.cost), float(r.budget)))
    here = getattr(best, "dataset_questions", math.nan)
    have = f" (here {int(here):,})" if isinstance(here, (int, float)) and math.isfinite(float(here)) else ""
    return (f"{_count(len(open_cells), 'cell')} cannot tell with these questions: the closest (cost "
            f"{float(best.cost):g}, budget {float(best.budget):g}) needs about "
            f"{int(best.plan_questions):,} questions{have}")


def next_step(rep: SweepReport, frame) -> str:
    """What to do next, or what these questions cannot tell."""
    if frame is None:
        n_open = sum(len(getattr(r, "open_comparisons", []) or []) for r in rep.results.values())
        told = (f"{_count(n_open, 'comparison')} here cannot be told apart with these questions (Conclusions)"
                if n_open else "every comparison here is decided")
        return f"Next: run protocol B (protocol=budget) for a verdict per cost and budget; {told}."
    n = verdict_counts(frame)
    first = ("deploy the router a \"deploy\" row names, at its cost and budget" if n["deploy"]
             else "keep the fixed decision")
    if n["cannot tell"]:
        return f"Next: {first}; {_closest_plan(frame)}."
    return f"Next: {first}." if n["deploy"] else f"Next: {first}: no router beats it in any cell."


def summary_sentences(rep: SweepReport, no_verdict: str) -> list[str]:
    """The three sentences: what was compared, what the verdicts say (``no_verdict`` when the sweep
    has none), what to do next or what cannot be told."""
    frame = verdict_frame(rep)
    return [compared(rep), verdicts_said(frame) if frame is not None else no_verdict, next_step(rep, frame)]
