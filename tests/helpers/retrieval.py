"""The hand-built pool and fake encoder of the outcome-table tests: fixed vectors, so every
ranking on them is computed by hand (the numbers are worked out in tests/test_retrieval_table.py).

Why here: the batching, cache-integrity, progress and console-sweep tests build tables on the
same pool without a model.
"""

from __future__ import annotations

import math

import numpy as np

from harness.data.schema import Dataset, Question, Unit
from harness.retrieval.encoder import EncodedTexts

ARMS_CFG = {"k": 2, "candidates": 2, "rrf_k": 60, "precision": "fp32", "shard_size": 1}
MAXSIM = {"name": "maxsim"}
Q_TEXT = "Which zeta is best?"


def _v(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos), 0.0]


E1, E2 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
# text -> (sentence vector, token vectors)
TABLE = {
    Q_TEXT: ([1.0, 0.0, 0.0], [E1, E2]),
    "alpha beta": (_v(0.9), [E1]),
    "gamma delta": (_v(0.8), [E1, E2]),
    "zeta alpha": (_v(0.1), [[0.6, 0.8, 0.0]]),
    "epsilon omega": (_v(0.5), [[0.0, 0.0, 1.0]]),
}


class FakeEncoder:
    """Deterministic encoder; texts not in TABLE get a vector from their length (for bulk docs)."""

    def __init__(self, fail_after_calls: int | None = None):
        self.calls = 0
        self.fail_after_calls = fail_after_calls

    def identity(self):
        return {"model": "fake-3d", "weights_sha256": "0" * 64}

    def encode(self, texts):
        self.calls += 1
        if self.fail_after_calls is not None and self.calls > self.fail_after_calls:
            raise RuntimeError("simulated crash")
        vecs, toks = [], []
        for t in texts:
            if t in TABLE:
                v, tk = TABLE[t]
            else:
                c = (len(t) % 7) / 7.0
                v, tk = _v(c), [_v(c), E2]
            vecs.append(v)
            toks.append(np.asarray(tk, dtype=np.float32))
        return EncodedTexts(np.asarray(vecs, dtype=np.float32).reshape(len(texts), 3), toks,
                            np.array([len(t.split()) + 2 for t in texts]), 0.001)


def tiny_dataset(extra_docs: int = 0) -> Dataset:
    texts = ["alpha beta", "gamma delta", "zeta alpha", "epsilon omega"]
    kinds = ["paragraph", "caption", "paragraph", "heading"]
    docs = {"d0": [Unit(f"d0#{i}", "d0", i, k, t) for i, (t, k) in enumerate(zip(texts, kinds))]}
    qs = [Question("q0", "d0", "d0", Q_TEXT, gold_unit_ids=("d0#1",)),
          Question("q1", "d0", "d0", "no gold here", gold_unit_ids=())]
    for j in range(1, extra_docs + 1):
        d = f"d{j}"
        docs[d] = [Unit(f"{d}#{i}", d, i, "paragraph", f"unit {i} of doc {j} " + "w " * i) for i in range(5)]
        qs.append(Question(f"q{j + 1:03d}", d, d, f"What about doc {j}?", gold_unit_ids=(f"{d}#{j % 5}",)))
    pools = {d: [u.unit_id for u in us] for d, us in docs.items()}
    return Dataset("tiny", docs, qs, pools)
