"""A tiny BEIR folder and TREC run files over it, written by the tests (never read from outside).

Why here: the run-arm, run-file bad-input and export tests share them. The runs hold ties in
score on purpose (scores rounded to one decimal), a query absent from one run, and one run in
gzip, so every rule of docs/own_arms.md is met by a real file.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

TEXTS = [
    "mercury is the smallest planet", "venus has a thick atmosphere", "mars is the red planet",
    "jupiter is the largest planet", "saturn has rings", "uranus is tilted", "neptune is windy",
    "pluto is a dwarf planet", "the sun is a star", "the moon orbits the earth", "earth has oceans",
    "comets have tails",
]
# (query id, text, relevant passages with their qrels score); q8 has only a score-0 line
QUERIES = [
    ("q1", "smallest planet", {"d0": 1}), ("q2", "red planet", {"d2": 2}), ("q3", "planet with rings", {"d4": 1}),
    ("q4", "largest planet", {"d3": 1, "d0": 1}), ("q5", "dwarf planet", {"d7": 1}), ("q6", "star", {"d8": 1}),
    ("q7", "oceans", {"d10": 1, "d9": 1, "d11": 1}), ("q8", "nothing relevant", {"d1": 0}),
]


def write_beir(root: Path) -> Path:
    """corpus.jsonl (d0..d11), queries.jsonl, qrels/test.tsv with a header."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(TEXTS)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in QUERIES),
                                        encoding="utf-8")
    rows = "".join(f"{q}\t{d}\t{s}\n" for q, _, rel in QUERIES for d, s in rel.items())
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return root


def gold() -> dict[str, set[str]]:
    """The dataset's gold passages: score > 0; q8 has none, so it is not a question."""
    out = {q: {d for d, s in rel.items() if s > 0} for q, _, rel in QUERIES}
    return {q: g for q, g in out.items() if g}


def run_lines(seed: int, tag: str, skip: tuple[str, ...] = (), depth: int = 9) -> list[str]:
    """A run over every query (but ``skip``): ``depth`` random passages per query, scores rounded
    to one decimal (ties), ranks written in file order (trec_eval reorders by score)."""
    rng = random.Random(seed)
    lines = []
    for q, _, _ in QUERIES:
        if q in skip:
            continue
        for rank, d in enumerate(rng.sample([f"d{i}" for i in range(len(TEXTS))], depth), start=1):
            lines.append(f"{q} Q0 {d} {rank} {round(rng.uniform(0, 2), 1)} {tag}")
    return lines


def write_run(path: Path, lines: list[str], gz: bool = False) -> Path:
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path
