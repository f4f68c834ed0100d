"""The end of a sweep: one row per job, every protocol's sweep stage, the parent run closed.

Why apart from the callback: what a sweep concludes belongs to its protocols
(``Protocol.aggregate``, ``harness.protocols.sweep_stage``); this module only collects the job
runs, hands them to each protocol of the sweep, logs what comes back on the parent run and
prints it. A plugin protocol's sweep-level table thus reaches the console and the parent run
like the built-in ones (the policy comparison of protocol A, the decision table of B, the
gain comparison of C).

What the console gets (``print_outcome``): the count of jobs and failures, the results'
``headline`` tables (protocol B's verdict per cost and budget), the closing power line, where
the full tables are and the command that serves the store, every line at most 100 characters;
``verbose=true`` prints the job table and every protocol's full text first.

Jobs whose policy reads what the table lacks (``harness.preflight.not_applicable``) have no run:
they are counted (``N jobs, F failed, K not applicable``), listed once per reason on the console
and in the description, and named in ``not_applicable.csv``; they fail nothing.

What the parent run gets: a description (the page's first lines) with the verdict tables and
every protocol's conclusions, also as ``summary.txt``; the results' params (``verdict/...``); ``comparison.csv`` / ``.txt`` (one row per job: policy,
cost, seed, status, headline metrics) and, per protocol result, ``<table>.csv``, ``<table>.json`` (an MLflow
table for the UI's table view, where the protocol asks for it), ``<table>.txt`` and its other
files, and its metrics; the sweep's ``report.html`` / ``.md`` and ``frontier.png`` (the ``report``
command's files, ``harness.report.parent_files``; a figure or report that cannot be made is a
note, never the sweep's end). It ends FINISHED when every job finished, FAILED otherwise.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.runner.sweep_state import NOT_APPLICABLE
from harness.store_schema import TAG_POLICY, TAG_TABLE_KEY
from harness.tracking.sweep_jobs import sweep_stages

def comparison_columns(protocols: list[str], metric: str) -> list[tuple[str, str]]:
    """The comparison table's metric columns, (header, MLflow metric): the headline outputs the
    sweep's protocols declare (``Protocol.outputs``), each followed by its interval's ends; a
    protocol that cannot be made here (its own commands say why) adds none."""
    from harness.errors import HarnessError
    from harness.protocols.outputs import expand
    from harness.protocols.registry import display_order, make_protocol, protocol_names
    from harness.tracking.naming import mlflow_name

    known = set(protocol_names())
    cols = []
    for name in display_order([p for p in protocols if p in known]):
        try:
            outputs = make_protocol(name).outputs
        except HarnessError:
            continue
        for o in expand(outputs, mlflow_name(metric)):
            if o.headline and "{budget}" not in o.key:
                cols.append((o.short or o.label, o.key))
                cols += [("CI low", o.ci[0]), ("CI high", o.ci[1])] if o.ci else []
    return cols


def sweep_protocol_names(runs: list) -> list[str]:
    """Every protocol some job of the sweep ran (its logged ``protocol.run``), first seen first."""
    from harness.protocols.sweep_stage import parse_list_param

    return list(dict.fromkeys(n for r in runs for n in parse_list_param(r.data.params.get("protocol.run"))))


def comparison_frame(runs: list, metric: str = "hit@10", configured: list[str] = ()) -> Any:
    """One row per child run: policy, cost, status and the headline metrics of the protocols
    the sweep ran (``comparison_columns``)."""
    import pandas as pd

    from harness.protocols.sweep_comparisons import short_cost

    columns = comparison_columns(list(dict.fromkeys([*configured, *sweep_protocol_names(runs)])), metric)
    rows = []
    for r in runs:
        row = {
            "policy": r.data.tags.get(TAG_POLICY, ""),
            "cost": short_cost(r.data.params.get("cost.c", "")),
            "seed": r.data.params.get("seed", ""),
            "status": r.info.status,
        }
        for header, name in columns:
            row[header] = r.data.metrics.get(name)
        row["run"] = r.info.run_id[:8]
        rows.append(row)
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["_c"] = pd.to_numeric(frame["cost"], errors="coerce")
        frame = frame.sort_values(["policy", "_c", "seed"], kind="stable").drop(columns="_c").reset_index(drop=True)
    return frame


def frame_text(frame: Any) -> str:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.float_format", "{:.4f}".format):
        return frame.to_string(index=False) if len(frame) else "(no job runs)"


@dataclass
class SweepOutcome:
    """What the sweep's end found: the job rows, the failures, every protocol's result."""

    frame: Any
    runless: list[dict]
    failed: int
    status: str
    results: dict = field(default_factory=dict)  # protocol -> SweepResult
    not_applicable: list[dict] = field(default_factory=list)  # records of jobs whose policy the table cannot feed
    notes: list[str] = field(default_factory=list)  # what could not be logged
    warnings: list[str] = field(default_factory=list)  # what the tables themselves cannot show
    report: bool = False  # report.html (every table and the frontier figure) is on the parent run


def table_warnings(runs: list, metric: str) -> list[str]:
    """The sweep's data warnings, once per outcome table its finished jobs read: nothing to route
    (the two arms agree on every question) and a base arm at ceiling (nothing can be rescued)."""
    from harness.preflight import ROUTING_SETTINGS
    from harness.protocols.ceiling import ceiling_warning
    from harness.tracking.naming import mlflow_name

    out: list[str] = []
    seen: set[str] = set()
    for r in runs:
        m, key = r.data.metrics, r.data.tags.get(TAG_TABLE_KEY, "")
        if r.info.status != "FINISHED" or key in seen or "table/rescues" not in m:
            continue
        seen.add(key)
        if m["table/rescues"] + m.get("table/harms", 0.0) == 0:
            out.append(f"warning: nothing to route: the arms agree on every question of table {key[:12]} "
                       f"(0 rescues, 0 harms); check {ROUTING_SETTINGS}")
        base = m.get(f"table/base/{mlflow_name(metric)}")
        line = ceiling_warning(metric, base, f"table {key[:12]}") if base is not None else None
        if line:
            out.append(line)
    return list(dict.fromkeys(out))


def collect(runs: list, records: list[dict], metric: str, configured: list[str] = ()) -> SweepOutcome:
    """The job rows and the parent run's status: FAILED when a job failed (with or without a
    run: ``records`` of jobs the store refused) or did not end."""
    frame = comparison_frame(runs, metric, configured)
    runless = [rec for rec in records if rec.get("status") == "FAILED" and not rec.get("run_id")]
    failed = (int((frame["status"] == "FAILED").sum()) if len(frame) else 0) + len(runless)
    unfinished = int((~frame["status"].isin(["FINISHED", "FAILED"])).sum()) if len(frame) else 0
    return SweepOutcome(frame, runless, failed, "FAILED" if failed or unfinished else "FINISHED",
                        warnings=table_warnings(runs, metric),
                        not_applicable=[rec for rec in records if rec.get("status") == NOT_APPLICABLE])


def count_line(outcome: SweepOutcome) -> str:
    """``N jobs, F failed`` and, when some job's policy could not run on the table, ``, K not
    applicable``: every job of the sweep counted once."""
    n = len(outcome.frame) + len(outcome.runless) + len(outcome.not_applicable)
    na = f", {len(outcome.not_applicable)} not applicable" if outcome.not_applicable else ""
    return f"{n} jobs, {outcome.failed} failed{na}"


def not_applicable_lines(outcome: SweepOutcome) -> list[str]:
    """One line per reason (each names the policy and the feature set it lacks) with its count
    of jobs, in the order the jobs ran."""
    counts: dict[str, int] = {}
    for rec in outcome.not_applicable:
        reason = str(rec.get("reason") or "?")
        counts[reason] = counts.get(reason, 0) + 1
    return [f"not applicable ({n} job{'s' if n > 1 else ''}): {reason}" for reason, n in counts.items()]


def not_applicable_frame(outcome: SweepOutcome) -> Any:
    """``not_applicable.csv``: run name and reason of each job not applicable to the table."""
    import pandas as pd

    return pd.DataFrame([{"run_name": rec.get("run_name"), "reason": rec.get("reason")} for rec in outcome.not_applicable],
                        columns=["run_name", "reason"])


def conclusions(outcome: SweepOutcome) -> str:
    """The parent run's description and summary: the verdict tables (each result's
    ``headline``) and the closing lines first, as the console shows them, then every
    protocol's sweep-level text."""
    from harness.protocols.sweep_stage import conclusion_lines

    parts = [r.text for r in outcome.results.values()]
    closing = conclusion_lines(outcome.results)  # what the console ends with: the description leads with it
    if closing:
        parts.insert(0, "\n".join(closing))
    if outcome.not_applicable:  # what the verdicts leave out, said before them
        parts.insert(0, "\n".join(not_applicable_lines(outcome)))
    heads = [r.headline for r in outcome.results.values() if r.headline]
    return "\n\n".join(heads + parts) or "(no protocol of this sweep has a sweep-level result)"


