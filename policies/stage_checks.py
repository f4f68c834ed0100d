"""The contract checks of a cascade stage's stop rule (``policies.cascade_stages.CascadeStage``),
run by ``check_policy`` when it is handed a stage: fitted and scored through the harness's own
call (``fit_and_score``: only the features available by the stage), one score per question,
finite or -inf, the same scores on a second call and from a second fit, each question scored on
its own (a subset scores as in the whole), inputs untouched.

Why: a plugin stop rule decides which questions pay the later stages; the search and the
recount rely on these guarantees as they do for a policy's score, checked the same way (one
named check per failure).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from policies.cascade_stages import CascadeStage

STAGE_CHECKS = ("is_stage", "fit_score", "one_score_per_row", "no_nan_or_plus_inf", "repeatable_score",
                "deterministic_fit", "row_independence", "inputs_untouched")
ARM, LATER = "keep", "hybrid"  # the check table's stage arm and the later arm


def stage_table(table: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(features, stop_ok, groups) of a check table: stop_ok = keep's outcome >= hybrid's; the
    stage's own top-1 score ``keep_top1`` is dense's when the table has none."""
    feats = table[[c for c in table.columns if c.startswith("feat.")]].copy()
    feats.columns = [c[len("feat."):] for c in feats.columns]
    if f"{ARM}_top1" not in feats.columns and "dense_top1" in feats.columns:  # a stop rule's default feature:
        feats[f"{ARM}_top1"] = feats["dense_top1"]  # the synthetic table's keep reranks dense's list
    metric = next(c.split(".", 1)[1] for c in table.columns if c.startswith(f"{ARM}.hit@"))
    ok = (table[f"{ARM}.{metric}"].to_numpy(float) >= table[f"{LATER}.{metric}"].to_numpy(float)).astype(int)
    return feats.reset_index(drop=True), ok, table["doc_id"].astype(str).to_numpy()


def _fit_score(stage: CascadeStage, dev, test: pd.DataFrame, seed: int, fail) -> tuple[CascadeStage, np.ndarray]:
    cols = list(test.columns)
    try:
        stage.setup(ARM, cols)
        stage.fit(dev[0].loc[:, cols], dev[1], dev[2], seed)
        return stage, np.asarray(stage.score(test.loc[:, cols]), dtype=float)
    except Exception as exc:  # noqa: BLE001 - said as the failed check
        fail("fit_score", f"setup / fit / score raised {type(exc).__name__}: {exc}")


def run_stage_checks(stage: CascadeStage, table: pd.DataFrame, seed: int, fail) -> tuple[str, ...]:
    """Every stage check on copies of ``stage`` (never fitted itself); ``fail(check, message)``
    raises the named error."""
    if not isinstance(stage, CascadeStage):
        fail("is_stage", f"{type(stage).__name__} is not a policies.cascade_stages.CascadeStage")
    X, ok, groups = stage_table(table)
    half = len(X) // 2
    dev = (X.iloc[:half].reset_index(drop=True), ok[:half], groups[:half])
    test = X.iloc[half:].reset_index(drop=True)
    kept = (dev[0].copy(), dev[1].copy(), test.copy())
    fresh = copy.deepcopy(stage)
    fitted, scores = _fit_score(copy.deepcopy(fresh), dev, test, seed, fail)
    if scores.shape != (len(test),):
        fail("one_score_per_row", f"score returned shape {scores.shape}, expected ({len(test)},)")
    if np.isnan(scores).any() or (scores == np.inf).any():
        fail("no_nan_or_plus_inf", f"{int((np.isnan(scores) | (scores == np.inf)).sum())} score(s) are NaN or +inf "
                                   "(a stop score is finite, or -inf: never stops)")
    if not np.array_equal(np.asarray(fitted.score(test.copy()), dtype=float), scores, equal_nan=True):
        fail("repeatable_score", "a second score on the same rows gave other scores")
    _, again = _fit_score(copy.deepcopy(fresh), dev, test, seed, fail)
    if not np.array_equal(again, scores):
        fail("deterministic_fit", "a second fit on the same data and seed scores differently")
    part = np.arange(0, len(test), 3)
    sub = np.asarray(fitted.score(test.iloc[part].reset_index(drop=True)), dtype=float)
    if not np.allclose(sub, scores[part], rtol=1e-9, atol=1e-12):
        fail("row_independence", "scoring a subset of the questions gives them other scores than scoring all")
    if not (kept[0].equals(dev[0]) and np.array_equal(kept[1], dev[1]) and kept[2].equals(test)):
        fail("inputs_untouched", "fit or score changed the frames or arrays it was given")
    return STAGE_CHECKS
