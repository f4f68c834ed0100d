"""One sweep from the tracking store into a ``SweepReport``: its job runs (one per config, see
``pick_runs``), their metrics and frontier series, every protocol's sweep stage recomputed from
the jobs' artifacts, and the warnings about what the held-out questions cannot show."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

from harness.protocols.ceiling import CEILING  # one threshold for summaries, reports and the results page
from harness.report.columns import build_columns, display_name, outcome_metric_of
from harness.report.model import JobRow, SweepReport
from harness.store_schema import TAG_POLICY, TAG_ROLE, TAG_SWEEP_ID
from harness.tracking.store_reader import (
    SweepNotFound, experiments, metric_series, open_client, pick_latest_sweep, pick_runs, search_runs,
)
from harness.tracking.sweep_jobs import sweep_stages


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
    parents, children = _sweep_runs(client, exp_ids, sweep_id, experiment, tracking_uri)
    exp_names = {e.experiment_id: e.name for e in exps}
    picked = pick_runs(children)
    first = picked[0].data.params
    results = sweep_results(client, picked, alpha=float(first.get("protocol.alpha", 0.05)),
                            n_boot=int(first.get("protocol.n_boot", 1000)),
                            metric=first.get("arms.metric", "hit@10"))
    return build_report(client, picked, results, sweep_id=sweep_id, tracking_uri=tracking_uri,
                        experiment=exp_names.get(picked[0].info.experiment_id, "?"),
                        parent_run_id=parents[0].info.run_id if parents else None, picked_why=picked_why)


def build_report(client, picked: list, results: dict, *, sweep_id: str, tracking_uri: str, experiment: str,
                 parent_run_id: str | None, picked_why: str = "") -> SweepReport:
    """The report of the job runs ``picked`` (one per job config, ``pick_runs``; at least one) with
    their sweep stages' ``results``: what ``load_sweep`` reads, and what the sweep's end builds from
    the runs and results it already holds (``harness.report.parent_files``)."""
    all_keys: set[str] = set()
    for r in picked:
        all_keys |= set(r.data.metrics) if r.info.status == "FINISHED" else set()
    outcome = outcome_metric_of(all_keys)
    rep = SweepReport(
        results=results,
        alpha=float(picked[0].data.params.get("protocol.alpha", 0.05)),
        sweep_id=sweep_id,
        tracking_uri=tracking_uri,
        experiment=experiment,
        parent_run_id=parent_run_id,
        rows=[_job_row(client, r) for r in picked],
        columns=build_columns(all_keys, outcome),
        outcome_metric=outcome,
        picked=picked_why,
    )
    rep.warnings = sweep_warnings(rep)
    return rep


def _sweep_runs(client, exp_ids: list[str], sweep_id: str, experiment: str | None,
                tracking_uri: str) -> tuple[list, list]:
    """(parent runs, job runs) tagged with ``sweep_id``; SweepNotFound when there is no run, or
    no job run, to report on."""
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
    return parents, children


def _job_row(client, r) -> JobRow:
    """One job run as a row, with its frontier series."""
    # a run that did not finish shows its status with blank metrics: what it logged before
    # failing is not a result (and must not win a "best" mark)
    metrics = dict(r.data.metrics) if r.info.status == "FINISHED" else {}
    keys = [k for k in metrics if re.fullmatch(r"frontier/(exact|deployable|conservative)/[^/]+", k)]
    return JobRow(
        run_id=r.info.run_id,
        run_name=r.info.run_name or r.info.run_id,
        status=r.info.status,
        policy=r.data.tags.get(TAG_POLICY) or r.data.params.get("policy.name", "?"),
        cost=r.data.params.get("cost.c", ""),
        metrics=metrics,
        series=metric_series(client, r.info.run_id, sorted(keys)),
        alpha=float(r.data.params.get("protocol.alpha", 0.05)),
    )


def sweep_results(client, runs: list, *, alpha: float, n_boot: int, metric: str) -> dict:
    """Every protocol's sweep stage (``Protocol.aggregate``) over the sweep's runs: the protocols
    the jobs logged they ran (``protocol.run``), as at the sweep's end (``sweep_jobs.sweep_stages``)."""
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