def experiment_lines(outcome: SweepOutcome) -> list[str]:
    """What the experiment's description holds after a sweep: one line counting the verdicts
    (the line the MLflow UI shows while the description is folded), the verdict table(s) as the
    console prints them and the closing power line; without verdicts, the conclusion lines."""
    from harness.protocols.sweep_stage import conclusion_lines

    closing = conclusion_lines(outcome.results)
    heads = [line for r in outcome.results.values() if r.headline for line in r.headline.splitlines()]
    if not heads:
        return closing
    summary = []
    for r in outcome.results.values():
        v = r.tables.get("verdicts")
        if v is not None and len(v) and "kind" in v.columns:
            n = {k: int((v["kind"] == k).sum()) for k in ("deploy", "no router", "cannot tell")}
            summary.append(f"Verdicts: {n['deploy']} deploy a router, {n['no router']} deploy no router, "
                           f"{n['cannot tell']} cannot tell (of {len(v)} cost x budget cells)")
    return summary + heads + [line for line in closing if line.startswith("Overall")]


def write_results(outcome: SweepOutcome, folder: Path) -> None:
    """The parent run's files: the job rows, the conclusions (``summary.txt``) and every
    result's tables, texts and files."""
    outcome.frame.to_csv(folder / "comparison.csv", index=False)
    (folder / "comparison.txt").write_text(frame_text(outcome.frame) + "\n", encoding="utf-8")
    (folder / "summary.txt").write_text(conclusions(outcome) + "\n", encoding="utf-8")
    if outcome.not_applicable:
        not_applicable_frame(outcome).to_csv(folder / "not_applicable.csv", index=False)
    for result in outcome.results.values():
        for name, table in result.tables.items():
            table.to_csv(folder / f"{name}.csv", index=False)
        for name in result.text_files:
            (folder / f"{name}.txt").write_text(result.text + "\n", encoding="utf-8")
        for name, text in result.files.items():
            (folder / name).write_text(text, encoding="utf-8")


