"""``python -m harness table export ... --out DIR``: a job's outcome table as files others can check.

Why: a table the harness built (its own arms, run-file arms, answer arms) should be readable
without the harness: by ``dataset=outcomes`` on another machine, and by trec_eval. So the
export writes, into one new folder:

* ``outcomes.csv`` (or ``outcomes.parquet``, ``--format``): the table in the outcome-table
  format ``dataset=outcomes`` reads (``harness.data.outcome_table``): ``qid``, ``group`` (the
  table's ``doc_id``), ``question`` when the table has it, every outcome ``<arm>.<metric>``,
  every cost ``<arm>.cost.<unit>`` and every ``feat.<name>``. The questions are those with gold
  evidence when the table says which (``has_evidence``): the questions every retrieval metric
  is defined on. Columns that are no outcome (rankings, ranks, counts, marginal costs) or an
  outcome with a value the format cannot hold (NaN, outside [0, 1]) are left out and counted;
  loading the file gives back the same questions, groups, outcomes, costs and features, exactly.
* ``<arm>.run`` per arm with a ranking (``<arm>.top<k>`` and ``<arm>.scores<k>``): TREC's
  ``qid Q0 docid rank score tag`` in trec_eval's order (score descending, ties by docid
  descending). Where the table's order ties two scores in the other order, the upper one is
  written 1 ulp higher (``math.nextafter``) so trec_eval keeps the table's order; where scores
  rise down a ranking (no score order at all), the arm's scores are written as ``k + 1 - rank``.
  Either is counted in the summary.
* ``qrels.txt``: the gold passages the table was scored against, TREC's ``qid 0 docid 1``
  (binary: the harness's relevance), when the dataset has them (not for a synthetic table or an
  outcome file).

The folder is written beside ``DIR`` and renamed into place when complete; an existing
non-empty ``DIR`` is refused unless ``force`` (then replaced only once the new one is whole).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.data.outcome_table import ARM_COLUMN, is_binary
from harness.errors import DataError, HarnessError

FORMATS = {"csv": "outcomes.csv", "parquet": "outcomes.parquet"}
NOT_OUTCOMES = re.compile(r"^(top\d+|scores\d+|first_gold_rank|n_retrieved|marginal\..+)$")
RANKING = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*)\.top(\d+)$")


def _usable_outcome(values: pd.Series, metric: str) -> bool:
    """Whether an outcome column fits the format: numbers, finite, 0/1 or in [0, 1]."""
    if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)):
        return False
    x = values.astype(float).to_numpy()
    if not np.isfinite(x).all():
        return False
    return bool(np.isin(x, (0.0, 1.0)).all()) if is_binary(metric) else bool(((x >= 0) & (x <= 1)).all())


def outcome_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str], int]:
    """(the table in the outcome-table format, the columns left out, the questions left out
    for want of gold evidence); module docstring."""
    rows = frame
    if "has_evidence" in frame.columns:
        rows = frame[frame["has_evidence"].astype(bool)]
    rows = rows.sort_values("qid", kind="stable").reset_index(drop=True)
    out: dict[str, Any] = {"qid": rows["qid"].astype(str)}
    out["group"] = rows["doc_id"].astype(str) if "doc_id" in rows.columns else out["qid"]
    if "question" in rows.columns:
        out["question"] = rows["question"].astype(str)
    left: list[str] = []
    for c in map(str, rows.columns):
        m = ARM_COLUMN.match(c)
        if c.startswith("feat."):
            out[c] = pd.to_numeric(rows[c].astype(float), errors="coerce")
        elif m and m.group(2).startswith("cost."):
            x = pd.to_numeric(rows[c], errors="coerce")
            if x.notna().all() and (x >= 0).all() and np.isfinite(x.astype(float)).all():
                out[c] = x
            else:
                left.append(c)
        elif m and not NOT_OUTCOMES.match(m.group(2)) and _usable_outcome(rows[c], m.group(2)):
            out[c] = rows[c].astype(float) if pd.api.types.is_bool_dtype(rows[c]) else rows[c]
        elif c not in ("qid", "doc_id", "question"):
            left.append(c)
    return pd.DataFrame(out), left, len(frame) - len(rows)


def ranked_arms(frame: pd.DataFrame) -> dict[str, int]:
    """{arm: k} of the arms with a ranking ``<arm>.top<k>`` and its scores ``<arm>.scores<k>``."""
    out: dict[str, int] = {}
    for c in map(str, frame.columns):
        m = RANKING.match(c)
        if m and f"{m.group(1)}.scores{m.group(2)}" in frame.columns:
            out[m.group(1)] = max(out.get(m.group(1), 0), int(m.group(2)))
    return out


def trec_scores(docs: Sequence[str], scores: Sequence[float]) -> tuple[list[float], int] | None:
    """Scores under which trec_eval orders ``docs`` as given (module docstring) and how many were
    nudged by an ulp; None when the scores rise down the list (no score order to keep)."""
    out = [float(s) for s in scores]
    if any(out[i] < out[i + 1] for i in range(len(out) - 1)):
        return None
    nudged = 0
    for i in range(len(out) - 2, -1, -1):  # bottom up: each above the one below in trec_eval's order
        if (out[i], docs[i]) <= (out[i + 1], docs[i + 1]):
            out[i] = math.nextafter(out[i + 1], math.inf)
            nudged += 1
    return out, nudged


def _ident(value: Any, what: str, arm: str) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise DataError(f"{arm}.run", what, f"{text!r} cannot be written in a TREC file (empty, or holds whitespace)")
    return text


def _listed(value: Any) -> list:
    """A ranking cell as a list (a Parquet array, a list; a missing cell: empty)."""
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else []


def run_text(rows: pd.DataFrame, arm: str, k: int) -> tuple[str, dict[str, int]]:
    """The TREC run file of ``arm`` over ``rows`` (module docstring), and its counts."""
    lines: list[str] = []
    counts = {"queries": 0, "lines": 0, "scores_nudged": 0, "queries_by_rank": 0}
    rank_scores = False
    rankings = []
    for qid, docs, scores in zip(rows["qid"], rows[f"{arm}.top{k}"], rows[f"{arm}.scores{k}"]):
        docs = [_ident(d, "docid", arm) for d in _listed(docs)]
        scores = _listed(scores)
        fixed = trec_scores(docs, scores)
        rank_scores |= fixed is None
        rankings.append((_ident(qid, "qid", arm), docs, fixed))
    for qid, docs, fixed in rankings:
        if not docs:
            continue
        counts["queries"] += 1
        if rank_scores:
            values = [float(k - r) for r in range(len(docs))]
            counts["queries_by_rank"] += 1
        else:
            values = fixed[0]
            counts["scores_nudged"] += fixed[1]
        lines += [f"{qid} Q0 {d} {r} {s!r} {arm}\n" for r, (d, s) in enumerate(zip(docs, values), start=1)]
    counts["lines"] = len(lines)
    return "".join(lines), counts


def qrels_text(qids: Sequence[str], gold: Mapping[str, Sequence[str]]) -> str:
    """TREC qrels (``qid 0 docid 1``) of ``qids``' gold passages, in the table's question order."""
    return "".join(f"{_ident(q, 'qid', 'qrels')} 0 {_ident(d, 'docid', 'qrels')} 1\n"
                   for q in qids for d in sorted(map(str, gold.get(q, ()))))


def check_target(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise HarnessError(f"{out}: exists and is no folder; --out names the folder the export writes")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise HarnessError(f"{out}: exists and is not empty; choose another --out, or --force to replace it")


def _replace(tmp: Path, out: Path) -> None:
    """``tmp`` renamed onto ``out``; an existing ``out`` moved aside first and removed after."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
        os.replace(out, old / out.name)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_export(frame: pd.DataFrame, out: str | os.PathLike, *, gold: Mapping[str, Sequence[str]] | None,
                 fmt: str = "csv", force: bool = False) -> dict[str, Any]:
    """Write the export of ``frame`` into the folder ``out`` (module docstring); its summary."""
    if fmt not in FORMATS:
        raise HarnessError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out)
    check_target(out, force)
    table, left, no_evidence = outcome_frame(frame)
    kept = frame.set_index(frame["qid"].astype(str)).loc[table["qid"]].reset_index(drop=True)
    runs = {arm: run_text(kept, arm, k) for arm, k in ranked_arms(frame).items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        target = tmp / FORMATS[fmt]
        if fmt == "csv":
            table.to_csv(target, index=False)
        else:
            table.to_parquet(target, index=False)
        for arm, (text, _) in runs.items():
            (tmp / f"{arm}.run").write_text(text, encoding="utf-8")
        if gold is not None:
            (tmp / "qrels.txt").write_text(qrels_text(list(table["qid"]), gold), encoding="utf-8")
        _replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"table": FORMATS[fmt], "questions": len(table), "questions_without_evidence": no_evidence,
            "columns": len(table.columns), "columns_left_out": left, "runs": {a: c for a, (_, c) in runs.items()},
            "qrels": "qrels.txt" if gold is not None else None}
