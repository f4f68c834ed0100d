"""``python -m harness report``: one sweep from MLflow -> report.md + report.html + frontier PNG.

Why: a sweep leaves one MLflow child run per job; comparing policies means reading them side
by side. The report reads ONLY the tracking store (any store with the harness's MLflow layout:
parent run tagged ``route_bench.role=sweep``, child runs tagged ``route_bench.role=job``, both
tagged ``route_bench.sweep_id``), so it works on a local SQLite store and on a team server.

Choices (docs/metrics.md is silent on reporting):
- One row per job config: if a config hash has several child runs (a failed attempt, then a
  finished rerun), the latest FINISHED run wins; if none finished, the latest run is shown with
  its status and blank metrics.
- "Best" per column: highest for hit/utility/diff/AUC columns, lowest for violation rates;
  cost and extra share are descriptive and never marked. A value shared by several jobs marks
  none of them (a tie decides no ranking). A mark is a position, not a verdict: the section
  "Policy vs policy" (``harness.protocols.sweep_comparisons``) says which differences the held-out
  questions can resolve.
- Metric names are read as the tracker logs them (``harness.tracking.mlflow_tracker.mlflow_name``:
  ``@`` -> ``_at_``, so ``heldout/hit@10`` is ``heldout/hit_at_10``) and shown with ``@``.
- Frontier plot: small multiples, one panel per policy, the leaders (highest mean deployable
  outcome) first; in each the policy's deployable frontier in colour, its exact frontier dashed,
  every other policy in grey behind it (ten curves on one axis merge into one mass). Points: the
  logged series ``frontier/<frontier>/<metric>`` (step = budget in %) against
  ``frontier/<frontier>/realized_usage`` at the same step; where a run lacks the series the
  scalar metrics ``budget/<rho>/<frontier>/...`` are used; for the exact frontier without a
  usage series, usage = budget (the exact frontier spends floor(rho * n) calls). Bands: +- the
  logged sd over splits (``budget/<rho>/<frontier>/<metric>_std``) where present; references:
  random and oracle at the exact frontier's usage (mean over jobs); fixed decisions
  (``budget/fixed/...``) as points, always_keep and always_extra each with its own marker
  (``harness.plots.FIXED_STYLES``); x from 0 to 1, y holding the references; one legend.
- ``--latest``: the sweep with the newest job run, within one experiment (that run's, or
  ``--experiment``'s); the report and stdout say which and why, and name the other experiments
  holding sweeps.
- Warnings (report and stdout): the base arm at ceiling on held-out (``heldout/base/<metric>``
  >= 0.999 in a job), and a held-out set that cannot resolve any hit difference vs always-base
  (``heldout/extra_vs_base/min_p`` > the job's ``protocol.alpha``).
- Layout (the first screen answers): title, one line of context, the contents, then the
  verdicts (each sweep stage's ``lead``: protocol B's verdict per cost and budget) with the
  warnings; then one section per protocol that has a sweep stage (``Protocol.aggregate``,
  ``harness.protocols.sweep_stage``), recomputed from the jobs' artifacts, those with a lead
  first (B's decision table: one short table per budget, every column folded), then in the
  sweep's order (A's "Policy vs policy", C's gain comparison, a plugin protocol's table); the
  conclusions; the frontiers; the per-job table last, folded (``<details>``); where the report
  came from. The HTML has a small inline stylesheet (wide tables scroll sideways) and embeds
  the PNG as a data URI (one self-contained file to share); the Markdown links the PNG.
- ``--budget`` and / or ``--cost`` restrict the decision table to those values (the fixed
  decisions of the selected cost stay, as references) and print it to stdout, every column as
  ``key: value`` lines, one block per row (no line over 100 characters). A value the sweep
  does not have is one error line naming the flag and the values it has (exit 2), and nothing
  is written.
"""

from __future__ import annotations

import argparse
import base64
import html
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from harness.errors import HarnessError
from harness.io import atomic_write, atomic_write_text
from harness.markdown import md_code, md_escape
from harness.store_schema import DEFAULT_TRACKING_URI, TAG_POLICY, TAG_ROLE, TAG_SWEEP_ID
from harness.protocols.ceiling import CEILING  # one threshold for summaries, reports and the results page
from harness.protocols.sweep_stage import conclusion_lines
from harness.tracking.store_reader import (
    SweepNotFound, existing_store_uri, experiments, metric_series, pick_latest_sweep, open_client, pick_runs, search_runs,
)

