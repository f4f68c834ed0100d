"""Frontier geometry of a sweep: each job's logged frontier points, the distinct curves per
policy, the random / oracle references at matched usage and the fixed decisions, as the
frontier plot (``harness.report.frontier_plot``) draws them."""

from __future__ import annotations

import math
import re

from harness.report.model import JobRow, SweepReport

FRONTIERS_PLOTTED = ("exact", "deployable")


def _frontier_triples(row: JobRow, frontier: str, outcome: str) -> list[tuple[float, float, float]]:
    """(realized usage, outcome, sd over splits) of one job's frontier, sorted by usage; sd is
    the logged scalar ``budget/<rho>/<frontier>/<outcome>_std`` (NaN where not logged)."""
    s_out = dict(row.series.get(f"frontier/{frontier}/{outcome}", []))
    s_use = dict(row.series.get(f"frontier/{frontier}/realized_usage", []))

    def sd(rho: str) -> float:
        return row.metrics.get(f"budget/{rho}/{frontier}/{outcome}_std", math.nan)

    pts = []
    if s_out:
        for step, y in s_out.items():
            x = s_use.get(step, step / 100.0 if frontier == "exact" else None)
            if x is not None:
                pts.append((x, y, sd(f"{step / 100:.2f}")))
    else:
        for k, y in row.metrics.items():
            m = re.fullmatch(rf"budget/([0-9.]+)/{frontier}/{re.escape(outcome)}", k)
            if not m:
                continue
            use_key = f"budget/{m.group(1)}/{frontier}/realized_usage"
            x = row.metrics.get(use_key, float(m.group(1)) if frontier == "exact" else None)
            if x is not None:
                pts.append((x, y, sd(m.group(1))))
    return sorted(pts)


def logged_frontier_points(row: JobRow, frontier: str, outcome: str) -> list[tuple[float, float]]:
    """(realized usage, outcome) points of one job's frontier, sorted by usage."""
    return [(x, y) for x, y, _ in _frontier_triples(row, frontier, outcome)]


def _curves(rep: SweepReport, frontier: str) -> list[tuple[str, list[tuple[float, float, float]]]]:
    curves: dict[str, list[tuple[str, list]]] = {}
    for row in rep.rows:
        pts = _frontier_triples(row, frontier, rep.outcome_metric)
        xy = [(x, y) for x, y, _ in pts]
        if pts and all(xy != [(x, y) for x, y, _ in seen] for _, seen in curves.get(row.policy, [])):
            curves.setdefault(row.policy, []).append((row.run_name, pts))
    lines = []
    for policy, items in curves.items():
        lines += [(policy if len(items) == 1 else name, pts) for name, pts in items]
    return lines


def frontier_lines(rep: SweepReport, frontier: str) -> list[tuple[str, list[tuple[float, float]]]]:
    """(label, points) per distinct curve. Frontiers do not depend on the cost, so the jobs of one
    policy at several costs usually draw the same curve: it is drawn once, labelled by the policy
    (by the run name when one policy has several different curves, e.g. several seeds)."""
    return [(label, [(x, y) for x, y, _ in pts]) for label, pts in _curves(rep, frontier)]


def reference_points(rep: SweepReport, which: str) -> list[tuple[float, float]]:
    """``which`` ("random_matched" / "oracle_matched") at the exact frontier's usage, per budget
    the mean over the jobs that logged it (series ``frontier/exact/<which>``, else the scalars
    ``budget/<rho>/exact/<which>/<outcome>``); x = exact usage (else the budget)."""
    by_rho: dict[str, list[tuple[float, float]]] = {}
    for row in rep.rows:
        s_ref = dict(row.series.get(f"frontier/exact/{which}", []))
        s_use = dict(row.series.get("frontier/exact/realized_usage", []))
        if s_ref:
            for step, y in s_ref.items():
                by_rho.setdefault(f"{step / 100:.2f}", []).append((s_use.get(step, step / 100.0), y))
            continue
        for k, y in row.metrics.items():
            m = re.fullmatch(rf"budget/([0-9.]+)/exact/{which}/{re.escape(rep.outcome_metric or '')}", k)
            if m:
                x = row.metrics.get(f"budget/{m.group(1)}/exact/realized_usage", float(m.group(1)))
                by_rho.setdefault(m.group(1), []).append((x, y))
    pts = [(sum(x for x, _ in v) / len(v), sum(y for _, y in v) / len(v)) for v in by_rho.values()]
    return sorted(p for p in pts if not (math.isnan(p[0]) or math.isnan(p[1])))


def fixed_points(rep: SweepReport) -> list[tuple[str, float, float]]:
    """(policy, usage, outcome) of the fixed-decision jobs (always-keep / always-extra:
    ``budget/fixed/<outcome>`` at ``budget/fixed/realized_usage``), one per distinct point."""
    out = []
    for row in rep.rows:
        y = row.metrics.get(f"budget/fixed/{rep.outcome_metric}")
        x = row.metrics.get("budget/fixed/realized_usage")
        if y is not None and x is not None and (row.policy, x, y) not in out:
            out.append((row.policy, x, y))
    return out


def frontier_panels(rep: SweepReport) -> list[tuple[str, dict[str, list[tuple[float, float, float]]]]]:
    """(label, {frontier: points}) per distinct curve label (``frontier_lines``), the leaders
    first: by the mean outcome of the deployable frontier (the exact one where a job logged no
    deployable frontier), highest first."""
    by_label: dict[str, dict[str, list]] = {}
    for fr in FRONTIERS_PLOTTED:
        for label, pts in _curves(rep, fr):
            by_label.setdefault(label, {})[fr] = pts

    def lead(item) -> float:
        pts = item[1].get("deployable") or item[1].get("exact") or []
        ys = [y for _, y, _ in pts if not math.isnan(y)]
        return -sum(ys) / len(ys) if ys else math.inf

    return sorted(by_label.items(), key=lead)
