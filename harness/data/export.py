"""``python -m harness data export <dataset> --format beir OUT``: any loaded dataset in BEIR's layout.

Why: a team that wants to bring its own data sees the format filled with real data, and can
compare its converter's output with one the harness wrote. The files are exactly what
``dataset=beir`` reads (harness/data/jsonl_formats.py):

- ``corpus.jsonl``: one line per unit, ``_id`` = unit id, ``title`` empty and ``text`` = the unit's
  text (so the loader's "title text" rule gives back the same text), ``metadata`` = document id,
  kind, section;
- ``queries.jsonl``: one line per question, ``_id``, ``text``, ``metadata.answers``;
- ``qrels/<split>.tsv``: a header, then query-id, corpus-id, 1 per gold unit.

Questions without gold units are not written (BEIR's qrels cannot hold them); their count is
returned. The folder is written next to ``OUT`` and renamed into place when complete, so an
interrupted export leaves no half-written folder; an existing ``OUT`` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from harness.data.schema import Dataset
from harness.errors import HarnessError


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def export_beir(ds: Dataset, out: str | os.PathLike, split: str = "test") -> dict:
    """Write ``ds`` as a BEIR folder at ``out``; returns the counts written."""
    out = Path(out)
    if out.exists():
        raise HarnessError(f"{out}: exists; the export writes a new folder (choose another OUT)")
    kept = [q for q in ds.questions if q.gold_unit_ids]
    units = [u for us in ds.documents.values() for u in us]
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent if out.parent.is_dir() else None))
    try:
        (tmp / "qrels").mkdir()
        (tmp / "corpus.jsonl").write_text(_jsonl(
            {"_id": u.unit_id, "title": "", "text": u.text,
             "metadata": {"doc_id": u.doc_id, "kind": u.kind, "section": u.section}} for u in units), encoding="utf-8")
        (tmp / "queries.jsonl").write_text(_jsonl(
            {"_id": q.qid, "text": q.text, "metadata": {"answers": list(q.answers)}} for q in kept), encoding="utf-8")
        lines = ["query-id\tcorpus-id\tscore\n"] + [f"{q.qid}\t{g}\t1\n" for q in kept for g in q.gold_unit_ids]
        (tmp / "qrels" / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"units": len(units), "queries": len(kept), "left_out": len(ds.questions) - len(kept),
            "qrels": len(lines) - 1}
