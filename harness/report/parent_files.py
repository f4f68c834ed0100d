"""The sweep's picture and report on its parent run: ``frontier.png`` (every policy's frontier on
one cost/usage-vs-quality figure, the fixed decisions marked) and ``report.html`` / ``report.md``,
written by the sweep's end into the folder it logs on the parent run.

Why here: a team opens the parent run first, and the figure and the report used to exist only in
each job run and after ``python -m harness report``. They are that command's files
(``harness.report.write``) for the sweep just finished, built from the job runs and the sweep
stages' results the sweep's end already holds (``loading.build_report``): nothing is computed
twice, and the content equals ``python -m harness report --sweep <id>`` (``--latest`` adds the
line saying why it picked the sweep). Deterministic: the same runs give the same bytes.

Nothing here may end a sweep: a figure that cannot be drawn leaves report.html without it and a
note; a report that cannot be built leaves neither, and a note.
"""

from __future__ import annotations

from pathlib import Path

from harness.report.frontier_plot import PLOT_NAME, plot_report_frontiers
from harness.report.loading import build_report
from harness.report.write import write_pages

REPORT_FILES = ("report.html", "report.md", PLOT_NAME)  # what the parent run gets from here


def _why(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def write_parent_report(client, runs: list, results: dict, folder: Path, *, sweep_id: str, tracking_uri: str,
                        parent_run_id: str) -> list[str]:
    """Write the report of the sweep's job runs ``runs`` (one per job config) and its sweep stages'
    ``results`` into ``folder``; returns the notes (one line each) on what could not be written.
    Never raises: the sweep's parent run ends as its jobs decide."""
    if not runs:
        return ["[route-bench] report.html not written on the parent run: the sweep has no job run"]
    try:
        experiment = client.get_experiment(runs[0].info.experiment_id).name
        rep = build_report(client, runs, results, sweep_id=sweep_id, tracking_uri=tracking_uri,
                           experiment=experiment, parent_run_id=parent_run_id)
    except Exception as exc:  # noqa: BLE001 - the parent run's other files hold the results
        return [f"[route-bench] report.html and {PLOT_NAME} not written on the parent run: {_why(exc)}"]
    notes = []
    plot_path = Path(folder) / PLOT_NAME
    try:
        drawn = plot_report_frontiers(rep, plot_path)
    except Exception as exc:  # noqa: BLE001 - the report stands without its figure
        plot_path.unlink(missing_ok=True)
        drawn = False
        line = f"the frontier figure could not be drawn ({_why(exc)})"
        rep.warnings.append(line)
        notes.append(f"[route-bench] {line}: report.html on the parent run is without it")
    try:
        write_pages(rep, Path(folder), plot_path if drawn else None)
    except Exception as exc:  # noqa: BLE001 - as above
        for name in REPORT_FILES:
            (Path(folder) / name).unlink(missing_ok=True)
        notes.append(f"[route-bench] report.html not written on the parent run: {_why(exc)}")
    return notes
