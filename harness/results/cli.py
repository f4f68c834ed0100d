"""``python -m harness results``: write the results page and its sidecar from a tracking store."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Sequence

from harness.errors import UsageError, argument_parser
from harness.io import atomic_write_text
from harness.results.experiments import EXPERIMENTS
from harness.results.render import build_page
from harness.tracking.store_reader import existing_store_uri, open_client

DEFAULT_OUT = "docs/results.md"


def sidecar_path(out: Path) -> Path:
    return out.with_suffix(".json")


def check_out(out: str) -> None:
    """``--out`` names a page that can be written: not a folder, FIFO or device, its parent (when
    there) a folder; a UsageError naming the option otherwise."""
    path = Path(out).expanduser()
    if os.path.lexists(path):
        mode = os.stat(path).st_mode if path.exists() else 0
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "no regular file (a FIFO, device or broken link)"
            raise UsageError(f"--out {out!r}: is {kind}, expected the path of a Markdown page")
    parent = next((p for p in path.absolute().parents if os.path.lexists(p)), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(f"--out {out!r}: {parent} is not a folder")


def _parser():
    names = [e.name for e in EXPERIMENTS]
    parser = argument_parser(
        prog="python -m harness results",
        description="docs/results.md from the logged runs of the named experiments (conf/experiment/seed*.yaml)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"the page to write (default {DEFAULT_OUT}; its sidecar "
                        "<page>.json lists every cited number)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default $MLFLOW_TRACKING_URI or "
                        "sqlite:///mlruns/mlflow.db)")
    parser.add_argument("--variant", default="full", choices=("full", "fast"),
                        help="which variant's runs: full (experiment=NAME) or fast (experiment=NAME_fast)")
    parser.add_argument("--experiments", nargs="+", default=None, choices=names,
                        metavar="NAME", help="only these named experiments (default: all of "
                        f"{', '.join(names)})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(argv) if argv is not None else None)
    check_out(args.out)  # before the store is read: a FIFO there would block the write

    uri = existing_store_uri(args.tracking_uri)  # a bad or missing store: one line naming where it came from
    client = open_client(uri)
    text, sidecar = build_page(client, variant=args.variant, uri_label=uri, only=args.experiments)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(sidecar_path(out), json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    atomic_write_text(out, text)
    print(f"[route-bench] wrote {out} ({len(sidecar['numbers'])} cited numbers) and {sidecar_path(out)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
