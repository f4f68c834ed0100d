"""Reference policies that learn nothing: always-keep, always-extra, random, oracle (docs/metrics.md §4).

They bracket every learned router: the two constants are the no-routing baselines, random is
the "no information" ranking at matched usage, and the oracle (true delta) is the upper bound.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.retrieval import feature_names
from policies.base import INT, Policy, ScoreContext


def resolve_features(spec, key: str = "policy.features") -> tuple[str, ...]:
    """Feature names from a set name ("baseline"), a "+"-joined list ("baseline+bm25") or a list.

    Unknown names are kept as given: a table may carry extra features, and a missing one is
    reported by ``RoutingTask.feature_matrix`` as a FeatureError naming it and the table.
    """
    if spec is None:
        raise ConfigError(key, "must name a feature set or list features")
    if not isinstance(spec, (str, list, tuple)):
        raise ConfigError(key, f"expected a feature-set name or a list of names, got {type(spec).__name__}")
    names = feature_names.resolve(spec if isinstance(spec, str) else [str(s) for s in spec])
    names = tuple(n for n in names if n)
    if not names:
        raise ConfigError(key, f"{spec!r} names no features")
    return names


class _Constant(Policy):
    """Same score for every question; the harness's tie rules decide what a budget means."""

    value: float = 0.0

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        return np.full(len(X), self.value, dtype=float)


class AlwaysBase(_Constant):
    """always-keep: score -1 for every question, so a threshold of 0 never runs the extra arm."""

    name = "always_keep"
    value = -1.0
    fixed_route = "base"


class AlwaysExtra(_Constant):
    """always-extra (always-hybrid): score +1 for every question."""

    name = "always_extra"
    value = 1.0
    fixed_route = "extra"


def uniform_from_seed(seed: int, qids, stream: int = 0) -> np.ndarray:
    """i.i.d. uniform [0, 1) values, one per question id, derived from (seed, stream, qid) alone.

    Choice (docs/metrics.md only says "i.i.d. uniform from the run's seed"): each value is the first 53
    bits of BLAKE2b-64 of ``"<seed>\\x00<stream>\\x00<qid>"``. A question therefore gets the
    same score whichever subset, fold or order it is scored in, and on every platform and numpy
    version; a different seed or stream gives an independent draw (seed 1 stream 1 is not
    seed 2 stream 0).
    """
    out = np.empty(len(qids), dtype=float)
    for i, qid in enumerate(qids):
        key = f"{int(seed)}\x00{int(stream)}\x00{qid}"
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        out[i] = (int.from_bytes(digest, "big") >> 11) * 2.0**-53
    return out


class RandomPolicy(Policy):
    """random: uniform scores from the run's seed (``ctx.seed``), reproducible per question.

    ``seed_offset`` lets a sweep draw several independent random baselines under one run seed
    (default 0): it selects a separate stream of the hash, and is part of the frozen state.
    """

    name = "random"
    state_params = {"seed_offset": INT}  # frozen with the state and checked when it is restored

    def __init__(self, seed_offset: int = 0):
        if not isinstance(seed_offset, int) or isinstance(seed_offset, bool):
            raise ConfigError("policy.seed_offset", f"expected an integer, got {seed_offset!r}")
        self.seed_offset = seed_offset

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        if len(ctx.qids) != len(X):
            raise HarnessError(f"random policy: {len(X)} rows but {len(ctx.qids)} question ids")
        return uniform_from_seed(int(ctx.seed), [str(q) for q in ctx.qids], stream=self.seed_offset)


class OraclePolicy(Policy):
    """oracle: the score is the true delta (or gain) itself; an upper bound, never deployable.

    No tie-break is added: equal deltas stay equal, and the harness breaks ties by question id,
    so different deltas are never reordered.
    """

    name = "oracle"
    oracle = True
    estimates_gain = True  # the true delta

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        if ctx.true_delta is None:
            raise HarnessError(
                "oracle policy scored without ScoreContext.true_delta: the harness must pass the "
                "true delta for policies with oracle=True"
            )
        d = np.asarray(ctx.true_delta, dtype=float).reshape(-1)
        if len(d) != len(X):
            raise HarnessError(f"oracle policy: {len(X)} rows but true_delta has {len(d)} values")
        if not np.all(np.isfinite(d)):
            raise HarnessError(f"oracle policy: true_delta has {int((~np.isfinite(d)).sum())} non-finite value(s)")
        return d.copy()
