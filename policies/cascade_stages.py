"""Cascade stages' stop rules (docs/metrics.md §17): after a stage has run, one stop score per
question from the features available by then, larger = stop here.

A stage is one class: ``setup`` tells it its arm and the features available by its stage (the
harness hands ``fit`` and ``score`` a frame of exactly those columns, so a stop rule cannot read
a feature a later stage makes); ``fit`` learns from calibration questions whether this stage's
arm already has the best outcome among it and the later stages (``stop_ok``); ``score`` returns
the stop score. The harness chooses the thresholds (``harness.protocols.cascade_search``).

Built-ins: ``top_score`` (one feature, e.g. the stage's own top-1 retrieval score) and
``logistic`` (a logistic regression of ``stop_ok`` on the available features). A package adds
one with an entry point in the group ``rag_route_bench.cascade_stages``
(``my_stop = "my_pkg:MyStop"``) and names it in ``protocol.settings.cascade.stop``.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.registry import Kind, lookup, registered
from harness.plugin_guard import plugin_call
from policies.learned import MAX_PENALTY, _positive
from policies.preprocess import column_medians, feature_array, impute, linear_predictor

ENTRY_POINT_GROUP = "rag_route_bench.cascade_stages"
STOP_KEY = "protocol.settings.cascade.stop"


class CascadeStage(abc.ABC):
    """The stop rule of one cascade stage (module docstring)."""

    name: ClassVar[str] = "stage"
    arm: str = ""
    available: tuple[str, ...] = ()

    def setup(self, arm: str, available: Sequence[str]) -> None:
        """Called by the harness before ``fit``: the stage's arm and the feature names available
        by this stage (the columns ``fit`` and ``score`` will get)."""
        self.arm, self.available = str(arm), tuple(available)

    def fit(self, X: pd.DataFrame, stop_ok: np.ndarray, groups: np.ndarray, seed: int = 0) -> "CascadeStage":
        """Learn from calibration questions; ``stop_ok`` is 1 where this stage's arm already has
        the best outcome of it and every later stage. Default: nothing to learn."""
        return self

    @abc.abstractmethod
    def score(self, X: pd.DataFrame) -> np.ndarray:
        """One stop score per question: finite, or -inf (clears no finite threshold)."""


class TopScore(CascadeStage):
    """score = sign x one feature (default ``<arm>_top1``: the stage's own top-1 retrieval
    score, confident retrieval = stop). A missing value is -inf: the question goes on."""

    name = "top_score"

    def __init__(self, feature: str | None = None, sign: float = 1.0):
        if feature is not None and (not isinstance(feature, str) or not feature):
            raise ConfigError(f"{STOP_KEY}.feature", f"expected a feature name, got {feature!r}")
        if sign not in (1, -1, 1.0, -1.0) or isinstance(sign, bool):
            raise ConfigError(f"{STOP_KEY}.sign", f"expected 1 or -1, got {sign!r}")
        self.feature, self.sign = feature, float(sign)

    def score(self, X: pd.DataFrame) -> np.ndarray:
        name = self.feature or f"{self.arm}_top1"
        if name not in X.columns:
            raise ConfigError(STOP_KEY, f"stage {self.arm!r}: top_score reads feature {name!r}, not available by this "
                                        f"stage (available: {sorted(X.columns)}); give its feature")
        v = self.sign * X[name].to_numpy(dtype=float, na_value=np.nan)
        return np.where(np.isnan(v) | np.isinf(v), -np.inf, v)


class LogisticStop(CascadeStage):
    """P(this stage's arm already has the best outcome) from a logistic regression (C, lbfgs) on
    the standardised available features (``features``: a subset of them; default all), missing
    values imputed by the calibration medians. One class only: that class's constant score."""

    name = "logistic"

    def __init__(self, features: Sequence[str] | None = None, C: float = 1.0):
        if features is not None and (isinstance(features, str) or not all(isinstance(f, str) for f in features)):
            raise ConfigError(f"{STOP_KEY}.features", f"expected a list of feature names, got {features!r}")
        self.features = None if features is None else tuple(features)
        self.C = _positive(C, f"{STOP_KEY}.C", high=MAX_PENALTY, low=1 / MAX_PENALTY)

    def _columns(self, X: pd.DataFrame) -> list[str]:
        cols = list(self.features) if self.features is not None else sorted(X.columns)
        if not cols:
            raise ConfigError(STOP_KEY, f"stage {self.arm!r}: logistic has no feature available by this stage")
        return cols

    def fit(self, X, stop_ok, groups, seed: int = 0) -> "LogisticStop":
        from sklearn.linear_model import LogisticRegression

        arr = feature_array(X, self._columns(X), f"cascade stage {self.arm}")
        self.medians_ = column_medians(arr)
        filled = impute(arr, self.medians_)
        self.mean_, scale = filled.mean(axis=0), filled.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        y = np.asarray(stop_ok, dtype=int)
        self.coef_, self.intercept_ = np.zeros(arr.shape[1]), 0.0
        if y.min() == y.max():
            self.intercept_ = 36.0 if y[0] == 1 else -36.0
            return self
        model = LogisticRegression(C=float(self.C), max_iter=1000).fit((filled - self.mean_) / self.scale_, y)
        self.coef_, self.intercept_ = model.coef_.reshape(-1), float(model.intercept_[0])
        return self

    def score(self, X) -> np.ndarray:
        arr = impute(feature_array(X, self._columns(X), f"cascade stage {self.arm}"), self.medians_)
        z = (arr - self.mean_) / self.scale_
        return 1.0 / (1.0 + np.exp(-linear_predictor(z, self.coef_[None, :], [self.intercept_])[:, 0]))


BUILTIN_STAGES = {"top_score": "policies.cascade_stages:TopScore", "logistic": "policies.cascade_stages:LogisticStop"}
STAGES = Kind("cascade stage", ENTRY_POINT_GROUP, CascadeStage, BUILTIN_STAGES, key=STOP_KEY)


def stage_names() -> list[str]:
    """Every stop rule a config may name: built-ins first, then installed plugins."""
    return list(registered(STAGES))


def stage_spec(spec: Any, key: str) -> tuple[str, dict]:
    """(name, constructor parameters) of a stop-rule entry: a name, or {kind: name, **params}."""
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, Mapping) and isinstance(spec.get("kind"), str):
        return spec["kind"], {str(k): v for k, v in spec.items() if k != "kind"}
    raise ConfigError(key, f"expected a stop rule's name or {{kind: <name>, <param>: ...}}, got {spec!r}")


