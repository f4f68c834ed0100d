"""Hand-built jobs for the verdict tests: 24 documents of two questions each, the arms' outcomes
with a given number of rescues and harms, and a one-seed, one-split job record of a router.

Why here: the verdict tests and the report-layout tests decide and lay out the same cases.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.protocols.decision_table import JobRecord

N_DOCS = 24  # two questions per document
DOCS = np.repeat([f"d{i:02d}" for i in range(N_DOCS)], 2)
QIDS = np.array([f"q{i:03d}" for i in range(len(DOCS))])


def _record(policy, base, extra, prob, cal, *, budget=0.25, cost=0.0, violated=False, cell=""):
    """A one-seed, one-split job: per question the arms' outcomes and the router's run
    probability; its expected utility is base + prob (extra - base) - cost prob."""
    base, extra, prob = (np.asarray(x, dtype=float) for x in (base, extra, prob))
    utility = base + prob * (extra - base) - cost * prob
    decisions = pd.DataFrame({"qid": QIDS, "doc_id": DOCS, "split": 0, "budget": budget, "frontier": "deployable",
                              "prob": prob, "base": base, "extra": extra, "utility": utility, "oracle": False})
    common = {"split": 0, "budget": budget, "fixed": False, "realized_usage": prob.mean(), "violated": violated,
              "outcome": (utility + cost * prob).mean(), "utility": utility.mean(), "random_matched": 0.5,
              "oracle_matched": 0.9, "n_cal": len(DOCS), "n_test": len(DOCS)}
    frontiers = pd.DataFrame([{**common, "frontier": "exact", "cal_utility": math.nan},
                              {**common, "frontier": "deployable", "cal_utility": cal}])
    return JobRecord(policy, 0, cost, frontiers, decisions, cell=cell or f"cost.c={cost:g}")


def _arms(rescues=0, harms=0):
    """base / extra outcomes: the first question of the first ``rescues`` documents is a rescue
    (0 -> 1), of the next ``harms`` documents a harm (1 -> 0); every other question 0 / 0."""
    base, extra = np.zeros(len(DOCS)), np.zeros(len(DOCS))
    for i in range(rescues):
        extra[2 * i] = 1.0
    for i in range(rescues, rescues + harms):
        base[2 * i] = 1.0
    return base, extra
