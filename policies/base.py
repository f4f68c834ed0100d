"""The policy interface: fit on development questions, score any questions.

A policy only scores ("a larger score means more worth running the extra arm", docs/metrics.md §4).
Thresholds, budgets, calibration, freezing and evaluation live in the harness, written once.

Policies follow scikit-learn's conventions (the full contract, and :func:`policies.check_policy`
that tests it, are in ``docs/policies.md``):

- the constructor only stores its parameters, under their own names, and validates them (a bad
  value is a ConfigError naming ``policy.<param>`` before any work). Two normalisations are
  allowed because the harness reads them before ``fit``: ``features`` is stored resolved (a
  tuple of names) and a single signal's default ``sign`` is looked up. :meth:`Policy.get_params`
  reads the parameters back from the constructor's signature, so
  ``type(p)(**p.get_params())`` is an unfitted copy of ``p``;
- everything learned is set by ``fit`` only, in attributes ending with ``_``;
- the fitted state is declared once, in ``state_params`` and ``fitted_attributes``, and the
  generic :meth:`Policy.get_state` / :meth:`Policy.set_state` write and read exactly these.

A fitted policy must round-trip through ``get_state``/``set_state`` with strict JSON state:
dicts with str keys, lists, str, int, finite float, bool, None (:func:`check_json_state`). The
harness freezes that state to disk, digests it, and scores held-out questions only with a
policy rebuilt from the frozen file; anything else (a NumPy array, NaN, a tuple, an int key) is
an error at freeze time naming the policy and the field, never silently converted.
"""

from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

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


# ---- codecs: how one declared state entry becomes JSON and back ----------------------------------
@dataclass(frozen=True)
class Codec:
    """Turns one state value into strict JSON (``encode``) and back (``decode``).

    Both get the policy, so a decoder can use its parameters (e.g. the number of features to
    shape a coefficient matrix). ``encode(decode(x)) == x`` must hold for every encoded ``x``.
    """

    name: str
    encode: Callable[[Any, "Policy"], Any]
    decode: Callable[[Any, "Policy"], Any]


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=float).reshape(-1)]


FLOAT = Codec("float", lambda v, p: float(v), lambda v, p: float(v))
INT = Codec("int", lambda v, p: int(v), lambda v, p: int(v))
STR = Codec("str", lambda v, p: str(v), lambda v, p: str(v))
#: a tuple of str (``features``), written as a JSON list
NAMES = Codec("names", lambda v, p: [str(x) for x in v], lambda v, p: tuple(str(x) for x in v))
#: a 1-D float array, written as a list of floats
FLOATS = Codec("floats", lambda v, p: _floats(v), lambda v, p: np.asarray(v, dtype=float))
#: a 1-D int array, written as a list of ints
INTS = Codec("ints", lambda v, p: [int(x) for x in np.asarray(v).reshape(-1)], lambda v, p: np.asarray(v, dtype=int))
#: a 2-D float array with one column per feature (e.g. one row per class), a list of rows
MATRIX = Codec(
    "matrix",
    lambda v, p: [_floats(row) for row in v],
    lambda v, p: np.asarray(v, dtype=float).reshape(-1, len(p.features)),
)
#: a value that already is strict JSON (a dict of plain numbers and strings), copied
JSON = Codec("json", lambda v, p: _copy_json(v), lambda v, p: _copy_json(v))


def _copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


@dataclass(frozen=True)
class ScoreContext:
    """What a policy may know besides the features when it scores.

    ``true_delta`` is filled in only for policies with ``oracle = True`` (never deployable).
    ``texts``: the questions' text, aligned with ``qids``, filled in only for policies with
    ``needs_text = True``, from the outcome table's ``question`` column (a table without one is
    refused for such a policy, naming it). The text is what a deployed router sees of a question;
    it is never a feature column, so no declared feature and no outcome depends on it.
    """

    qids: np.ndarray
    seed: int = 0
    true_delta: np.ndarray | None = None
    texts: np.ndarray | None = None


def _state_attr(key: str) -> str:
    return f"{key}_"


