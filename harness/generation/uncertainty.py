"""Answer-uncertainty features from a no-retrieval generation (docs/metrics.md §3; seed 003).

Per generated answer token t (the end-of-sequence token excluded, see ``Generation``):

* ``H_t``: token entropy in nats, **approximated over the returned top-k alternatives,
  renormalised**: q_i = p_i / sum_j p_j over the k alternatives, H_t = -sum_i q_i ln q_i.
  Servers return only the top k (OpenAI's API allows k <= 20), so this is what every backend
  can give. It equals the true entropy when the top k hold all the probability mass; otherwise
  it ignores the tail: by the grouping rule H = h(P_k) + P_k H_k + (1 - P_k) H_tail (P_k the
  top-k mass, H_k the renormalised top-k entropy), so it is neither a lower nor an upper bound
  in general, it is at most ln k, and it understates flat distributions. ``mean_top_mass``
  (the mean of P_k) says how much mass the approximation saw; where a backend also reports the
  exact full-vocabulary entropy (transformers, mlx-lm) the exact means are given too.
* ``p*_t``: the probability of the most likely token at step t, **not** renormalised (the top
  logprob is exact).

Features of the answer (all ``nan`` for an empty answer, whose length is 0):

* ``mean_entropy`` = mean_t H_t (seed 003's "mean entropy");
* ``max_entropy`` = max_t H_t (seed 002's uncertainty predictor);
* ``min_confidence`` = 1 - min_t p*_t (seed 003's "minimum token confidence");
* ``answer_tokens`` = the number of answer tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from harness.generation.types import Generation, TokenLogprob


def _logsumexp(xs: Sequence[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def topk_entropy(logprobs: Sequence[float]) -> float:
    """Entropy (nats) of the distribution renormalised over the given log-probabilities."""
    lps = [float(x) for x in logprobs if x is not None and not math.isinf(x)]
    if not lps:
        return math.nan
    z = _logsumexp(lps)
    h = 0.0
    for lp in lps:
        q_log = lp - z
        h -= math.exp(q_log) * q_log
    return max(h, 0.0)


def _step_logprobs(tok: TokenLogprob) -> list[float]:
    if tok.top:
        return [t.logprob for t in tok.top]
    return [tok.logprob]  # no alternatives returned: only the chosen token is known


@dataclass(frozen=True)
class UncertaintyFeatures:
    mean_entropy: float
    max_entropy: float
    min_confidence: float  # 1 - min over tokens of the top-1 probability
    answer_tokens: int
    mean_top_mass: float  # mean over tokens of the probability mass the top k held
    mean_entropy_exact: float | None = None  # full-vocabulary, where the backend gives it
    max_entropy_exact: float | None = None

    def to_dict(self, prefix: str = "") -> dict:
        return {prefix + k: v for k, v in asdict(self).items()}


def uncertainty_features(tokens: Sequence[TokenLogprob] | Generation) -> UncertaintyFeatures:
    """The four features (plus diagnostics) of one generated answer's tokens."""
    if isinstance(tokens, Generation):
        tokens = tokens.tokens
    tokens = list(tokens)
    n = len(tokens)
    if n == 0:
        nan = math.nan
        return UncertaintyFeatures(nan, nan, nan, 0, nan, None, None)
    ents = []
    top1 = []
    mass = []
    for tok in tokens:
        lps = _step_logprobs(tok)
        ents.append(topk_entropy(lps))
        best = max(lps + [tok.logprob])
        top1.append(math.exp(best))
        mass.append(min(1.0, sum(math.exp(x) for x in lps)))
    exact = [t.entropy for t in tokens]
    has_exact = all(e is not None for e in exact)
    return UncertaintyFeatures(
        mean_entropy=sum(ents) / n,
        max_entropy=max(ents),
        min_confidence=1.0 - min(top1),
        answer_tokens=n,
        mean_top_mass=sum(mass) / n,
        mean_entropy_exact=(sum(exact) / n) if has_exact else None,
        max_entropy_exact=max(exact) if has_exact else None,
    )