def log_results(tracker: Any, run_id: str, outcome: SweepOutcome, title: str,
                report: Callable[[Path], list[str]] | None = None) -> None:
    """Files, MLflow tables (the UI's table view) and metrics of the results on the parent run,
    and its description: ``title`` and the conclusions, the first thing its page shows.
    ``report`` writes the sweep's report and frontier figure into the same folder (``parent_report``)
    and returns its notes."""
    from harness.tracking.run_notes import description, experiment_description

    with tempfile.TemporaryDirectory(prefix="route-bench-sweep-end-") as tmp:
        write_results(outcome, Path(tmp))
        if report is not None:
            outcome.notes += report(Path(tmp))
            outcome.report = (Path(tmp) / "report.html").is_file()
        tracker.log_artifacts(run_id, tmp)
    tracker.set_note(run_id, description(f"{title}: {count_line(outcome)} -> {outcome.status}", conclusions(outcome)))
    tracker.set_experiment_note(run_id, experiment_description(title, run_id, experiment_lines(outcome)))
    params = {k: v for r in outcome.results.values() for k, v in r.params.items()}
    if params:
        try:
            tracker.log_params(run_id, params)
        except Exception:  # noqa: BLE001 - a rerun whose verdict changed: params are immutable, tags are not
            try:
                tracker.set_tags(run_id, params)
                outcome.notes.append("[route-bench] the verdicts differ from this parent run's earlier params: "
                                     "logged as tags verdict/... instead")
            except Exception as exc:  # noqa: BLE001 - the verdicts are in the description and verdicts.csv
                outcome.notes.append(f"[route-bench] verdict params not logged: {exc}")
    for protocol, result in outcome.results.items():
        for job_run, tags in result.job_tags.items():
            try:
                tracker.set_tags(job_run, tags)
            except Exception as exc:  # noqa: BLE001 - the verdicts are on the parent run
                outcome.notes.append(f"[route-bench] {protocol}'s tags not set on job run {job_run}: {exc}")
                break
        for name in result.ui_tables:
            try:
                tracker.log_table(run_id, result.tables[name], f"{name}.json")
            except Exception as exc:  # noqa: BLE001 - the CSV (and the protocol's other files) are logged
                outcome.notes.append(f"[route-bench] {name} not logged as an MLflow table: {exc}")
        if result.metrics:
            tracker.log_metrics(run_id, [(k, float(v), 0) for k, v in result.metrics.items()])