FRONTIERS_PLOTTED = ("exact", "deployable")
TIE_TOL = 1e-12
PLOT_NAME = "frontier.png"
_NON_OUTCOME = {
    "utility", "realized_usage", "usage_error", "violation_rate", "tolerance_overshoot_rate",
    "target_usage", "extra_calls", "random_matched", "oracle_matched",
}


@dataclass
class Column:
    """A table column: header, the metric key it shows, and which direction is better."""

    header: str
    key: str
    better: str | None  # "high", "low" or None (never marked)
    ci: tuple[str, str] | None = None
    # a 0/1 metric: where the run logged 0, the cell says ``unless[1]`` instead of the value (the
    # MDD is shown only when a difference is detectable at all, docs/metrics.md §12)
    unless: tuple[str, str] | None = None


@dataclass
class JobRow:
    run_id: str
    run_name: str
    status: str
    policy: str
    cost: str
    metrics: dict[str, float]
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    alpha: float = 0.05  # the job's protocol.alpha param (default 0.05)


@dataclass
class SweepReport:
    sweep_id: str
    tracking_uri: str
    experiment: str
    parent_run_id: str | None
    rows: list[JobRow]
    columns: list[Column]
    outcome_metric: str | None
    results: dict = field(default_factory=dict)  # protocol -> its sweep stage's SweepResult, in the sweep's order
    alpha: float = 0.05
    decision_filter: str = ""  # e.g. "budget 0.25, cost 0.02" when the table was filtered

    @property
    def decision_table(self):
        """Protocol B's decision table (pandas), None when no job ran protocol B."""
        result = self.results.get("budget")
        return None if result is None else result.raw
    picked: str = ""  # why --latest picked this sweep (empty for --sweep)
    warnings: list[str] = field(default_factory=list)  # see sweep_warnings


def outcome_metric_of(metric_keys: set[str]) -> str | None:
    """The logged outcome name (e.g. ``hit_at_10``) found among the metric keys."""
    names = set()
    for k in metric_keys:
        m = re.fullmatch(r"frontier/(?:exact|deployable|conservative)/([^/]+)", k)
        if m and m.group(1) not in _NON_OUTCOME:
            names.add(m.group(1))
        m = re.fullmatch(r"heldout/([^/]+)", k)
        if m and m.group(1) not in _NON_OUTCOME and (
            m.group(1).startswith(("hit_at_", "accuracy", "f1", "em", "recall_at_", "mrr_at_"))
        ):
            names.add(m.group(1))
    if not names:
        return None
    return sorted(names, key=lambda n: (not n.startswith("hit_at_"), n))[0]


def display_name(mlflow_metric: str) -> str:
    """MLflow forbids ``@`` in names; the tracker logs ``hit@10`` as ``hit_at_10``. Show ``hit@10``."""
    return mlflow_metric.replace("_at_", "@")


def _budgets(metric_keys: set[str]) -> list[str]:
    found = set()
    for k in metric_keys:
        m = re.fullmatch(r"budget/([0-9.]+)/deployable/violation_rate", k)
        if m:
            found.add(m.group(1))
    return sorted(found, key=float)


def build_columns(metric_keys: set[str], outcome: str | None) -> list[Column]:
    """Columns shown, in order; a column appears only if some job logged its metric."""
    cols = []
    if outcome:
        cols.append(Column(f"heldout {display_name(outcome)}", f"heldout/{outcome}", "high"))
    cols += [
        Column("heldout utility", "heldout/utility", "high"),
        Column("extra share", "heldout/extra_share", None),
        Column(
            "utility diff vs base [95% CI]", "heldout/diff_vs_base/utility", "high",
            ci=("heldout/diff_vs_base/utility/ci_low", "heldout/diff_vs_base/utility/ci_high"),
        ),
        Column(
            "utility diff vs extra [95% CI]", "heldout/diff_vs_extra/utility", "high",
            ci=("heldout/diff_vs_extra/utility/ci_low", "heldout/diff_vs_extra/utility/ci_high"),
        ),
        Column("MDD vs base", "heldout/diff_vs_base/utility/mdd", None,
               unless=("heldout/diff_vs_base/utility/detectable", "none detectable")),
        Column("exact-frontier AUC", "frontier/exact_auc", "high"),
        Column("APGR (exact)", "routing/exact/apgr", "high"),
        Column("APGR (deployable)", "routing/deployable/apgr", "high"),
        Column("CPT(50%) (deployable)", "routing/deployable/cpt50", "low"),
        Column("AIQ (exact)", "routing/exact/aiq", "high"),
    ]
    for b in _budgets(metric_keys):
        cols.append(
            Column(f"deployable violation @{b}", f"budget/{b}/deployable/violation_rate", "low")
        )
    cols.append(Column("gain spearman", "gain/spearman", "high"))
    return [c for c in cols if c.key in metric_keys]


