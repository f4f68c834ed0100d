"""``check_policy``: does a policy keep the contract the harness relies on?

Like scikit-learn's ``check_estimator``: run it on a built-in, on a plugin, or on the policy you
are writing, before a sweep spends an hour on it. Each failed check raises one
:class:`PolicyCheckError` naming the policy and the check; the checks, in order:

``is_policy``
    the object is a :class:`policies.base.Policy`.
``features``
    ``features`` is a tuple (or list) of distinct names, each a column of the check table.
``get_params``
    ``get_params()`` returns every constructor parameter, and ``type(p)(**p.get_params())`` is
    a new policy with the same parameters (what the harness does for every fold).
``fit_score``
    ``fit`` (trainable policies only, as in the harness) and ``score`` run on the check table.
``one_score_per_row``
    ``score`` returns a 1-D array of real numbers with one value per row of X (a pandas Series
    is read by its index, as the harness reads it: ``policies.scores``).
``finite_scores``
    every score is finite (the harness refuses NaN and +-inf).
``repeatable_score``
    a second ``score`` of the same fitted policy on the same rows gives the same scores (the
    harness scores a policy more than once and compares the results).
``inputs_untouched``
    the frame, ``delta``, ``groups`` and the ScoreContext arrays given to ``fit``/``score`` are
    unchanged afterwards.
``params_unchanged_by_fit``
    ``get_params()`` is the same after ``fit`` (fitted values go to attributes ending in ``_``).
``deterministic_fit``
    two new instances fitted with the same seed on the same rows score bit-identically and
    have the same state.
``declared_features_only``
    fitted and scored on a frame with extra, undeclared columns, the scores equal those on the
    frame holding only the declared columns, and stay equal when the undeclared columns are
    shuffled; a policy that fails on the declared columns alone but not on the wider frame
    reads a column it does not declare. (Select your columns by name: the harness passes
    exactly the declared ones, in declared order, but a check cannot tell position from name.)
``row_independence``
    the scores of a subset of rows are that subset of the scores, and permuting the rows
    permutes the scores (``rtol`` 1e-12: matrix products may round differently by block).
``state_round_trip``
    ``get_state()`` is strict JSON (:func:`policies.base.check_json_state`), and a new instance
    given that state through JSON text scores bit-identically and returns the same state.

A policy that scores every arm (``n_way``) is checked by ``policies.arm_checks``, and a cascade
stage's stop rule (``policies.cascade_stages.CascadeStage``) by ``policies.stage_checks``, each with
its own named checks.

The check table is the harness's synthetic outcome table (``harness.synthetic``; 40 documents,
200 questions): even-numbered documents to fit, odd ones to score. Pass ``table=`` for a
policy that reads features the synthetic table lacks, and ``missing_values=True`` to put NaN
and +-inf into the declared feature columns (the built-ins impute them; a policy whose features
are never missing need not).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.io import canonical_json
from harness.retrieval.feature_names import expand
from harness.task import RoutingTask
from policies.arm_checks import run_arm_checks
from policies.base import Policy, ScoreContext, check_json_state
from policies.cascade_stages import CascadeStage
from policies.scores import ScoreError, as_numbers
from policies.stage_checks import run_stage_checks

CHECKS = (
    "is_policy",
    "features",
    "get_params",
    "fit_score",
    "one_score_per_row",
    "finite_scores",
    "repeatable_score",
    "inputs_untouched",
    "params_unchanged_by_fit",
    "deterministic_fit",
    "declared_features_only",
    "row_independence",
    "state_round_trip",
)
ROW_RTOL = 1e-12


class PolicyCheckError(HarnessError, AssertionError):
    """One failed contract check; ``policy`` and ``check`` name what failed."""

    def __init__(self, policy: str, check: str, detail: str):
        self.policy, self.check, self.detail = policy, check, detail
        super().__init__(f"check_policy: policy {policy} fails check {check!r}: {detail}")


def _label(policy: Policy) -> str:
    return f"{getattr(policy, 'name', 'policy')!r} ({type(policy).__module__}.{type(policy).__qualname__})"


@contextlib.contextmanager
def _check(policy: Policy, name: str, doing: str = "") -> Iterator[None]:
    """Turn any failure inside into a PolicyCheckError naming the policy and the check."""
    try:
        yield
    except PolicyCheckError:
        raise
    except _Fail as exc:
        raise PolicyCheckError(_label(policy), name, str(exc)) from None
    except Exception as exc:  # the policy raised
        where = f" {doing}" if doing else ""
        raise PolicyCheckError(_label(policy), name, f"raised{where}: {type(exc).__name__}: {exc}") from exc


class _Fail(Exception):
    """A check's own finding (not an exception of the policy)."""


