"""Test-local policies for the protocol tests (independent of policies.builtin, which another
engineer writes): an oracle, a numpy ridge router, a seeded random one, a constant one.

Why here: most protocol test modules route with them. The protocol-A output recorded in
tests/fixtures/protocol_a_one_repeat.json names this module in its frozen ``policy_class`` (and
so in its config digest): moving these classes means editing those two values there."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from harness.retrieval.feature_names import BASELINE
from policies.base import Policy, ScoreContext


class OraclePolicy(Policy):
    oracle = True
    name = "oracle"

    def score(self, X, ctx: ScoreContext):
        return np.asarray(ctx.true_delta, dtype=float)


class RandomPolicy(Policy):
    """Uniform scores keyed by (seed, qid): a question keeps its score whichever half it is
    scored in (drawing rng(seed).random(n) per call would give two halves the same sequence)."""

    name = "random"

    def score(self, X, ctx: ScoreContext):
        digits = [hashlib.sha256(f"{ctx.seed}:{q}".encode()).hexdigest()[:13] for q in ctx.qids]
        return np.array([int(d, 16) / 16**13 for d in digits])


class ConstantPolicy(Policy):
    name = "constant"

    def score(self, X, ctx: ScoreContext):
        return np.zeros(len(ctx.qids))


class LstsqPolicy(Policy):
    """Standardise, then ridge regression on delta by the closed form (numpy only)."""

    trainable = True
    name = "lstsq"
    features = BASELINE

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha
        self.state: dict | None = None

    def fit(self, X: pd.DataFrame, delta, groups, seed=0):
        A = X.to_numpy(float)
        mu, sd = A.mean(0), A.std(0)
        sd[sd == 0] = 1.0
        Z = (A - mu) / sd
        y = np.asarray(delta, float)
        coef = np.linalg.solve(Z.T @ Z + self.alpha * np.eye(Z.shape[1]), Z.T @ (y - y.mean()))
        self.state = {"mu": mu.tolist(), "sd": sd.tolist(), "coef": coef.tolist(), "intercept": float(y.mean())}
        return self

    def score(self, X, ctx):
        if self.state is None:
            raise RuntimeError("LstsqPolicy scored before fit/set_state")
        s = self.state
        Z = (X.to_numpy(float) - np.array(s["mu"])) / np.array(s["sd"])
        return Z @ np.array(s["coef"]) + s["intercept"]

    def get_state(self):
        return dict(self.state)

    def set_state(self, state):
        self.state = dict(state)
