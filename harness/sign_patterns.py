"""The sign patterns of the sign-flip test on document totals, drawn and summed once.

Why a module of its own: every number of a paired comparison (the interval that agrees with the
test, the two one-sided tests against a margin, at the unadjusted level and again at the level a
verdict is decided at) sums the same seeded sign patterns over the same document totals, and a
sweep's end meets the same totals many times (the decision table's two passes, the verdicts'
comparisons with the fixed decisions, a difference met at several costs). Those sums, and the
numbers read from them, are pure functions of their inputs; ``Memo`` keeps them in bounded
least-recently-used maps keyed by every input (the arrays by their exact bytes), so a second ask
is a lookup that returns the same numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable

import numpy as np

from harness.sign_stream import exact_patterns, pack_signs, signed_sums
from harness.stats import SIGN_FLIP_EXACT_MAX

# The sampled sign patterns of one (documents, patterns, seed): every comparison of a decision
# table's budget (or of a policy comparison's cell) pairs the same documents under the same seed,
# so they draw the same patterns; kept once (bit-packed, at most PATTERN_CACHE_CELLS signs)
# instead of redrawing millions of signs per comparison.
PATTERN_CACHE_CELLS = 120_000_000
_PATTERNS: dict[tuple, np.ndarray] = {}
SUMS_KEPT = 1024  # pattern sums kept (n_perm floats each: 160 kB at 20,000 patterns, 160 MB at most)


class Memo:
    """A bounded least-recently-used map from exact keys to computed results: ``get(key,
    compute)`` returns the kept result of ``key`` or keeps and returns ``compute()``. A key must
    hold everything the result depends on; a result must not be changed by its reader (arrays
    are kept read-only, dicts handed out as copies by their callers)."""

    def __init__(self, size: int):
        self.size = int(size)
        self._kept: OrderedDict = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], object]):
        if key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        value = compute()
        self._kept[key] = value
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return value

    def clear(self) -> None:
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)


def array_key(values) -> tuple:
    """An array's exact identity for a ``Memo`` key: its dtype, shape and bytes."""
    a = np.ascontiguousarray(values)
    return a.dtype.str, a.shape, a.tobytes()


def seed_key(seed) -> Hashable | None:
    """The seed as a key, or None when it is not a plain integer (no seed, a generator): a draw
    that is not reproducible from its key is never kept."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        return None
    return int(seed)


def _sampled_signs(n_docs: int, n_perm: int, seed: int) -> np.ndarray:
    """The n_perm seeded sign patterns, packed by document (``sign_stream.pack_signs``: chunks
    of eight documents x patterns): the blocks a seeded generator draws (n_perm x n_docs, in the
    order and block sizes the draws always used: the same signs)."""
    key = (n_docs, n_perm, seed)
    got = _PATTERNS.get(key)
    if got is not None:
        return got
    rng = np.random.default_rng(seed)
    block = max(1, min(4096, 2_000_000 // n_docs))  # at most ~2 million signs drawn at once
    packed = np.empty(((n_docs + 7) // 8, n_perm), dtype=np.uint8)
    for start in range(0, n_perm, block):
        m = min(block, n_perm - start)
        packed[:, start:start + m] = pack_signs(rng.integers(0, 2, size=(m, n_docs), dtype=np.int8) * 2 - 1, axis=1)
    if n_perm * n_docs <= PATTERN_CACHE_CELLS:
        _PATTERNS.clear()  # one set kept: the comparisons of one budget or cell run together
        _PATTERNS[key] = packed
    return packed


def _sums_of_totals(totals: np.ndarray, n_perm: int, seed: int) -> np.ndarray:
    """s @ totals over the patterns s: exact, or the sampled ones (``sign_stream.signed_sums``)."""
    n_docs = len(totals)
    if n_docs <= SIGN_FLIP_EXACT_MAX:
        return signed_sums(exact_patterns(n_docs), np.asarray(totals, dtype=np.float64))
    if not np.any(totals != 0):
        return np.zeros(n_perm)
    return signed_sums(_sampled_signs(n_docs, n_perm, seed), np.asarray(totals, dtype=np.float64))


def _sums_of_sizes(sizes: np.ndarray, n_perm: int, seed: int) -> np.ndarray:
    """s @ sizes over the patterns s (exact, or the sampled ones)."""
    n_docs = len(sizes)
    if n_docs <= SIGN_FLIP_EXACT_MAX:
        return signed_sums(exact_patterns(n_docs), np.asarray(sizes, dtype=np.float64))
    return signed_sums(_sampled_signs(n_docs, n_perm, seed), np.asarray(sizes, dtype=np.float64))


_SUMS = Memo(SUMS_KEPT)


def _kept_sums(what: str, values: np.ndarray, n_perm: int, seed, compute) -> np.ndarray:
    """``compute(values, n_perm, seed)`` kept by (what, values' bytes, n_perm, seed), read-only."""
    sk = seed_key(seed)
    if sk is None:
        return compute(values, n_perm, seed)

    def fresh() -> np.ndarray:
        out = compute(values, n_perm, seed)
        out.setflags(write=False)
        return out

    return _SUMS.get((what, array_key(values), n_perm, sk), fresh)


def pattern_sums(totals: np.ndarray, sizes: np.ndarray, n_perm: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(s @ totals, s @ sizes over the sign patterns s, exact): all 2^n patterns when n <=
    SIGN_FLIP_EXACT_MAX documents, else ``n_perm`` seeded random ones (``_sampled_signs``).
    Each sum is kept (``Memo``) by its values, n_perm and seed; read-only arrays."""
    n_perm = int(n_perm)
    exact = len(totals) <= SIGN_FLIP_EXACT_MAX
    a = _kept_sums("totals", totals, n_perm, seed, _sums_of_totals)
    b = _kept_sums("sizes", sizes, n_perm, seed, _sums_of_sizes)
    return a, b, exact
