"""A plugin policy's methods, called under the plugin guard (``harness.plugin_guard``).

Why a wrapper: a plugin policy is called by every protocol, by plugin protocols and by
``check_policy``; wrapping its methods once, where the policy is made, covers every caller. Each
call of ``fit`` / ``score`` / ``get_state`` / ``set_state`` / ``get_params`` of a policy that is
not the harness's own:

- an error is re-raised as :class:`PluginError` naming the plugin, the method and the first line
  of the error; ``sys.exit`` and other process-ending exceptions too; Ctrl-C and stop signals
  propagate, marked with the call (the run ends KILLED with a line naming it);
- ``fit`` and ``score`` run under the time limits in force (``limits.fit_s``, ``limits.score_s``);
- ``score``'s result is read by the score rule (``policies.scores.checked_scores``): a Series
  aligned by its index, anything but one finite number per question refused; the first call per
  plugin class is repeated to check that the scores are the same.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from harness.errors import HarnessError
from harness.plugin_guard import PluginError, first_line, limit_of, plugin_call
from policies.base import Policy
from policies.scores import checked_scores

PLUGIN_METHODS = ("fit", "score", "fit_arms", "score_arms", "get_state", "set_state", "get_params")
# the methods a time limit applies to, and its key limits.<key>_s (an n-way policy's fit_arms and
# score_arms are its fit and score)
TIMED_METHODS = {"fit": "fit", "score": "score", "fit_arms": "fit", "score_arms": "score"}
_OWN_PACKAGES = ("policies", "harness")


def _is_builtin(cls: type) -> bool:
    return cls.__module__.split(".", 1)[0] in _OWN_PACKAGES


def _guarded(method: Callable, name: str, who: str, policy: Any, args: tuple, kwargs: dict) -> Any:
    """One call of the plugin's ``method`` under the guard, its errors named."""
    timed = TIMED_METHODS.get(name)
    limit = limit_of(timed) if timed else None
    try:
        with plugin_call(who, name, limit, f"limits.{timed}_s" if limit is not None else None):
            return method(policy, *args, **kwargs)
    except HarnessError:
        raise
    except Exception as exc:  # noqa: BLE001 - said with the plugin named, the cause kept
        first = first_line(exc)
        raise PluginError(f"{who}: {name}() raised {type(exc).__name__}" + (f": {first}" if first else "")) from exc


def _score_rows(args: tuple, kwargs: dict) -> tuple:
    """(the rows of X, the questions' ids) of a ``score(X, ctx)`` call."""
    X = args[0] if args else kwargs.get("X")
    ctx = args[1] if len(args) > 1 else kwargs.get("ctx")
    return getattr(X, "index", None), getattr(ctx, "qids", None)


def _naming_method(name: str, method: Callable, origin: str, label: str) -> Callable:
    who = f"policy plugin {origin} ({label})"

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        out = _guarded(method, name, who, self, args, kwargs)
        if name != "score":
            return out
        rows, qids = _score_rows(args, kwargs)
        if rows is not None:
            out = checked_scores(out, rows, qids, who)
        if not type(self).__dict__.get("_score_repeat_checked"):
            type(self)._score_repeat_checked = True  # once per plugin class and process
            _check_repeatable_score(self, method, args, kwargs, out, who)
        return out

    return call


def _check_repeatable_score(policy: Any, method: Callable, args: tuple, kwargs: dict, first: Any, who: str) -> None:
    """A second ``score`` on copies of the same rows must give the same scores (the harness scores
    a policy more than once and compares the results): a PluginError naming the plugin otherwise.
    Scores that are not numbers are left to the checks that read them."""
    import copy

    import numpy as np

    again = _guarded(method, "score", who, policy, copy.deepcopy(args), copy.deepcopy(kwargs))
    rows, qids = _score_rows(args, kwargs)
    try:
        if rows is not None:
            again = checked_scores(again, rows, qids, who)
        a, b = np.asarray(first, dtype=float), np.asarray(again, dtype=float)
    except (TypeError, ValueError):
        return
    same = a.shape == b.shape and bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())
    if not same:
        if a.shape != b.shape:
            detail = f"{b.shape} scores after {a.shape}"
        else:
            i = int(np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))))[0])
            detail = f"first difference at row {i}: {float(a.flat[i])!r} then {float(b.flat[i])!r}"
        raise PluginError(f"{who}: score() gave other scores on a second call with the same rows ({detail}); "
                          "a policy must score deterministically (draw any randomness from the seed it is given)")


_NAMING_CLASSES: dict[tuple[type, str], type] = {}


def name_plugin_errors(policy: Policy, origin: str) -> Policy:
    """``policy`` itself, whose fit / score / state methods run under the plugin guard and re-raise
    an error as PluginError naming ``origin`` (the entry point or ``_target_``) and the method;
    built-in policies are left as they are. Done by a subclass of the same name and module
    (clones stay wrapped)."""
    cls = type(policy)
    if _is_builtin(cls) or getattr(cls, "_names_plugin_errors", False):
        return policy
    key = (cls, origin)
    if key not in _NAMING_CLASSES:
        label = f"{cls.__module__}.{cls.__qualname__}"
        body = {m: _naming_method(m, getattr(cls, m), origin, label) for m in PLUGIN_METHODS if callable(getattr(cls, m, None))}
        body.update(_names_plugin_errors=True, __module__=cls.__module__, __qualname__=cls.__qualname__,
                    __doc__=cls.__doc__)
        _NAMING_CLASSES[key] = type(cls.__name__, (cls,), body)
    policy.__class__ = _NAMING_CLASSES[key]
    return policy


def constructed(make: Callable[[], Any], what: str) -> Any:
    """``make()`` (a plugin policy's constructor) under the plugin guard: a ``sys.exit`` or an
    interrupt in it is said like one in any other method."""
    with plugin_call(f"policy plugin {what}", "__init__"):
        return make()
