"""``python -m harness report``: the flags, the checks made before the store is read (so nothing
is written on an error), and the command itself: load, filter, write, print where."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from pathlib import Path
from typing import Sequence
from urllib.parse import urlparse

from harness.errors import HarnessError, StoreError, UsageError, argument_parser, debugging, one_line, os_error_message
from harness.protocols.decision_table_render import format_keyvalue
from harness.report.decision_filter import filter_decision_table
from harness.report.loading import load_sweep
from harness.report.write import write_report
from harness.store_schema import DEFAULT_TRACKING_URI
from harness.tracking.store_reader import existing_store_uri


def build_parser() -> argparse.ArgumentParser:
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


def check_store_reachable(uri: str, timeout: float = 5.0) -> None:
    """An ``http(s)://`` tracking server must accept a connection within ``timeout`` seconds (MLflow's
    client would retry for minutes); a StoreError naming ``--tracking-uri`` otherwise."""
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
    if args.budget is not None and not (math.isfinite(args.budget) and 0 < args.budget <= 1):
        raise UsageError(f"--budget: must be a budget in (0, 1] (a value of the sweep's budget.grid), got {args.budget:g}")
    if args.cost is not None and not (math.isfinite(args.cost) and args.cost >= 0):
        raise UsageError(f"--cost: must be a finite cost.c >= 0 of the sweep, got {args.cost:g}")


def check_out_dir(out: str | os.PathLike) -> Path:
    """``--out`` can be created or written: the folder or its nearest existing parent is a writable
    folder. Checked before the store is read, so nothing is written on an error."""
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
        print(f"Decision table of sweep {rep.sweep_id} ({rep.decision_filter}), one block per row")
        print(format_keyvalue(rep.decision_table))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
