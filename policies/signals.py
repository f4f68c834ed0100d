"""Single-signal routers: the score is one feature, oriented so larger = more worth the extra arm.

The sign table below is written for the default arm pair, keep (dense + rerank) vs hybrid
(BM25 + dense, fused, reranked). Reasoning, one line per family:

- dense top-1 / margin / mean-top-5, dense-rerank overlap: LOW values mean the base arm's own
  list is weak or unstable -> sign -1.
- dense rank of the reranked top-1: HIGH means the reranker disagrees with the dense order ->
  sign +1.
- caption share of the reranked top 10: HIGH means the reranker fills the list with captions,
  i.e. finds no convincing paragraph -> sign +1 (our choice; the SPEC is silent).
- QPP over the dense list (WIG, NQC, SMV and unnormalised variants): these predict that a list
  is effective when HIGH (seed 002 4.2); the dense list is the base arm's -> sign -1.
- BM25 top score / margin and QPP over the BM25 list: these describe the list that only the
  extra arm adds. HIGH means BM25 found a confident lexical match that fusion can bring in, so
  the hybrid arm is more likely to help -> sign +1 (seed 002 orients QPP of the list the extra
  arm uses positively; seed 003 uses the BM25 top score as a retrieve-more trigger).

For another arm pair (e.g. no-retrieval vs RAG, where every retrieval list belongs to the extra
arm) orientations differ: override with ``policy.sign=...``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.retrieval.feature_names import FEATURE_SETS
from policies.base import Policy, ScoreContext
from policies.preprocess import column_medians, count_missing, feature_array

SIGNAL_SIGNS: dict[str, int] = {
    "dense_top1": -1,
    "dense_margin12": -1,
    "dense_mean_top5": -1,
    "overlap_dense_rerank10": -1,
    "rerank_top1_dense_rank": +1,
    "caption_frac_rerank10": +1,
    "bm25_top1": +1,
    "bm25_margin12": +1,
    **{name: (-1 if name.endswith("_dense") else +1) for name in FEATURE_SETS["qpp"]},
}


class SingleSignalPolicy(Policy):
    """score = sign * feature.

    Missing values (NaN, +-inf) take the median of the feature on the development questions,
    learned by ``fit``. ``fit`` reads features only, never outcomes, but ``trainable`` is True
    so that the harness (which fits only trainable policies) learns that median on development
    data and freezes it with the state. If scored without ``fit``/``set_state``, a missing value
    scores 0.0 (our choice: a neutral constant on the sign-adjusted scale).
    """

    name = "single_signal"
    trainable = True

    def __init__(self, feature: str, sign: int | None = None):
        if not isinstance(feature, str) or not feature:
            raise ConfigError("policy.feature", f"expected one feature name, got {feature!r}")
        if sign is None:
            if feature not in SIGNAL_SIGNS:
                raise ConfigError("policy.sign", f"no default sign for feature {feature!r}; set policy.sign to +1 or -1")
            sign = SIGNAL_SIGNS[feature]
        if sign not in (1, -1) or isinstance(sign, bool):
            raise ConfigError("policy.sign", f"expected +1 or -1, got {sign!r}")
        self.feature = feature
        self.sign = int(sign)
        self.features = (feature,)
        self.median_: float | None = None
        self.n_imputed_: int | None = None
        self.n_imputed_scored_: int | None = None

    def fit(self, X: pd.DataFrame, delta, groups=None, seed: int = 0) -> "SingleSignalPolicy":
        arr = feature_array(X, self.features, self.name)
        if len(arr) == 0:
            raise HarnessError(f"policy {self.name!r}: fit got no development questions")
        self.n_imputed_ = count_missing(arr)
        self.median_ = float(column_medians(arr)[0])
        return self

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        values = feature_array(X, self.features, self.name)[:, 0]
        missing = np.isnan(values)
        self.n_imputed_scored_ = int(missing.sum())
        out = self.sign * values
        out[missing] = 0.0 if self.median_ is None else self.sign * self.median_
        return out

    def get_state(self) -> dict[str, Any]:
        if self.median_ is None:
            return {}
        return {
            "kind": "single_signal",
            "feature": self.feature,
            "sign": self.sign,
            "median": self.median_,
            "n_imputed": int(self.n_imputed_ or 0),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if not state:
            self.median_ = None
            return
        if state.get("feature") != self.feature or state.get("sign") != self.sign:
            raise HarnessError(
                f"policy {self.name!r}: state is for feature {state.get('feature')!r} sign {state.get('sign')!r}, "
                f"this policy reads {self.feature!r} sign {self.sign}"
            )
        self.median_ = float(state["median"])
        self.n_imputed_ = int(state.get("n_imputed", 0))