def load_sweep(
    tracking_uri: str, sweep_id: str | None = None, experiment: str | None = None
) -> SweepReport:
    """Read a sweep (by id, or the latest when ``sweep_id`` is None) into a SweepReport."""
    client = open_client(tracking_uri)
    exps = experiments(client, experiment, tracking_uri)
    exp_ids = [e.experiment_id for e in exps]
    if not exp_ids:
        raise SweepNotFound(f"tracking store {tracking_uri} has no experiments")
    picked_why = ""
    if sweep_id is None:
        sweep_id, exp, picked_why = pick_latest_sweep(client, exps, tracking_uri, experiment is not None)
        exp_ids = [exp.experiment_id]
    quoted = sweep_id.replace("'", "\\'")
    runs = search_runs(client, exp_ids, f"tags.`{TAG_SWEEP_ID}` = '{quoted}'")
    if not runs:
        where = f" experiment {experiment!r} of" if experiment else ""
        raise SweepNotFound(
            f"sweep {sweep_id!r} not found: no run tagged {TAG_SWEEP_ID}={sweep_id} in{where} "
            f"tracking store {tracking_uri}"
        )
    parents = [r for r in runs if r.data.tags.get(TAG_ROLE) == "sweep"]
    children = [r for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    if not children:
        raise SweepNotFound(
            f"sweep {sweep_id!r} in tracking store {tracking_uri} has no job runs "
            f"(tag {TAG_ROLE}=job)"
        )
    exp_names = {e.experiment_id: e.name for e in exps}
    picked = pick_runs(children)
    all_keys: set[str] = set()
    for r in picked:
        all_keys |= set(r.data.metrics) if r.info.status == "FINISHED" else set()
    outcome = outcome_metric_of(all_keys)
    rows = []
    for r in picked:
        # a run that did not finish shows its status with blank metrics: what it logged before
        # failing is not a result (and must not win a "best" mark)
        metrics = dict(r.data.metrics) if r.info.status == "FINISHED" else {}
        keys = [k for k in metrics if re.fullmatch(r"frontier/(exact|deployable|conservative)/[^/]+", k)]
        rows.append(
            JobRow(
                run_id=r.info.run_id,
                run_name=r.info.run_name or r.info.run_id,
                status=r.info.status,
                policy=r.data.tags.get(TAG_POLICY) or r.data.params.get("policy.name", "?"),
                cost=r.data.params.get("cost.c", ""),
                metrics=metrics,
                series=metric_series(client, r.info.run_id, sorted(keys)),
                alpha=float(r.data.params.get("protocol.alpha", 0.05)),
            )
        )
    first = picked[0].data.params
    alpha = float(first.get("protocol.alpha", 0.05))
    results = sweep_results(client, picked, alpha=alpha, n_boot=int(first.get("protocol.n_boot", 1000)),
                            metric=first.get("arms.metric", "hit@10"))
    rep = SweepReport(
        results=results,
        alpha=alpha,
        sweep_id=sweep_id,
        tracking_uri=tracking_uri,
        experiment=exp_names.get(picked[0].info.experiment_id, "?"),
        parent_run_id=parents[0].info.run_id if parents else None,
        rows=rows,
        columns=build_columns(all_keys, outcome),
        outcome_metric=outcome,
        picked=picked_why,
    )
    rep.warnings = sweep_warnings(rep)
    return rep


def sweep_results(client, runs: list, *, alpha: float, n_boot: int, metric: str) -> dict:
    """Every protocol's sweep stage (``Protocol.aggregate``) over the sweep's runs: the protocols
    the jobs logged they ran (``protocol.run``), as at the sweep's end (``sweep_end.sweep_stages``)."""
    import tempfile

    from harness.runner.sweep_end import sweep_stages

    with tempfile.TemporaryDirectory(prefix="route-bench-report-") as tmp:
        return sweep_stages(client, runs, [], alpha, n_boot, metric, Path(tmp))


NO_DIFFERENCE = "no policy can be shown to differ from always-base in hits on these held-out questions"


def sweep_warnings(rep: SweepReport) -> list[str]:
    """Warning lines for what the held-out questions cannot show:
    - the base arm at ceiling (``heldout/base/<outcome>`` >= 0.999 in some job): the extra arm
      can rescue (almost) no question there, only harm;
    - ``heldout/extra_vs_base/min_p`` > the job's ``protocol.alpha``: the arms differ on too few
      held-out questions for any McNemar p vs always-base to reach alpha (protocol A)."""
    out = []
    if rep.outcome_metric:
        key = f"heldout/base/{rep.outcome_metric}"
        hits = [(r.run_name, r.metrics[key]) for r in rep.rows
                if key in r.metrics and r.metrics[key] >= CEILING]
        if hits:
            worst = max(v for _, v in hits)
            out.append(
                f"the base arm is at ceiling on the held-out questions: always-base "
                f"{display_name(rep.outcome_metric)} {worst:.4f} (>= {CEILING}) in {_jobs_text(hits)}; "
                f"the extra arm can rescue no question there, only harm"
            )
    key = "heldout/extra_vs_base/min_p"
    weak = [(r.run_name, r.metrics[key]) for r in rep.rows
            if key in r.metrics and not math.isnan(r.metrics[key]) and r.metrics[key] > r.alpha]
    if weak:
        lowest = min(v for _, v in weak)
        alphas = sorted({r.alpha for r in rep.rows if r.run_name in dict(weak)})
        out.append(
            f"{NO_DIFFERENCE} (the smallest reachable McNemar p vs always-base is {lowest:.4f} > "
            f"alpha {', '.join(f'{a:g}' for a in alphas)} in {_jobs_text(weak)})"
        )
    return out


def _jobs_text(items: list[tuple[str, float]]) -> str:
    names = sorted({n for n, _ in items})
    head = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} job{'s' if len(names) != 1 else ''} ({head})"