@dataclass(frozen=True)
class CheckReport:
    """What ``check_policy`` found when every check passed: the checks run, in order, and the
    ones that did not apply (``deterministic_fit`` for a policy that does not learn)."""

    policy: str
    passed: tuple[str, ...]
    not_applicable: tuple[str, ...] = ()
    missing_values: bool = False

    def __str__(self) -> str:
        extra = f"; not applicable: {', '.join(self.not_applicable)}" if self.not_applicable else ""
        nan = " (with NaN and +-inf in the declared features)" if self.missing_values else ""
        return f"check_policy: policy {self.policy} passed all {len(self.passed)} checks{nan}: {', '.join(self.passed)}{extra}"


def undeclared_fitted(policy: Policy, fitted: Policy) -> list[str]:
    """Attributes ending in ``_`` that ``fit`` set but ``fitted_attributes`` does not declare:
    the generic ``get_state`` does not save them, so a restored policy lacks them."""
    if type(fitted).get_state is not Policy.get_state:  # the policy writes its own state
        return []
    declared = {f"{k}_" for k in fitted.fitted_attributes}
    before = set(vars(policy))
    return sorted(k for k in vars(fitted) if k.endswith("_") and not k.startswith("_") and k not in declared
                  and k not in before)


def _state_hint(policy: Policy, fitted: Policy) -> str:
    missing = undeclared_fitted(_clone(policy), fitted)
    if not missing:
        return ""
    keys = ", ".join(f'"{k[:-1]}": <codec>' for k in missing)
    return (f" (fit set {missing} but fitted_attributes does not declare them, so get_state() does not save "
            f"them: declare fitted_attributes = {{{keys}}} with codecs from policies.base, e.g. FLOAT, FLOATS)")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return repr(a) == repr(b)


@dataclass
class _Part:
    """One side of the split: the task and the frames a policy sees."""

    task: RoutingTask
    narrow: pd.DataFrame  # the declared columns, in declared order (what the harness passes)
    wide: pd.DataFrame  # every column of the table plus a noise column, declared ones among them


def _split(table: pd.DataFrame, features: tuple[str, ...], seed: int, missing_values: bool) -> tuple[_Part, _Part]:
    task = RoutingTask.from_table(table, source="the check table")
    if missing_values and features and len(task.qids) >= 12:
        feats = task.features.copy()
        for j, name in enumerate(expand(features, feats.columns)[0]):  # patterns: every column they match
            col = feats[name].to_numpy(dtype=float, copy=True)
            col[[j % 3, 3 + j % 4]] = np.nan
            col[7 + j % 3] = np.inf
            col[10 + j % 2] = -np.inf
            feats[name] = col
        task = dataclasses.replace(task, features=feats)
    docs = sorted(set(task.groups.tolist()))
    even = {d for i, d in enumerate(docs) if i % 2 == 0}
    is_dev = np.array([g in even for g in task.groups])
    rng = np.random.default_rng(seed)
    parts = []
    for idx in (np.flatnonzero(is_dev), np.flatnonzero(~is_dev)):
        t = task.take(idx)
        narrow = t.feature_matrix(features)
        wide = t.features.copy()
        wide["undeclared_noise"] = rng.normal(size=t.n)
        cols = list(wide.columns)
        rng.shuffle(cols)  # declared columns somewhere among the others, not first
        parts.append(_Part(t, narrow, wide.loc[:, cols]))
    return parts[0], parts[1]


def _ctx(policy: Policy, task: RoutingTask, seed: int) -> ScoreContext:
    """The context a protocol would give; a policy that reads the question text gets the table's
    (``table=``), or on a table without text one stand-in text per question, "question <qid>"."""
    texts = None
    if getattr(policy, "needs_text", False):
        texts = task.texts.copy() if task.texts is not None else np.array([f"question {q}" for q in task.qids])
    return ScoreContext(qids=task.qids.copy(), seed=seed, true_delta=task.delta.copy() if policy.oracle else None,
                        texts=texts)


def _clone(policy: Policy) -> Policy:
    new = type(policy)(**policy.get_params())
    if "name" in vars(policy):
        new.name = policy.name
    return new


def _fit(policy: Policy, X: pd.DataFrame, task: RoutingTask, seed: int) -> Policy:
    if policy.trainable:
        policy.fit(X, task.delta.copy(), task.groups.copy(), seed)
    return policy


