"""What the Markdown and the HTML page both show, in one place: the per-job table's cells (values,
intervals, the best marks), the order of the protocols' sections, the fixed notes and the
"About this report" rows."""

from __future__ import annotations

import math

from harness.report.columns import Column
from harness.report.model import JobRow, SweepReport

TIE_TOL = 1e-12
NO_VERDICT = ("No verdict: no job of this sweep ran protocol B (budget), which decides per cost and budget; "
              "each protocol's own results follow.")
JOBS_NOTE = ("Best value per column marked (highest, or lowest for violation rates) when one job holds it; "
             "a mark is a position, not a verdict: see the sections above for which differences are real.")


def best_values(rep: SweepReport) -> dict[str, float]:
    """Per marked column, the best value over jobs, only where ONE job holds it: a value shared
    by several jobs (two constant policies, tied routers) marks nobody, since a tie decides no
    ranking. Whether a marked difference is real is what the policy-vs-policy section says."""
    best = {}
    for c in rep.columns:
        if c.better is None:
            continue
        vals = [
            r.metrics[c.key] for r in rep.rows
            if c.key in r.metrics and not math.isnan(r.metrics[c.key])
        ]
        if vals:
            top = max(vals) if c.better == "high" else min(vals)
            # float sums of equal values can differ in the last bit: a tie within 1e-12 is a tie
            if sum(abs(v - top) <= TIE_TOL * max(1.0, abs(top)) for v in vals) == 1:
                best[c.key] = top
    return best


def _fmt(v: float) -> str:
    """A logged NaN is a number the run declared undefined (e.g. APGR on too few discordant
    questions): shown as "undefined", while a metric the run did not log stays blank."""
    if v is None:
        return ""
    if isinstance(v, float) and math.isnan(v):
        return "undefined"
    return f"{v:.4f}"


def cell_text(row: JobRow, col: Column) -> str:
    v = row.metrics.get(col.key)
    if v is None:
        return ""
    if col.unless and row.metrics.get(col.unless[0]) == 0:
        return col.unless[1]
    text = _fmt(v)
    if col.ci and col.ci[0] in row.metrics and col.ci[1] in row.metrics:
        lo, hi = row.metrics[col.ci[0]], row.metrics[col.ci[1]]
        if isinstance(lo, float) and isinstance(hi, float) and (math.isnan(lo) or math.isnan(hi)):
            text += " [no informative interval]"  # too few documents for the inverted test
        else:
            text += f" [{_fmt(lo)}, {_fmt(hi)}]"
    return text


def job_head(rep: SweepReport) -> list[str]:
    """The per-job table's headers."""
    return ["job", "policy", "cost", "status"] + [c.header for c in rep.columns]


def job_cells(rep: SweepReport, best: dict, r: JobRow) -> list[tuple[str, str, bool]]:
    """(column key, text, best?) per cell of a job's row."""
    cells = [("", x, False) for x in (r.run_name, r.policy, r.cost, r.status)]
    for c in rep.columns:
        is_best = c.key in best and c.key in r.metrics and r.metrics[c.key] == best[c.key]
        cells.append((c.key, cell_text(r, c), is_best))
    return cells


def ordered_results(rep: SweepReport) -> list[tuple[str, object]]:
    """The sweep stages' results, those with a lead (the answer, e.g. verdicts) first, then the
    others in the sweep's order."""
    items = list(rep.results.items())
    return [i for i in items if i[1].lead_as_markdown()] + [i for i in items if not i[1].lead_as_markdown()]


def about_rows(rep: SweepReport) -> list[tuple[str, str]]:
    """(name, value) rows of "About this report": where the report came from."""
    rows = [("experiment", rep.experiment), ("tracking URI", rep.tracking_uri),
            ("parent run", rep.parent_run_id or "(none)"), ("jobs", str(len(rep.rows)))]
    return rows + ([("picked", rep.picked)] if rep.picked else [])