# ---------------------------------------------------------------- table + plot


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


def draw_frontiers(rep: SweepReport, axes) -> bool:
    """Draw one panel per policy (``frontier_panels``, ``harness.plots.draw_policy_panels``) into
    ``axes`` (at least as many as panels; the rest are hidden): its deployable frontier with a
    band of +- the logged sd over splits (``budget/<rho>/deployable/<outcome>_std``), its exact
    frontier dashed, the other policies in grey, random and the oracle at matched usage, the
    fixed decisions as single points with a marker each; x from 0 to 1 and one y-range that
    holds the references, shared by the panels. False if no data."""
    import numpy as np

    from harness.plots import draw_policy_panels, padded_limits

    if rep.outcome_metric is None:
        return False
    panels = frontier_panels(rep)
    fixed = fixed_points(rep)
    if not panels and not fixed:
        return False
    refs = {"random (matched usage)": (reference_points(rep, "random_matched"), ":", "dimgray"),
            "oracle (matched usage)": (reference_points(rep, "oracle_matched"), "-.", "black")}
    y_all = draw_policy_panels(axes, panels or [("fixed decisions", {})], main="deployable", second="exact",
                               references=refs, fixed=fixed, ylabel=display_name(rep.outcome_metric))
    lim = padded_limits(y_all)
    if lim is not None:
        for ax in np.ravel(axes):
            ax.set_ylim(*lim)
    return True


def plot_report_frontiers(rep: SweepReport, path: Path) -> bool:
    """Write the frontier PNG (small multiples, one panel per policy, one legend under them);
    False if no data."""
    if rep.outcome_metric is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.plots import legend_handles, panel_grid

    rows, cols = panel_grid(max(1, len(frontier_panels(rep))))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    try:
        if not draw_frontiers(rep, axes):
            return False
        handles = legend_handles(axes)
        fig.suptitle(f"sweep {rep.sweep_id} ({rep.experiment}): {display_name(rep.outcome_metric)} against "
                     f"extra-arm usage, one panel per policy, leaders first", fontsize=10)
        fig.tight_layout()
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(4, len(handles)), fontsize=8, frameon=False)
        atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=100, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return True