def _read(raw, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
    """What the harness reads from ``score``'s result (``policies.scores``: a Series aligned by
    its index; strings, objects or a DataFrame refused), as floats."""
    return as_numbers(raw, X.index, ctx.qids, "score()").astype(float)


def _score(policy: Policy, X: pd.DataFrame, task: RoutingTask, seed: int) -> np.ndarray:
    ctx = _ctx(policy, task, seed)
    return _read(policy.score(X, ctx), X, ctx)


def _state_text(policy: Policy) -> str:
    state = policy.get_state()
    check_json_state(getattr(policy, "name", type(policy).__name__), state)
    return canonical_json(state)


def check_policy(
    policy: Policy,
    table: pd.DataFrame | None = None,
    *,
    seed: int = 0,
    missing_values: bool = False,
    quiet: bool = False,
) -> CheckReport:
    """Run every contract check (see the module docstring) on a fresh copy of ``policy``.

    ``policy`` itself is never fitted or changed: each check works on new instances built from
    ``get_params()``. When all pass, prints one line saying which (unless ``quiet``) and returns
    a :class:`CheckReport`; raises :class:`PolicyCheckError` at the first failure, naming the
    policy and the check (and, when a restored policy lacks what ``fit`` set, the attributes to
    declare in ``fitted_attributes``).
    """
    from harness.synthetic import synthetic_outcome_table

    if table is None:
        table = synthetic_outcome_table(n_docs=40, questions_per_doc=5, seed=seed)
    if isinstance(policy, CascadeStage):  # a cascade's stop rule: its own contract (policies.stage_checks)
        return _report(CheckReport(_label(policy), run_stage_checks(policy, table, seed, _arm_fail(policy))), quiet)
    if not isinstance(policy, Policy):
        raise PolicyCheckError(repr(policy), "is_policy", f"{type(policy).__name__} is not a policies.base.Policy")
    if getattr(policy, "n_way", False):  # scores every arm: the n-way contract (policies.arm_checks)
        return _report(CheckReport(_label(policy), run_arm_checks(policy, table, seed, _arm_fail(policy))), quiet)

    features, dev, test = _check_features(policy, table, seed, missing_values)
    params = _check_get_params(policy, features)
    fitted, scores = _check_fit_and_score(policy, features, params, dev, test, seed)
    if policy.trainable:  # before the checks below, which compare refits
        _check_deterministic_fit(policy, dev, test, seed, fitted, scores)
    _check_declared_features_only(policy, features, dev, test, seed, scores)
    _check_row_independence(policy, fitted, test, seed, scores)
    _check_state_round_trip(policy, fitted, test, seed, scores)
    skipped = () if policy.trainable else ("deterministic_fit",)
    report = CheckReport(_label(policy), tuple(c for c in CHECKS if c not in skipped), skipped, bool(missing_values))
    return _report(report, quiet)


def _report(report: "CheckReport", quiet: bool) -> "CheckReport":
    if not quiet:
        print(report)
    return report


def _arm_fail(policy: Policy):
    def fail(check: str, message: str):
        raise PolicyCheckError(_label(policy), check, message)

    return fail


def _check_features(policy: Policy, table: pd.DataFrame, seed: int, missing_values: bool) -> tuple:
    """``features`` is a tuple of distinct names; the check table split into (dev, test)."""
    with _check(policy, "features"):
        feats = policy.features
        if isinstance(feats, str) or not isinstance(feats, (tuple, list)):
            raise _Fail(f"features must be a tuple of names, got {feats!r}")
        if not all(isinstance(f, str) and f for f in feats):
            raise _Fail(f"features must be non-empty strings, got {list(feats)!r}")
        if len(set(feats)) != len(feats):
            raise _Fail(f"features lists a name twice: {list(feats)!r}")
        features = tuple(feats)
        dev, test = _split(table, features, seed, missing_values)
    return features, dev, test


def _check_get_params(policy: Policy, features: tuple[str, ...]) -> dict:
    """``get_params()`` rebuilds an equal, unfitted policy."""
    with _check(policy, "get_params"):
        params = policy.get_params()
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise _Fail(f"get_params() must return a dict with str keys, got {params!r}")
        try:
            twin = _clone(policy)
        except Exception as exc:
            raise _Fail(f"type(policy)(**get_params()) raised {type(exc).__name__}: {exc}") from exc
        twin_params = twin.get_params()
        diff = sorted(k for k in set(params) | set(twin_params) if not _same(params.get(k), twin_params.get(k)))
        if diff:
            raise _Fail(
                f"a new instance built from get_params() has other parameters {diff}: "
                f"{ {k: twin_params.get(k) for k in diff} } instead of { {k: params.get(k) for k in diff} }"
            )
        if tuple(twin.features) != features:
            raise _Fail(f"a new instance built from get_params() reads features {list(twin.features)} instead of {list(features)}")
    return params


def _check_fit_and_score(policy: Policy, features, params: dict, dev: _Part, test: _Part, seed: int) -> tuple:
    """Fit and score on the frames the harness passes: one finite, repeatable score per row,
    inputs and parameters as they were. Returns (the fitted copy, its scores)."""
    fitted = _clone(policy)
    fit_inputs = (dev.narrow.copy(deep=True), dev.task.delta.copy(), dev.task.groups.copy())
    X_fit, d_fit, g_fit = dev.narrow.copy(deep=True), dev.task.delta.copy(), dev.task.groups.copy()
    X_score = test.narrow.copy(deep=True)
    ctx = _ctx(fitted, test.task, seed)
    ctx_before = (ctx.qids.copy(), None if ctx.true_delta is None else ctx.true_delta.copy())
    try:
        doing = "in fit"
        if fitted.trainable:
            fitted.fit(X_fit, d_fit, g_fit, seed)
        doing = "in score"
        raw = fitted.score(X_score, ctx)
    except Exception as exc:
        # Does it work once the frame also holds undeclared columns? Then it reads one of them.
        with _check(policy, "fit_score", doing):
            try:
                _score(_fit(_clone(policy), dev.wide.copy(), dev.task, seed), test.wide.copy(), test.task, seed)
            except Exception:
                raise exc from None
        raise PolicyCheckError(
            _label(policy),
            "declared_features_only",
            f"fails when given only its declared features {list(features)} ({type(exc).__name__}: {exc}) but not "
            "on a frame with more columns: it reads a column it does not declare",
        ) from exc
    with _check(policy, "one_score_per_row"):
        try:
            scores = _read(raw, X_score, ctx)
        except ScoreError as exc:
            raise _Fail(str(exc)) from None
        if scores.shape != (test.task.n,):
            raise _Fail(f"score() returned shape {scores.shape} for {test.task.n} rows; expected ({test.task.n},)")
    with _check(policy, "finite_scores"):
        bad = ~np.isfinite(scores)
        if bad.any():
            raise _Fail(f"{int(bad.sum())} of {len(scores)} scores are NaN or infinite (first at row {int(np.flatnonzero(bad)[0])})")
    with _check(policy, "repeatable_score", "in a second score call"):
        again = _score(fitted, test.narrow.copy(deep=True), test.task, seed)
        if again.shape != scores.shape or not np.array_equal(again, scores):
            detail = _first_diff(scores, again) if again.shape == scores.shape else f"shape {again.shape}"
            raise _Fail(f"a second score() of the same fitted policy on the same rows gives other scores ({detail}); "
                        "scores must depend only on the rows, the fitted state and ScoreContext")
    with _check(policy, "inputs_untouched"):
        if fitted.trainable:
            _same_frame(X_fit, fit_inputs[0], "the frame given to fit")
            _same_array(d_fit, fit_inputs[1], "delta given to fit")
            _same_array(g_fit, fit_inputs[2], "groups given to fit")
        _same_frame(X_score, test.narrow, "the frame given to score")
        _same_array(ctx.qids, ctx_before[0], "ScoreContext.qids given to score")
        if ctx_before[1] is not None:
            _same_array(ctx.true_delta, ctx_before[1], "ScoreContext.true_delta given to score")
    with _check(policy, "params_unchanged_by_fit"):
        after = fitted.get_params()
        diff = sorted(k for k in set(params) | set(after) if not _same(params.get(k), after.get(k)))
        if diff:
            raise _Fail(
                f"fit changed constructor parameter(s) {diff} (now { {k: after.get(k) for k in diff} }); "
                "keep parameters as given and store fitted values in attributes ending with '_'"
            )
    return fitted, scores


def _check_deterministic_fit(policy: Policy, dev: _Part, test: _Part, seed: int, fitted: Policy, scores) -> None:
    """Two fits with one seed on the same rows score and save the same."""
    with _check(policy, "deterministic_fit"):
        other = _fit(_clone(policy), dev.narrow.copy(), dev.task, seed)
        got = _score(other, test.narrow.copy(), test.task, seed)
        if not np.array_equal(got, scores):
            raise _Fail(f"two fits with seed {seed} on the same rows score differently ({_first_diff(scores, got)})")
        if not _same(other.get_state(), fitted.get_state()):
            raise _Fail(f"two fits with seed {seed} on the same rows give different states")


def _check_declared_features_only(policy: Policy, features, dev: _Part, test: _Part, seed: int, scores) -> None:
    """Undeclared columns, added or shuffled, change no score."""
    with _check(policy, "declared_features_only", "on a frame with undeclared columns"):
        wide = _score(_fit(_clone(policy), dev.wide.copy(), dev.task, seed), test.wide.copy(), test.task, seed)
        if not np.array_equal(wide, scores):
            raise _Fail(
                f"scores change when the frame also holds undeclared columns ({_first_diff(scores, wide)}); "
                f"select the declared features {list(features)} by name, not by position"
            )
        rng = np.random.default_rng(seed + 1)
        shuffled = []
        for part in (dev, test):
            frame = part.wide.copy()
            declared = set(expand(features, frame.columns)[0])  # a pattern "prefix*" declares its columns
            for col in frame.columns:
                if col not in declared:
                    frame[col] = frame[col].to_numpy()[rng.permutation(len(frame))]
            shuffled.append(frame)
        got = _score(_fit(_clone(policy), shuffled[0], dev.task, seed), shuffled[1], test.task, seed)
        if not np.array_equal(got, scores):
            raise _Fail(
                f"scores change when undeclared columns are shuffled ({_first_diff(scores, got)}): "
                f"the policy reads a column it does not declare (declared: {list(features)})"
            )


def _check_row_independence(policy: Policy, fitted: Policy, test: _Part, seed: int, scores) -> None:
    """A subset or a permutation of the rows gets those rows' scores."""
    with _check(policy, "row_independence"):
        n = test.task.n
        rng = np.random.default_rng(seed + 2)
        for what, idx in (("a subset of the rows", np.arange(n)[::-3]), ("a permutation of the rows", rng.permutation(n))):
            part = test.task.take(idx)
            got = _score(fitted, test.narrow.iloc[idx].reset_index(drop=True), part, seed)
            if got.shape != (len(idx),) or not np.allclose(got, scores[idx], rtol=ROW_RTOL, atol=ROW_RTOL):
                raise _Fail(
                    f"scoring {what} does not give those rows' scores ({_first_diff(scores[idx], got)}); "
                    "a question's score must depend on its own row only"
                )


def _check_state_round_trip(policy: Policy, fitted: Policy, test: _Part, seed: int, scores) -> None:
    """``get_state()`` through JSON into a new instance scores and saves the same."""
    try:
        with _check(policy, "state_round_trip"):
            text = _state_text(fitted)
            rebuilt = _clone(policy)
            rebuilt.set_state(json.loads(text))
            got = _score(rebuilt, test.narrow.copy(), test.task, seed)
            if not np.array_equal(got, scores):
                raise _Fail(f"a new instance given get_state() through JSON scores differently ({_first_diff(scores, got)})")
            again = _state_text(rebuilt)
            if again != text:
                raise _Fail("a new instance given get_state() returns another state from get_state()")
    except PolicyCheckError as exc:
        hint = _state_hint(policy, fitted)
        if not hint:
            raise
        raise PolicyCheckError(exc.policy, exc.check, exc.detail + hint) from exc.__cause__


def _first_diff(expected: np.ndarray, got: np.ndarray) -> str:
    expected, got = np.asarray(expected, dtype=float), np.asarray(got, dtype=float)
    if expected.shape != got.shape:
        return f"{got.shape[0] if got.ndim else 0} scores instead of {len(expected)}"
    differ = ~((expected == got) | (np.isnan(expected) & np.isnan(got)))
    if not differ.any():
        return "equal"
    i = int(np.flatnonzero(differ)[0])
    return f"{int(differ.sum())} of {len(expected)} differ, first at row {i}: {float(expected[i])!r} vs {float(got[i])!r}"


def _same_frame(got: pd.DataFrame, before: pd.DataFrame, what: str) -> None:
    try:
        pd.testing.assert_frame_equal(got, before, check_exact=True)
    except AssertionError as exc:
        raise _Fail(f"the policy changed {what}: {' '.join(str(exc).split())[:300]}; work on a copy") from None


def _same_array(got: np.ndarray, before: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    if got.shape != before.shape or not np.array_equal(got, before, equal_nan=got.dtype.kind == "f"):
        raise _Fail(f"the policy changed {what}; work on a copy")
