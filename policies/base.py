"""The policy interface: fit on development questions, score any questions.

A policy only scores ("a larger score means more worth running the extra arm", SPEC section 4).
Thresholds, budgets, calibration, freezing and evaluation live in the harness, written once.
A fitted policy must round-trip through ``get_state``/``set_state`` with strict JSON state:
dicts with str keys, lists, str, int, finite float, bool, None (:func:`check_json_state`). The
harness freezes that state to disk, digests it, and scores held-out questions only with a
policy rebuilt from the frozen file; anything else (a NumPy array, NaN, a tuple, an int key) is
an error at freeze time naming the policy and the field, never silently converted.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.io import json_problem


class PolicyStateError(HarnessError):
    """A policy's ``get_state()`` is not strict JSON; the message names the policy and field."""


def check_json_state(name: str, state: Any) -> dict[str, Any]:
    """Return ``state`` if it is strict JSON, else raise :class:`PolicyStateError`.

    Strict JSON: a dict at the top, dicts with str keys, lists, str, int, finite float, bool,
    None. The error names the policy and the path, e.g. ``policy 'my_plugin'
    state['weights']: numpy.ndarray is not JSON; return a list (array.tolist())``.
    """
    if not isinstance(state, dict):
        raise PolicyStateError(f"policy {name!r} get_state() returned {type(state).__name__}, not a dict")
    problem = json_problem(state, "state", finite=True, tuples=False, str_keys=True)
    if problem is not None:
        where, what = problem
        raise PolicyStateError(f"policy {name!r} {where}: {what}")
    return state


@dataclass(frozen=True)
class ScoreContext:
    """What a policy may know besides the features when it scores.

    ``true_delta`` is filled in only for policies with ``oracle = True`` (never deployable).
    """

    qids: np.ndarray
    seed: int = 0
    true_delta: np.ndarray | None = None


class Policy(abc.ABC):
    """Base class. Subclasses set ``features`` (names read from the table) and implement score."""

    #: feature names this policy reads (resolved, without the ``feat.`` prefix); () = none
    features: tuple[str, ...] = ()
    #: True when ``fit`` learns something from development outcomes
    trainable: ClassVar[bool] = False
    #: True only for the oracle: the harness then passes the true delta in ScoreContext
    oracle: ClassVar[bool] = False
    #: "base" or "extra" for reference policies that ARE a fixed decision (always-keep,
    #: always-extra), not a ranking: the threshold protocol then never tunes tau for them
    #: (tau = +inf or -inf), so always-keep cannot turn into always-extra under a low cost.
    fixed_route: ClassVar[str | None] = None
    #: True when the score is an estimate of the gain itself (expected delta, on the gain's
    #: scale), so that "score > 0" means "the extra arm is expected to help"; protocol C then
    #: uses threshold 0. Rankings on other scales (random, single signals) get a threshold
    #: chosen on development data instead.
    estimates_gain: ClassVar[bool] = False

    name: str = "policy"

    def fit(self, X: pd.DataFrame, delta: np.ndarray, groups: np.ndarray, seed: int = 0) -> "Policy":
        """Learn from development questions. Default: nothing to learn."""
        return self

    @abc.abstractmethod
    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        """One float per row of X; larger = more worth the extra arm."""

    def get_state(self) -> dict[str, Any]:
        """Fitted state as strict JSON (see :func:`check_json_state`; frozen by the harness).
        Default: no state."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned."""
        if state:
            raise ValueError(f"{type(self).__name__} has no state, got keys {sorted(state)}")