# ---------------------------------------------------------------- rendering


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
code{font-size:.9em}
""".strip()


def _slug(title: str) -> str:
    """The anchor GitHub gives a Markdown heading (lower case, punctuation dropped, spaces -> -)."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _ordered_results(rep: SweepReport) -> list[tuple[str, object]]:
    """The sweep stages' results, those with a lead (the answer, e.g. verdicts) first, then the
    others in the sweep's order."""
    items = list(rep.results.items())
    return [i for i in items if i[1].lead_as_markdown()] + [i for i in items if not i[1].lead_as_markdown()]


NO_VERDICT = ("No verdict: no job of this sweep ran protocol B (budget), which decides per cost and budget; "
              "each protocol's own results follow.")
JOBS_NOTE = ("Best value per column marked (highest, or lowest for violation rates) when one job holds it; "
             "a mark is a position, not a verdict: see the sections above for which differences are real.")


def _about(rep: SweepReport) -> list[tuple[str, str]]:
    rows = [("experiment", rep.experiment), ("tracking URI", rep.tracking_uri),
            ("parent run", rep.parent_run_id or "(none)"), ("jobs", str(len(rep.rows)))]
    return rows + ([("picked", rep.picked)] if rep.picked else [])


def _job_cells(rep: SweepReport, best: dict, r: JobRow) -> list[tuple[str, str, bool]]:
    """(column key, text, best?) per cell of a job's row."""
    cells = [("", x, False) for x in (r.run_name, r.policy, r.cost, r.status)]
    for c in rep.columns:
        is_best = c.key in best and c.key in r.metrics and r.metrics[c.key] == best[c.key]
        cells.append((c.key, cell_text(r, c), is_best))
    return cells


def render_markdown(rep: SweepReport, plot_name: str | None) -> str:
    """The report in Markdown: the verdicts first, then each protocol's section (decision tables
    first), the conclusions, the frontiers, the per-job table folded at the end."""
    best = best_values(rep)
    head = ["job", "policy", "cost", "status"] + [c.header for c in rep.columns]
    results = _ordered_results(rep)
    concluded = conclusion_lines(rep.results)
    toc = ["Verdicts", *[r.title for _, r in results], *(["Conclusions"] if concluded else []), "Frontiers",
           "Jobs", "About this report"]
    lines = [
        f"# Sweep {md_escape(rep.sweep_id)}",
        "",
        f"experiment {md_code(rep.experiment)} · {len(rep.rows)} jobs · parent run {md_code(rep.parent_run_id or '(none)')}",
        "",
        "Contents: " + " · ".join(f"[{md_escape(t)}](#{_slug(t)})" for t in toc),
        "",
        "## Verdicts",
        "",
    ]
    leads = [r.lead_as_markdown() for _, r in results if r.lead_as_markdown()]
    lines += [lead for lead in leads] if leads else [NO_VERDICT, ""]
    lines += [line for w in rep.warnings for line in (f"> **warning:** {md_escape(w)}", "")]
    for _, result in results:  # each protocol's sweep stage: the ones with a verdict first
        lines += [result.as_markdown()]
    if concluded:
        lines += ["## Conclusions", "", *[f"- {md_escape(x)}" for x in concluded], ""]
    lines += ["## Frontiers", ""]
    lines += [f"![frontiers]({plot_name})", ""] if plot_name else ["No frontier series were logged for this sweep.", ""]
    lines += ["## Jobs", "", f"<details><summary>One row per job ({len(rep.rows)} jobs, {len(head)} columns)"
              "</summary>", "", JOBS_NOTE, "",
              "| " + " | ".join(md_escape(h) for h in head) + " |", "|" + "---|" * len(head)]
    for r in rep.rows:
        cells = [f"**{t}**" if is_best else t for _, t, is_best in _job_cells(rep, best, r)]
        lines.append("| " + " | ".join(md_escape(x) for x in cells) + " |")
    lines += ["", "</details>", "", "## About this report", ""]
    lines += [f"- {k}: {md_code(v)}" if k != "picked" else f"- {md_escape(v)}" for k, v in _about(rep)]
    return "\n".join(lines + [""])