def parent_report(tracker: Any, parent_run_id: str, runs: list, outcome: SweepOutcome,
                  sweep_id: str) -> Callable[[Path], list[str]]:
    """What writes the sweep's ``report.html`` / ``.md`` and ``frontier.png`` into a folder
    (``harness.report.parent_files``: the ``report`` command's files, from these runs and results)."""
    from harness.report.parent_files import write_parent_report

    def write(folder: Path) -> list[str]:
        return write_parent_report(tracker.client, runs, outcome.results, folder, sweep_id=sweep_id,
                                   tracking_uri=tracker.uri, parent_run_id=parent_run_id)

    return write


def close(tracker: Any, parent_run_id: str, runs: list, records: list[dict], *, configured: list[str],
          alpha: float, n_boot: int, metric: str, title: str = "Sweep", sweep_id: str | None = None) -> SweepOutcome:
    """Compute and log the sweep's end on the parent run (with ``sweep_id``: its report and frontier
    figure too), then end it (always, also when the logging fails: the exception propagates after
    the run is ended)."""
    outcome = collect(runs, records, metric, configured)
    try:
        with tempfile.TemporaryDirectory(prefix="route-bench-sweep-jobs-") as tmp:
            outcome.results = sweep_stages(tracker.client, runs, configured, alpha, n_boot, metric, Path(tmp))
        report = parent_report(tracker, parent_run_id, runs, outcome, sweep_id) if sweep_id else None
        log_results(tracker, parent_run_id, outcome, title, report)
    finally:
        tracker.end_run(parent_run_id, outcome.status)
    return outcome


def print_outcome(outcome: SweepOutcome, sweep_id: str, uri: str | None, *, verbose: bool = False,
                  experiment_id: str | None = None, parent_run_id: str | None = None) -> None:
    """The sweep's last lines, each at most 100 characters (``harness.protocols.verdict_render.WIDTH``):
    the count of jobs and failures, the verdict table(s) (every result's ``headline``; a sweep
    without one: the protocols' conclusions), the closing power line and the notes, then where
    the full tables are, the experiment's runs table, the parent run's address and the one
    command that serves it.
    ``verbose``: the job table and every protocol's full text first, as before."""
    from harness.protocols.verdict_render import wrap

    print(f"\n[route-bench] sweep {sweep_id}: {count_line(outcome)} -> parent run {outcome.status}")
    for line in not_applicable_lines(outcome):
        print("\n".join(wrap("  " + line)))
    if verbose:
        _print_full_texts(outcome)
    elif len(outcome.frame):
        _print_unfinished_jobs(outcome.frame)
    for rec in outcome.runless:
        error = str(rec.get("error") or "").splitlines()
        print(f"  {rec.get('run_name')}: FAILED without a run: {error[0] if error else '?'}"[:100])
    lines = _closing_lines(outcome, verbose)
    if lines:
        print("\n" + "\n".join(lines))
    for note in outcome.notes:
        print("\n".join(wrap(note)))
    print_where(uri, experiment_id, parent_run_id, _table_files(outcome.results), report=outcome.report)
    sys.stdout.flush()