def make_stage(spec: Any, key: str = STOP_KEY) -> CascadeStage:
    """A fresh stop rule from its config entry (built-in or entry point)."""
    name, params = stage_spec(spec, key)
    cls = lookup(STAGES, name, key)
    try:
        with plugin_call(f"cascade stage {name!r}", "__init__"):
            return cls(**params)
    except TypeError as exc:
        raise ConfigError(key, f"cascade stage {name!r} does not take {sorted(params)}: {exc}") from None


def fit_and_score(spec: Any, arm: str, available: Sequence[str], train: tuple, test: pd.DataFrame, seed: int,
                  key: str = STOP_KEY) -> np.ndarray:
    """A fresh stop rule of ``spec`` set up for ``arm``, fitted on ``train`` = (X, stop_ok,
    groups) and scoring ``test``; X frames restricted to ``available``. A plugin's failure or a
    wrong shape is one error naming the stage."""
    stage = make_stage(spec, key)
    cols = list(available)
    label = f"cascade stage {stage_spec(spec, key)[0]!r} at {arm!r}"
    with plugin_call(label, "fit"):
        stage.setup(arm, cols)
        stage.fit(train[0].loc[:, cols], np.asarray(train[1]), np.asarray(train[2]), int(seed))
    with plugin_call(label, "score"):
        s = np.asarray(stage.score(test.loc[:, cols]), dtype=float)
    if s.shape != (len(test),) or np.isnan(s).any() or (s == np.inf).any():
        raise HarnessError(f"{label}: score returned shape {s.shape} with NaN or +inf values; one finite float (or "
                           f"-inf) per question expected ({len(test)})")
    return s
