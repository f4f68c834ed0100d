"""The work of ``table export`` and the extra lines of ``table build`` (``harness.__main__`` parses).

Why a module of its own: both read a built table (``harness.app``) and write files a person
checks outside the harness: the export (``harness.data.table_export``: the outcome-table file,
TREC run files, qrels) and the list of questions the extra arm rescued or lost
(``harness.data.arm_summary``), kept next to the table under its key.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.errors import UsageError

EXPORT_USAGE = """\
usage: python -m harness table export [key=value ...] --out DIR [--format csv|parquet] [--force]

Builds (or reads from the cache) the job's outcome table and writes into the new folder DIR:
  outcomes.csv | outcomes.parquet   the table as dataset=outcomes reads it (dataset.path=DIR/outcomes.csv)
  <arm>.run                         each arm with a ranking, as a TREC run file (trec_eval's order)
  qrels.txt                         the gold passages it was scored against (TREC qrels), when known
An existing non-empty DIR is refused unless --force. docs/own_arms.md says more."""


def export_flags(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """(the overrides, {out, fmt, force}) of ``table export``'s arguments; a UsageError names a
    missing or unknown option."""
    rest: list[str] = []
    flags: dict[str, Any] = {"out": None, "fmt": "csv", "force": False}
    it = iter(argv)
    for a in it:
        name, eq, value = a.partition("=")
        if name in ("--out", "--format") and a.startswith("--"):
            if not eq:
                value = next(it, None)
            if not value:
                raise UsageError(f"table export: {name} needs a value")
            flags["out" if name == "--out" else "fmt"] = value
        elif a == "--force":
            flags["force"] = True
        elif a.startswith("-"):
            raise UsageError(f"table export: unknown option {a!r}; options: --out DIR, --format csv|parquet, --force")
        else:
            rest.append(a)
    if flags["out"] is None:
        raise UsageError("table export: --out DIR is required (the folder the export writes)")
    if flags["fmt"] not in ("csv", "parquet"):
        raise UsageError(f"table export: --format expects csv or parquet, got {flags['fmt']!r}")
    return rest, flags


def _plain(cfg) -> dict:
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    return plain


def export_table(cfg, out: str, fmt: str = "csv", force: bool = False) -> int:
    """``table export``: build or read the table, then write the export (``write_export``)."""
    from harness import app
    from harness.data.table_export import check_target, write_export

    check_target(Path(out), force)  # before any work: a refused folder costs no build
    table, dataset = app.build_table_and_dataset(_plain(cfg))
    gold = None
    if dataset is not None and getattr(dataset, "questions", None):
        gold = {str(q.qid): [str(u) for u in q.gold_unit_ids] for q in dataset.questions}
    done = write_export(table.frame, out, gold=gold, fmt=fmt, force=force)
    print(f"outcome table {table.key} -> {out}/")
    print(f"  {done['table']}: {done['questions']} questions, {done['columns']} columns"
          + (f"; {done['questions_without_evidence']} question(s) without gold evidence left out"
             if done["questions_without_evidence"] else ""))
    if done["columns_left_out"]:
        shown = ", ".join(done["columns_left_out"][:6]) + (", ..." if len(done["columns_left_out"]) > 6 else "")
        print(f"  left out: {len(done['columns_left_out'])} column(s) the format does not hold "
              f"(rankings, ranks, counts, marginal costs): {shown}")
    for arm, c in done["runs"].items():
        notes = [f"{c['scores_nudged']} tied score(s) raised 1 ulp to keep the table's order"] if c["scores_nudged"] else []
        if c["queries_by_rank"]:
            notes.append("scores written as k + 1 - rank (the table's scores do not fall down its rankings)")
        print(f"  {arm}.run: {c['queries']} queries, {c['lines']} lines" + (f" ({'; '.join(notes)})" if notes else ""))
    print(f"  {done['qrels']}: the gold passages the table was scored against" if done["qrels"]
          else "  no qrels: the table's dataset has no gold passages (a synthetic table or an outcome file)")
    return 0


def rescued_lost_path(key: str, base: str, extra: str, metric: str) -> Path:
    """Where ``table build`` keeps the rescued/lost list: under the table's key in a folder of its
    own (``cache_root()/lists/<key>/``; ``tables/`` holds tables only), one file per pair and
    metric."""
    from harness.io import cache_root

    safe = re.sub(r"[^A-Za-z0-9@_.\-]", "_", metric)
    return cache_root() / "lists" / key / f"rescued_lost-{base}-vs-{extra}-{safe}.csv"


def write_rescued_lost(table, task) -> tuple[Path, int]:
    """The rescued/lost list of ``task`` written (verified, atomically) under ``table``'s key; its
    path and number of rows."""
    from harness.data.arm_summary import rescued_lost
    from harness.io import atomic_write_verified

    rows = rescued_lost(table.frame, task.qids, task.base_arm, task.extra_arm, task.metric)
    path = rescued_lost_path(table.key, task.base_arm, task.extra_arm, task.metric)
    atomic_write_verified(path, lambda p: rows.to_csv(p, index=False), key=table.key)
    return path, len(rows)


def show_arms_and_changes(table, task, k: int = 10) -> None:
    """``table build``'s per-arm table (``harness.data.arm_summary``) and its rescued/lost list,
    written under the table's key and named in one line."""
    from harness.data.arm_summary import evidence_rows, format_per_arm, per_arm_means

    for line in format_per_arm(per_arm_means(table.frame, k), len(evidence_rows(table.frame)), k):
        print(line)
    path, n = write_rescued_lost(table, task)
    print(f"rescued/lost list ({task.extra_arm} vs {task.base_arm} on {task.metric}): {n} questions -> {path}")