def render_html(rep: SweepReport, plot_bytes: bytes | None) -> str:
    """The report as one self-contained HTML page (inline stylesheet, the plot as a data URI),
    in the order of ``render_markdown``; every name and value escaped."""
    e = html.escape
    best = best_values(rep)
    head = ["job", "policy", "cost", "status"] + [c.header for c in rep.columns]
    results = _ordered_results(rep)
    concluded = conclusion_lines(rep.results)
    ids = {name: "protocol-" + re.sub(r"[^A-Za-z0-9_-]", "-", name) for name, _ in results}
    toc = [("verdicts", "Verdicts"), *[(ids[n], r.title) for n, r in results],
           *([("conclusions", "Conclusions")] if concluded else []), ("frontiers", "Frontiers"), ("jobs", "Jobs"),
           ("about", "About this report")]
    out = [
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
        f'<p class="meta">experiment <code>{e(rep.experiment)}</code> · {len(rep.rows)} jobs · parent run '
        f"<code>{e(rep.parent_run_id or '(none)')}</code></p>",
        '<nav aria-label="contents">Contents: ' + "".join(f'<a href="#{i}">{e(t)}</a>' for i, t in toc) + "</nav>",
        '<section id="verdicts">',
        "<h2>Verdicts</h2>",
    ]
    leads = [r.lead_as_html() for _, r in results if r.lead_as_html()]
    out += [f'<div class="scroll">\n{lead}</div>' for lead in leads] if leads else [f"<p>{e(NO_VERDICT)}</p>"]
    out += [f'<p class="warning"><strong>warning:</strong> {e(w)}</p>' for w in rep.warnings]
    out.append("</section>")
    for name, result in results:
        out += [f'<section id="{ids[name]}">', result.as_html(), "</section>"]
    if concluded:
        out += ['<section id="conclusions">', "<h2>Conclusions</h2>", "<ul>",
                *[f"<li>{e(x)}</li>" for x in concluded], "</ul>", "</section>"]
    out += ['<section id="frontiers">', "<h2>Frontiers</h2>"]
    if plot_bytes:
        b64 = base64.b64encode(plot_bytes).decode("ascii")
        out += [f'<p><img alt="frontiers" src="data:image/png;base64,{b64}"></p>',
                f'<p><a href="{PLOT_NAME}">{PLOT_NAME}</a></p>']
    else:
        out.append("<p>No frontier series were logged for this sweep.</p>")
    out += ["</section>", '<section id="jobs">', "<h2>Jobs</h2>",
            f"<details><summary>One row per job ({len(rep.rows)} jobs, {len(head)} columns)</summary>",
            f"<p>{e(JOBS_NOTE)}</p>", '<div class="scroll">', '<table id="comparison">',
            "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for r in rep.rows:
        cells = []
        for key, text, is_best in _job_cells(rep, best, r):
            attrs = (f' data-key="{e(key)}"' if key else "") + (' class="best"' if is_best else "")
            cells.append(f"<td{attrs}>{e(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out += ["</tbody>", "</table>", "</div>", "</details>", "</section>", '<section id="about">',
            "<h2>About this report</h2>", "<ul>",
            *[f"<li>{e(k)}: <code>{e(v)}</code></li>" if k != "picked" else f"<li>{e(v)}</li>" for k, v in _about(rep)],
            "</ul>", "</section>", "</body>", "</html>", ""]
    return "\n".join(out)


def write_report(rep: SweepReport, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write report.md, report.html and (if there is frontier data) frontier.png atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_path = out / PLOT_NAME
    has_plot = plot_report_frontiers(rep, plot_path)
    plot_bytes = plot_path.read_bytes() if has_plot else None
    paths = {
        "markdown": atomic_write_text(
            out / "report.md", render_markdown(rep, PLOT_NAME if has_plot else None)
        ),
        "html": atomic_write_text(out / "report.html", render_html(rep, plot_bytes)),
    }
    if has_plot:
        paths["plot"] = plot_path
    return paths


# ---------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    from harness.errors import argument_parser

    p = argument_parser(
        prog="python -m harness report",
        description="Write a comparison report (Markdown + HTML + frontier PNG) of one sweep.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--sweep", help="sweep id (tag route_bench.sweep_id)")
    which.add_argument("--latest", action="store_true", help="the sweep with the most recently started job run (in one experiment; see --experiment)")
    p.add_argument("--experiment", help="restrict to this MLflow experiment name")
    p.add_argument(
        "--tracking-uri",
        help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else {DEFAULT_TRACKING_URI})",
    )
    p.add_argument("--out", default="report", help="output directory (default: report/)")
    p.add_argument("--budget", type=float, help="decision table at this budget only (a value of the sweep's grid)")
    p.add_argument("--cost", type=float, help="decision table at this cost only (a cost.c of the sweep)")
    return p


def filter_decision_table(rep: SweepReport, budget: float | None, cost: float | None) -> None:
    """Restrict ``rep.decision_table`` to ``budget`` / ``cost`` (HarnessError naming the flag
    and the sweep's values when one is not in the sweep)."""
    if budget is None and cost is None:
        return
    from harness.protocols.decision_table import select

    table = rep.decision_table
    if table is None or not len(table):
        flag = "--budget" if budget is not None else "--cost"
        raise HarnessError(f"{flag}: sweep {rep.sweep_id} has no decision table (no protocol B results in its jobs)")
    from harness.protocols.builtin import decision_table_result

    rep.decision_filter = ", ".join(
        part for part in (f"budget {budget:g}" if budget is not None else "", f"cost {cost:g}" if cost is not None else "")
        if part
    )
    filtered = decision_table_result(select(table, budget=budget, cost=cost), rep.decision_filter)
    if filtered is None:
        rep.results.pop("budget", None)
    else:
        rep.results["budget"] = filtered


def check_store_reachable(uri: str, timeout: float = 5.0) -> None:
    """An ``http(s)://`` tracking server must accept a connection within ``timeout`` seconds (MLflow's
    client would retry for minutes); a StoreError naming ``--tracking-uri`` otherwise."""
    import socket
    from urllib.parse import urlparse

    from harness.errors import StoreError

    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "localhost", port), timeout=timeout):
            pass
    except OSError as exc:
        raise StoreError(f"--tracking-uri: tracking server {uri} is unreachable ({exc.strerror or exc})") from None


