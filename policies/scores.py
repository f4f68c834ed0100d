"""What a policy's ``score`` may return, and how the harness reads it: one real number per
question, in the questions' order, all finite (docs/policies.md "Scores").

Why one rule, read in one place: the harness scores a policy in every protocol and in
``check_policy``; a score read one way here and another way there would route different
questions. Refused, in one line naming the policy:

- anything whose values are not real numbers (strings, objects, None, complex, dates);
- anything that is not one-dimensional (a DataFrame, an (n, 1) array, a scalar);
- a length other than the number of questions; a NaN or an infinite score;
- a pandas Series whose index says nothing about which score is whose (see :func:`aligned`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.errors import HarnessError

NUMBER_KINDS = "biuf"  # numpy dtype kinds of real numbers: bool, int, unsigned, float


class ScoreError(HarnessError):
    """A policy's scores break the rule above; the message names the policy and what was wrong."""


def aligned(scores: pd.Series, rows: pd.Index, qids: Any, who: str) -> pd.Series:
    """A Series of scores in the questions' order. Its index decides which score is whose:

    - the questions' ids (``ScoreContext.qids``), in any order: reordered to the questions' order;
    - else the labels of the rows of the frame ``score`` got (``X.index``), in any order:
      reordered to the rows' order;
    - anything else (other labels, a label twice, missing questions) is refused: the scores
      cannot be matched to the questions.
    """
    index = scores.index
    n = len(rows)
    if len(scores) != n:
        return scores  # the length check names the counts
    if not index.is_unique:
        raise ScoreError(f"{who} returned a pandas Series whose index holds a label twice; "
                         "index it by the questions' ids (ScoreContext.qids) or by the rows of X, once each")
    for target in ([] if qids is None else [pd.Index(np.asarray(qids))]) + [rows]:
        if index.equals(target):
            return scores
        if target.is_unique and index.isin(target).all():
            return scores.reindex(target)
    raise ScoreError(f"{who} returned a pandas Series whose index matches neither the questions' ids "
                     "(ScoreContext.qids) nor the rows of X (first label "
                     f"{index[0]!r}); return a 1-D array in the rows' order, or a Series indexed by either")


def as_numbers(raw: Any, rows: pd.Index, qids: Any, who: str) -> np.ndarray:
    """``raw`` as an array of real numbers, a Series put in the questions' order (:func:`aligned`);
    a DataFrame or values that are not real numbers are a ScoreError naming ``who``. The shape
    and the values are the caller's to check."""
    if isinstance(raw, pd.DataFrame):
        raise ScoreError(f"{who} returned a DataFrame of shape {raw.shape}; expected one score per question "
                         f"(a 1-D array of {len(rows)} numbers, or a Series)")
    if isinstance(raw, pd.Series):
        raw = aligned(raw, rows, qids, who)
        if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_complex_dtype(raw.dtype):
            raw = raw.to_numpy(dtype=float, na_value=np.nan)
        else:
            raw = raw.to_numpy()
    try:
        arr = np.asarray(raw)
    except (TypeError, ValueError) as exc:  # a ragged list
        raise ScoreError(f"{who} returned scores that are not an array of numbers ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:120]})") from None
    if arr.dtype.kind not in NUMBER_KINDS:
        first = arr.reshape(-1)[0] if arr.size else None
        first = first.item() if isinstance(first, np.generic) else first  # 'a', not np.str_('a')
        raise ScoreError(f"{who} returned scores of dtype {arr.dtype} (first value {first!r}); expected real numbers, "
                         "one float per question")
    return arr


def checked_scores(raw: Any, rows: pd.Index, qids: Any, who: str) -> np.ndarray:
    """``raw`` (what ``score`` returned for the rows ``rows`` of X, whose questions are ``qids``)
    as a 1-D float array in the questions' order, or a ScoreError naming ``who`` (the policy)."""
    n = len(rows)
    arr = as_numbers(raw, rows, qids, who)
    if arr.ndim != 1:
        raise ScoreError(f"{who} returned scores of shape {arr.shape}; expected shape ({n},), one score per question")
    if len(arr) != n:
        raise ScoreError(f"{who} returned {len(arr)} scores for {n} questions")
    arr = arr.astype(float, copy=False)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ScoreError(f"{who} returned non-finite (NaN or inf) scores for {int(bad.sum())} questions")
    return arr