class Policy(abc.ABC):
    """Base class. Subclasses set ``features`` (names read from the table) and implement score."""

    #: feature names this policy reads (resolved, without the ``feat.`` prefix); () = none
    features: tuple[str, ...] = ()
    #: True when ``fit`` learns something from development outcomes
    trainable: ClassVar[bool] = False
    #: True only for the oracle: the harness then passes the true delta in ScoreContext
    oracle: ClassVar[bool] = False
    #: True when ``score`` reads the question text (``ScoreContext.texts``), e.g. a rule on its
    #: words; the harness then passes it (docs/policies.md, "The question text")
    needs_text: ClassVar[bool] = False
    #: "base" or "extra" for reference policies that ARE a fixed decision (always-keep,
    #: always-extra), not a ranking: the threshold protocol then never tunes tau for them
    #: (tau = +inf or -inf), so always-keep cannot turn into always-extra under a low cost.
    fixed_route: ClassVar[str | None] = None
    #: True when the score is an estimate of the gain itself (expected delta, on the gain's
    #: scale), so that "score > 0" means "the extra arm is expected to help"; protocol C then
    #: uses threshold 0. Rankings on other scales (random, single signals) get a threshold
    #: chosen on development data instead.
    estimates_gain: ClassVar[bool] = False

    # ---- the state, declared once ------------------------------------------------------------
    #: configuration written into the state and checked when it is restored: {state key: codec},
    #: read from the attribute of that name (a constructor parameter, or a class constant such as
    #: ``kind``). A state restored into a policy configured otherwise is a HarnessError.
    state_params: ClassVar[Mapping[str, Codec]] = {}
    #: what ``fit`` learns: {state key: codec}; the value lives in attribute ``<key>_`` (set by
    #: ``fit`` or ``set_state`` only). The policy counts as fitted when all of them are set.
    fitted_attributes: ClassVar[Mapping[str, Codec]] = {}
    #: True when the policy cannot score before ``fit``/``set_state`` (then ``get_state`` of an
    #: unfitted policy is an error); False: an unfitted policy scores and its state is ``{}``.
    requires_fit: ClassVar[bool] = True

    name: str = "policy"

    def fit(self, X: pd.DataFrame, delta: np.ndarray, groups: np.ndarray, seed: int = 0) -> "Policy":
        """Learn from development questions. Default: nothing to learn."""
        return self

    @abc.abstractmethod
    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        """One float per row of X; larger = more worth the extra arm."""

    # ---- parameters (scikit-learn style) -------------------------------------------------------
    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The constructor's named parameters (``*args``/``**kwargs`` are not parameters)."""
        init = cls.__init__
        if init is object.__init__:
            return ()
        sig = inspect.signature(init)
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return tuple(n for n, p in sig.parameters.items() if n != "self" and p.kind in kinds)

    def get_params(self) -> dict[str, Any]:
        """{constructor parameter: value}, read from the attribute of the same name.

        A parameter the constructor does not store under its own name is a HarnessError naming
        it: without it the harness cannot rebuild (``type(p)(**p.get_params())``) or record the
        policy.
        """
        out: dict[str, Any] = {}
        for key in self.param_names():
            try:
                out[key] = getattr(self, key)
            except AttributeError:
                raise HarnessError(
                    f"policy {self.name!r} ({type(self).__name__}): constructor parameter {key!r} is not stored "
                    f"as self.{key}; store every parameter under its own name (get_params reads them back)"
                ) from None
        return out

    # ---- fitted state --------------------------------------------------------------------------
    def is_fitted(self) -> bool:
        """True when every declared fitted attribute is set (always True without any)."""
        return all(_state_attr(k) in vars(self) for k in self.fitted_attributes)

    def get_state(self) -> dict[str, Any]:
        """Fitted state as strict JSON (see :func:`check_json_state`; frozen by the harness).

        Generic: the declared ``state_params`` and ``fitted_attributes``, encoded by their
        codecs. Unfitted: ``{}`` when the policy scores without fitting (``requires_fit``
        False), else a HarnessError. Without declarations: ``{}``.
        """
        if self.fitted_attributes and not self.is_fitted():
            if self.requires_fit:
                raise HarnessError(f"policy {self.name!r}: get_state() before fit()")
            return {}
        state = {key: codec.encode(getattr(self, key), self) for key, codec in self.state_params.items()}
        for key, codec in self.fitted_attributes.items():
            state[key] = codec.encode(getattr(self, _state_attr(key)), self)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what ``get_state`` returned: check the ``state_params`` against this policy's
        configuration, then set every fitted attribute. ``{}`` unfits a policy that scores
        without fitting. Unknown or missing keys are a HarnessError naming them."""
        if not isinstance(state, dict):
            raise HarnessError(f"policy {self.name!r}: state must be a dict, got {type(state).__name__}")
        declared = (*self.state_params, *self.fitted_attributes)
        if not state and not self.requires_fit:
            for key in self.fitted_attributes:
                vars(self).pop(_state_attr(key), None)
            return
        if state and not declared:
            raise ValueError(f"{type(self).__name__} has no state, got keys {sorted(state)}")
        label = f"policy {self.name!r} ({type(self).__name__})"
        for key, codec in self.state_params.items():  # first: is this state for this configuration?
            if key not in state:
                raise HarnessError(f"{label}: state lacks {key!r}")
            mine = codec.encode(getattr(self, key), self)
            if state[key] != mine:
                raise HarnessError(
                    f"policy {self.name!r}: state is for {key} {state[key]!r}, but this policy has {key} {mine!r} "
                    f"(a state fitted on {key} {state[key]!r} restores only into a policy configured the same way)"
                )
        unknown = sorted(set(state) - set(declared))
        if unknown:
            raise HarnessError(f"{label}: unknown state key(s) {unknown}; it declares {list(declared)}")
        missing = [k for k in self.fitted_attributes if k not in state]
        if missing:
            raise HarnessError(f"{label}: state lacks fitted value(s) {missing}")
        for key, codec in self.fitted_attributes.items():
            setattr(self, _state_attr(key), codec.decode(state[key], self))


def policy_params(policy: Policy) -> dict[str, Any]:
    """``policy.get_params()`` as strict JSON (tuples become lists), for the frozen record.

    Raises :class:`PolicyStateError` naming the policy and parameter when a value is not JSON.
    """
    params = _copy_json(policy.get_params())
    problem = json_problem(params, "params", finite=True, tuples=False, str_keys=True)
    if problem is not None:
        where, what = problem
        raise PolicyStateError(f"policy {getattr(policy, 'name', type(policy).__name__)!r} {where}: {what}")
    return params