def check_flag_values(args: argparse.Namespace) -> None:
    """``--budget`` in (0, 1] and ``--cost`` a finite number >= 0, before the store is read (a
    value outside every sweep's grid is named by the flag, not by "no sweep")."""
    from harness.errors import UsageError

    if args.budget is not None and not (math.isfinite(args.budget) and 0 < args.budget <= 1):
        raise UsageError(f"--budget: must be a budget in (0, 1] (a value of the sweep's budget.grid), got {args.budget:g}")
    if args.cost is not None and not (math.isfinite(args.cost) and args.cost >= 0):
        raise UsageError(f"--cost: must be a finite cost.c >= 0 of the sweep, got {args.cost:g}")


def check_out_dir(out: str | os.PathLike) -> Path:
    """``--out`` can be created or written: the folder or its nearest existing parent is a writable
    folder. Checked before the store is read, so nothing is written on an error."""
    from harness.errors import StoreError

    path = Path(out)
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        kind = "a file" if probe.is_file() else "a device, FIFO or other special file"
        raise StoreError(f"--out {str(out)!r}: {str(probe)!r} is {kind}, expected a folder")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"--out {str(out)!r}: folder {str(probe)!r} is not writable (permission denied)")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness report``: one line ``error: <Kind>: ...`` and exit 2 on a bad flag, an
    unknown sweep, an empty or unreachable store or an unwritable ``--out``."""
    from harness.errors import StoreError, debugging, one_line

    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        check_flag_values(args)
        check_out_dir(args.out)
        uri = existing_store_uri(args.tracking_uri)
        check_store_reachable(uri)
        try:
            rep = load_sweep(uri, None if args.latest else args.sweep, args.experiment)
        except HarnessError:
            raise
        except Exception as exc:  # noqa: BLE001 - MLflow / SQLAlchemy errors of a store it cannot read
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise StoreError(f"--tracking-uri: cannot read tracking store {uri}: {type(exc).__name__}: {first}") from exc
        filter_decision_table(rep, args.budget, args.cost)
        try:
            paths = write_report(rep, args.out)
        except OSError as exc:
            from harness.errors import os_error_message

            raise StoreError(f"--out {str(args.out)!r}: cannot write the report: {os_error_message(exc)}") from exc
    except HarnessError as exc:
        if debugging():
            raise
        print(one_line(exc), file=sys.stderr)
        return 2
    if rep.picked:
        print(rep.picked)
    for w in rep.warnings:
        print(f"warning: {w}")
    if rep.decision_filter:
        from harness.protocols.decision_table_render import format_keyvalue

        print(f"Decision table of sweep {rep.sweep_id} ({rep.decision_filter}), one block per row")
        print(format_keyvalue(rep.decision_table))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
