"""The two-paper QASPER fixture of the answer tests, and copies of it under new ids (more
papers and questions of the same shape).

Why here: the answer-arm, fault, prober and Ray-cluster tests build tables on these files.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "data" / "qasper-fixture-v0.3.json"


def _copies(path: Path, n: int) -> Path:
    """The 2-paper fixture copied ``n`` times under new ids (2n papers, 6n questions)."""
    src = json.loads(FIXTURE.read_text())
    out = {}
    for i in range(n):
        for pid, paper in src.items():
            paper = json.loads(json.dumps(paper))
            for qa in paper["qas"]:
                qa["question_id"] = f"{qa['question_id']}_{i}"
            out[f"{pid}_{i}"] = paper
    path.write_text(json.dumps(out), encoding="utf-8")
    return path
