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
- Frontier plots use the logged series ``frontier/<frontier>/<metric>`` (step = budget in %)
  against ``frontier/<frontier>/realized_usage`` at the same step; where a run lacks the series
  the scalar metrics ``budget/<rho>/<frontier>/...`` are used; for the exact frontier without a
  usage series, usage = budget (the exact frontier spends floor(rho * n) calls). Bands: +- the
  logged sd over splits (``budget/<rho>/<frontier>/<metric>_std``) where present; references:
  random and oracle at the exact frontier's usage (mean over jobs); fixed decisions
  (``budget/fixed/...``) as points; x from 0 to 1, y holding the references.
- ``--latest``: the sweep with the newest job run, within one experiment (that run's, or
  ``--experiment``'s); the report and stdout say which and why, and name the other experiments
  holding sweeps.
- Warnings (report and stdout): the base arm at ceiling on held-out (``heldout/base/<metric>``
  >= 0.999 in a job), and a held-out set that cannot resolve any hit difference vs always-base
  (``heldout/extra_vs_base/min_p`` > the job's ``protocol.alpha``).
- The HTML embeds the PNG as a data URI (one self-contained file to share); the Markdown links
  the PNG next to it.
- After the jobs' table, one section per protocol that has a sweep stage
  (``Protocol.aggregate``, ``harness.protocols.sweep_stage``), recomputed from the jobs'
  artifacts, in the order the jobs ran them: protocol A's "Policy vs policy", B's decision table,
  C's gain comparison, and any plugin protocol's own table. The decision table is included whole; ``--budget`` and / or ``--cost`` restrict it to those values (the fixed
  decisions of the selected cost stay, as references) and print it, every column, to stdout.
  A value the sweep does not have is one error line naming the flag and the values it has
  (exit 2), and nothing is written.
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

from harness.errors import ConfigError, HarnessError
from harness.io import atomic_write, atomic_write_text
from harness.protocols.threshold import CEILING  # one threshold for summaries, reports and the results page
from harness.protocols.sweep_stage import conclusion_lines
from harness.tracking.mlflow_tracker import pick_runs

SWEEP_TAG = "route_bench.sweep_id"
ROLE_TAG = "route_bench.role"
POLICY_TAG = "route_bench.policy"
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
FRONTIERS_PLOTTED = ("exact", "deployable")
TIE_TOL = 1e-12
PLOT_NAME = "frontier.png"
_NON_OUTCOME = {
    "utility", "realized_usage", "usage_error", "violation_rate", "tolerance_overshoot_rate",
    "target_usage", "extra_calls", "random_matched", "oracle_matched",
}


class SweepNotFound(HarnessError):
    """No run carries the requested sweep id (or no sweep at all, for --latest)."""


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


# ---------------------------------------------------------------- tracking store access


def existing_store_uri(explicit: str | None) -> str:
    """--tracking-uri, else $MLFLOW_TRACKING_URI, else the harness default local store.

    A SQLite URI whose file does not exist is an error (reading must not create an empty DB).
    """
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    from harness.config import tracking_uri_problem

    # the key the URI came from: the option, the environment, or the default store
    key = ("--tracking-uri" if explicit else "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI")
           else "--tracking-uri (default)")
    problem = tracking_uri_problem(uri)
    if problem:
        raise ConfigError(key, problem)
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if not db.is_file():
            raise ConfigError(key, f"tracking store {uri} does not exist (no file {db})")
    return uri


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _experiments(client, name: str | None, uri: str) -> list:
    if name is not None:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise ConfigError("--experiment", f"no experiment named {name!r} in {uri}")
        return [exp]
    out, token = [], None
    while True:
        page = client.search_experiments(max_results=1000, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def _search(client, exp_ids: list[str], filter_string: str, order_by=None) -> list:
    out, token = [], None
    while True:
        page = client.search_runs(
            exp_ids, filter_string=filter_string, max_results=1000,
            order_by=order_by, page_token=token,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def _newest_job(client, exp_ids: list[str]):
    runs = client.search_runs(
        exp_ids, filter_string=f"tags.`{ROLE_TAG}` = 'job'", max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    return runs[0] if runs and runs[0].data.tags.get(SWEEP_TAG) else None


def find_latest_sweep_id(client, exp_ids: list[str], uri: str) -> str:
    """The sweep whose newest job run started last (a rerun reuses its sweep's parent run, so
    the parent's own start time would point at the sweep first launched, not the last one run)."""
    run = _newest_job(client, exp_ids)
    if run is None:
        raise SweepNotFound(f"no sweep (job run tagged {SWEEP_TAG}) in tracking store {uri}")
    return run.data.tags[SWEEP_TAG]


def pick_latest_sweep(client, exps: list, uri: str, explicit: bool) -> tuple[str, object, str]:
    """``--latest``: (sweep id, its experiment, why). The sweep whose newest job run started
    last, in ONE experiment (the one of that run; with ``--experiment``, that one): a sweep id is
    only compared within its experiment. ``why`` names the experiment and, without
    ``--experiment``, the other experiments that hold sweeps."""
    run = _newest_job(client, [e.experiment_id for e in exps])
    if run is None:
        raise SweepNotFound(f"no sweep (job run tagged {SWEEP_TAG}) in tracking store {uri}")
    sweep_id = run.data.tags[SWEEP_TAG]
    exp = next(e for e in exps if e.experiment_id == run.info.experiment_id)
    why = f"picked sweep {sweep_id}: the sweep with the most recent job run in experiment {exp.name!r}"
    if explicit:
        return sweep_id, exp, why + " (--experiment)"
    others = [e.name for e in exps
              if e.experiment_id != exp.experiment_id and _newest_job(client, [e.experiment_id]) is not None]
    if others:
        why += (f"; other experiments: {', '.join(repr(n) for n in sorted(others))} "
                f"({len(others) + 1} experiments hold sweeps; --experiment NAME picks the latest of one)")
    else:
        why += "; other experiments: none hold sweeps"
    return sweep_id, exp, why


def _series(client, run_id: str, keys: list[str]) -> dict[str, list[tuple[int, float]]]:
    out = {}
    for key in keys:
        hist = client.get_metric_history(run_id, key)
        by_step = {}
        for m in sorted(hist, key=lambda m: (m.step, m.timestamp)):
            by_step[int(m.step)] = float(m.value)  # last logged value per step wins
        out[key] = sorted(by_step.items())
    return out


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
    client = _client(tracking_uri)
    exps = _experiments(client, experiment, tracking_uri)
    exp_ids = [e.experiment_id for e in exps]
    if not exp_ids:
        raise SweepNotFound(f"tracking store {tracking_uri} has no experiments")
    picked_why = ""
    if sweep_id is None:
        sweep_id, exp, picked_why = pick_latest_sweep(client, exps, tracking_uri, experiment is not None)
        exp_ids = [exp.experiment_id]
    quoted = sweep_id.replace("'", "\\'")
    runs = _search(client, exp_ids, f"tags.`{SWEEP_TAG}` = '{quoted}'")
    if not runs:
        where = f" experiment {experiment!r} of" if experiment else ""
        raise SweepNotFound(
            f"sweep {sweep_id!r} not found: no run tagged {SWEEP_TAG}={sweep_id} in{where} "
            f"tracking store {tracking_uri}"
        )
    parents = [r for r in runs if r.data.tags.get(ROLE_TAG) == "sweep"]
    children = [r for r in runs if r.data.tags.get(ROLE_TAG) == "job"]
    if not children:
        raise SweepNotFound(
            f"sweep {sweep_id!r} in tracking store {tracking_uri} has no job runs "
            f"(tag {ROLE_TAG}=job)"
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
                policy=r.data.tags.get(POLICY_TAG) or r.data.params.get("policy.name", "?"),
                cost=r.data.params.get("cost.c", ""),
                metrics=metrics,
                series=_series(client, r.info.run_id, sorted(keys)),
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


LINE_STYLES = ("-", "--", "-.", ":")


def line_style(i: int) -> tuple:
    """Colour and line style of the i-th curve: tab10's qualitative colours, then the same
    colours with the next line style (so curves 1 and 11 differ by style)."""
    import matplotlib.pyplot as plt

    return plt.get_cmap("tab10")(i % 10), LINE_STYLES[(i // 10) % len(LINE_STYLES)]


def draw_frontiers(rep: SweepReport, axes) -> bool:
    """Draw the panels (one per frontier in FRONTIERS_PLOTTED) into ``axes``; False if no data.

    Per curve: the mean over splits with a band of +- the logged sd over splits (where the job
    logged ``budget/<rho>/<frontier>/<outcome>_std``); references random and oracle at matched
    usage; fixed decisions as single points; x from 0 to 1 and a y-range that holds the
    references (shared by the panels)."""
    from harness.plots import padded_limits

    if rep.outcome_metric is None:
        return False
    data = {fr: _curves(rep, fr) for fr in FRONTIERS_PLOTTED}
    fixed = fixed_points(rep)
    if not any(data.values()) and not fixed:
        return False
    refs = {"random (matched usage)": (reference_points(rep, "random_matched"), ":", "dimgray"),
            "oracle (matched usage)": (reference_points(rep, "oracle_matched"), "-.", "black")}
    labels = list(dict.fromkeys(label for lines in data.values() for label, _ in lines))
    style = {lab: line_style(i) for i, lab in enumerate(labels)}
    y_all: list[float] = []
    for ax, fr in zip(axes, FRONTIERS_PLOTTED):
        for label, pts in data[fr]:
            xs, ys, sds = zip(*pts)
            color, ls = style[label]
            if any(not math.isnan(v) for v in sds):
                sd = [0.0 if math.isnan(v) else v for v in sds]
                lo, hi = [y - d for y, d in zip(ys, sd)], [y + d for y, d in zip(ys, sd)]
                ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
                y_all += lo + hi
            ax.plot(xs, ys, marker="o", ms=3.5, color=color, linestyle=ls, label=label)
            y_all += list(ys)
        for name, (pts, ls, color) in refs.items():
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, linestyle=ls, color=color, lw=1.6, label=name)
                y_all += list(ys)
        for policy, x, y in fixed:
            ax.plot([x], [y], marker="*", ms=12, linestyle="none", color="tab:red", clip_on=False,
                    label=f"{policy} (fixed, usage {x:g})")
            y_all.append(y)
        banded = bool(ax.collections)
        ax.set_title(f"{fr} frontier" + (" (bands: +- sd over splits)" if banded else ""), fontsize=10)
        ax.set_xlabel("realized usage of the extra arm")
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
    lim = padded_limits(y_all)
    if lim is not None:
        for ax in axes:
            ax.set_ylim(*lim)
    axes[0].set_ylabel(display_name(rep.outcome_metric))
    return True


def plot_report_frontiers(rep: SweepReport, path: Path) -> bool:
    """Write the frontier PNG (one panel per frontier, one line per distinct curve, the legend
    beside the panels); False if no data."""
    if rep.outcome_metric is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(FRONTIERS_PLOTTED), figsize=(12, 4.6), sharey=True)
    try:
        if not draw_frontiers(rep, axes):
            return False
        handles = {h.get_label(): h for ax in axes for h in ax.get_lines()}
        fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5),
                   fontsize=8, frameon=False)
        fig.suptitle(f"sweep {rep.sweep_id} ({rep.experiment})")
        fig.tight_layout()
        atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return True


# ---------------------------------------------------------------- rendering


def _md_escape(s: str) -> str:
    from harness.protocols.decision_table import md_escape

    return md_escape(s)


def render_markdown(rep: SweepReport, plot_name: str | None) -> str:
    best = best_values(rep)
    head = ["job", "policy", "cost", "status"] + [c.header for c in rep.columns]
    lines = [
        f"# Sweep {rep.sweep_id}",
        "",
        f"- experiment: `{rep.experiment}`",
        f"- tracking URI: `{rep.tracking_uri}`",
        f"- parent run: `{rep.parent_run_id or '(none)'}`",
        f"- jobs: {len(rep.rows)}",
        *([f"- {rep.picked}"] if rep.picked else []),
        "",
        *[line for w in rep.warnings for line in (f"> **warning:** {_md_escape(w)}", "")],
        "Best value per column in **bold** (highest, or lowest for violation rates) when one job holds it; "
        "see \"Policy vs policy\" for which differences are real.",
        "",
        "| " + " | ".join(_md_escape(h) for h in head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rep.rows:
        cells = [r.run_name, r.policy, r.cost, r.status]
        for c in rep.columns:
            t = cell_text(r, c)
            if c.key in best and c.key in r.metrics and r.metrics[c.key] == best[c.key]:
                t = f"**{t}**"
            cells.append(t)
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    lines.append("")
    for result in rep.results.values():  # each protocol's sweep stage, in the sweep's order
        lines += [result.as_markdown()]
    concluded = conclusion_lines(rep.results)
    if concluded:
        lines += ["## Conclusions", "", *[f"- {_md_escape(x)}" for x in concluded], ""]
    if plot_name:
        lines += ["## Frontiers", "", f"![frontiers]({plot_name})", ""]
    else:
        lines += ["No frontier series were logged for this sweep.", ""]
    return "\n".join(lines)


def render_html(rep: SweepReport, plot_bytes: bytes | None) -> str:
    e = html.escape
    best = best_values(rep)
    head = ["job", "policy", "cost", "status"] + [c.header for c in rep.columns]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>Sweep {e(rep.sweep_id)}</title>",
        "<style>table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 6px}"
        "td.best{font-weight:bold;background:#e6f4e6}p.warning{background:#fff3cd;padding:4px 8px}</style>",
        "</head>",
        "<body>",
        f"<h1>Sweep {e(rep.sweep_id)}</h1>",
        "<ul>",
        f"<li>experiment: <code>{e(rep.experiment)}</code></li>",
        f"<li>tracking URI: <code>{e(rep.tracking_uri)}</code></li>",
        f"<li>parent run: <code>{e(rep.parent_run_id or '(none)')}</code></li>",
        f"<li>jobs: {len(rep.rows)}</li>",
        *([f"<li>{e(rep.picked)}</li>"] if rep.picked else []),
        "</ul>",
        *[f'<p class="warning"><strong>warning:</strong> {e(w)}</p>' for w in rep.warnings],
        "<p>Best value per column marked (highest, or lowest for violation rates) when one job holds it; "
        "see Policy vs policy for which differences are real.</p>",
        '<table id="comparison">',
        "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr></thead>",
        "<tbody>",
    ]
    for r in rep.rows:
        cells = [f"<td>{e(x)}</td>" for x in (r.run_name, r.policy, r.cost, r.status)]
        for c in rep.columns:
            is_best = c.key in best and c.key in r.metrics and r.metrics[c.key] == best[c.key]
            cls = ' class="best"' if is_best else ""
            cells.append(f'<td data-key="{e(c.key)}"{cls}>{e(cell_text(r, c))}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out += ["</tbody>", "</table>"]
    out += [result.as_html() for result in rep.results.values()]
    concluded = conclusion_lines(rep.results)
    if concluded:
        out += ["<h2>Conclusions</h2>", "<ul>", *[f"<li>{e(x)}</li>" for x in concluded], "</ul>"]
    if plot_bytes:
        b64 = base64.b64encode(plot_bytes).decode("ascii")
        out += [
            "<h2>Frontiers</h2>",
            f'<p><img alt="frontiers" src="data:image/png;base64,{b64}"></p>',
            f'<p><a href="{PLOT_NAME}">{PLOT_NAME}</a></p>',
        ]
    else:
        out.append("<p>No frontier series were logged for this sweep.</p>")
    out += ["</body>", "</html>", ""]
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
        from harness.protocols.decision_table import format_text

        print(f"Decision table of sweep {rep.sweep_id} ({rep.decision_filter})")
        print(format_text(rep.decision_table))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