def _print_full_texts(outcome: SweepOutcome) -> None:
    """``verbose``: the job table, every protocol's full text and their conclusions."""
    print(frame_text(outcome.frame))
    for result in outcome.results.values():
        print("\n" + result.text)
    lines = [line for r in outcome.results.values() if r.conclusion for line in r.conclusion.splitlines()]
    if lines:
        print("\nConclusions (what these questions can and cannot show):")
        print("\n".join(lines))


def _print_unfinished_jobs(frame: Any) -> None:
    """The first five jobs that did not finish, and how many more."""
    failed = frame[frame["status"] != "FINISHED"]
    for r in failed.head(5).itertuples():
        print(f"  {r.status}: {r.policy} c={r.cost} seed={r.seed} (run {r.run})")
    if len(failed) > 5:
        print(f"  ... and {len(failed) - 5} more (comparison.csv on the parent run)")


def _closing_lines(outcome: SweepOutcome, verbose: bool) -> list[str]:
    """The verdict table(s) (else each protocol's conclusion or text, unless ``verbose`` printed
    them), the closing power line and the data warnings, wrapped to the console's width."""
    from harness.protocols.sweep_stage import conclusion_lines
    from harness.protocols.verdict_render import wrap

    heads = [r.headline for r in outcome.results.values() if r.headline]
    lines = []
    for result in outcome.results.values():
        if heads:
            lines += result.headline.splitlines() if result.headline else []
        elif verbose:
            continue  # printed above
        elif result.conclusion:
            lines += [w for line in result.conclusion.splitlines() for w in wrap(line)]
        elif result.text:
            lines += result.text.splitlines()
    closing = conclusion_lines({"": _closing_only(outcome.results)})
    lines += [w for line in closing for w in wrap(line)]
    lines += [w for line in outcome.warnings for w in wrap(line)]
    return lines


def _closing_only(results: dict) -> Any:
    """A stand-in result holding every result's open comparisons, for the closing line alone."""
    from harness.protocols.sweep_stage import SweepResult

    return SweepResult(title="", open_comparisons=[o for r in results.values() for o in r.open_comparisons])


def serve_command(uri: str | None) -> str | None:
    """``mlflow ui --backend-store-uri <store>``, the store relative to the current folder when
    it lies under it (what a person types from there); None for a tracking server."""
    import os

    if not uri or not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):]
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:  # another drive
        pass
    return f"mlflow ui --backend-store-uri sqlite:///{path}"


def _table_files(results: dict) -> list[str]:
    """The parent run's files a person opens first: the verdicts, the per-budget decision
    tables (as one pattern), each other protocol's text table, else its first file."""
    names: list[str] = []
    for result in results.values():
        files = result.artifact_names()
        pages = [f for f in files if f.startswith("decision_table_rho")]
        firsts = [f for f in files if f == "verdicts.md"] + (["decision_table_rho<budget>.md"] if pages else [])
        names += firsts or [f for f in files if f.endswith(".txt")][:1] or files[:1]
    return names


def print_where(uri: str | None, experiment_id: str | None, parent_run_id: str | None, tables: list[str],
                report: bool = False) -> None:
    """Where to look: the full tables (``report``: report.html on the parent run holds them all,
    with the frontier figure), the experiment's runs table, the parent run's address and the
    command that serves it."""
    from harness.protocols.verdict_render import wrap
    from harness.tracking.naming import experiment_ui_path

    print()
    if report:
        print("Full tables and the frontier figure: report.html on the parent run; verbose=true prints the tables.")
    elif tables:
        print("\n".join(wrap(f"Full tables: {', '.join(tables)} on the parent run, and `python -m harness report "
                             "--latest --out report/`; verbose=true prints them here.")))
    serve = serve_command(uri)
    base = "http://127.0.0.1:5000" if serve else (uri or "").rstrip("/")
    if experiment_id:
        print(f"Experiment: {base}/{experiment_ui_path(experiment_id)}")
    if experiment_id and parent_run_id:
        print(f"Parent run: {base}/#/experiments/{experiment_id}/runs/{parent_run_id}")
    if serve:
        print(f"Serve it:   {serve}")
    else:
        print(f"Results are in the tracking server {uri}")
