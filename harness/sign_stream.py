"""Random sign patterns shared by every sign-flip computation of a process, and a reused buffer.

Why a module: a sweep's end runs hundreds of sampled sign-flip tests with one seed; the signs
of one seed are one stream (see ``sign_stream``), drawn once and read by every test, and their
float copies go into one reused buffer instead of fresh pages each time.
"""

from __future__ import annotations

import numpy as np

SIGN_STREAM_MAX = 64_000_000  # signs kept per seed (int8: 64 MB); longer streams are drawn each time
_SIGN_STREAMS: dict[int, tuple[np.random.Generator, np.ndarray]] = {}


def sign_stream(seed, n: int) -> np.ndarray:
    """The first ``n`` signs (+1/-1, int8) of seed ``seed``'s sign stream: the generator's 0/1
    draws, 32-bit, one word per sign (Lemire's method never rejects for two values, and the
    generator does not buffer between draws), so a test over k documents that reads n_perm * k
    signs in a row as its patterns gets the signs it would draw for itself, whatever k.

    Why kept: a sweep's end runs hundreds of sampled tests with the same seed and different k;
    drawing is most of a test's time, and one stream per seed, extended as needed, serves all."""
    key = int(seed) if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)) else None
    if key is None or n > SIGN_STREAM_MAX:
        return _draw_signs(np.random.default_rng(seed), n)
    rng, kept = _SIGN_STREAMS.get(key) or (np.random.default_rng(key), np.empty(0, dtype=np.int8))
    if kept.size < n:
        grown = np.empty(max(n, min(SIGN_STREAM_MAX, 2 * kept.size)), dtype=np.int8)
        grown[:kept.size] = kept
        grown[kept.size:] = _draw_signs(rng, grown.size - kept.size)
        grown.setflags(write=False)
        kept = grown
        if len(_SIGN_STREAMS) >= 2:
            _SIGN_STREAMS.clear()
        _SIGN_STREAMS[key] = (rng, kept)
    return kept[:n]


def _draw_signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` signs drawn from ``rng`` as 0/1 in 32-bit words, in parts of at most 2**22."""
    out = np.empty(n, dtype=np.int8)
    for start in range(0, n, 1 << 22):
        part = out[start:start + (1 << 22)]
        np.subtract(np.multiply(rng.integers(0, 2, size=part.size, dtype=np.int32), 2), 1, out=part, casting="unsafe")
    return out


_SCRATCH = [np.empty(0)]


def float_scratch(n: int) -> np.ndarray:
    """A reused float64 buffer of ``n`` elements, its contents the caller's to overwrite (one
    caller at a time): the sign-flip sums write millions of float signs per call, and a fresh
    buffer each time costs a page fault per 4 kB on first touch, more than the arithmetic. It
    grows to the largest size asked (4,096 patterns x the documents of a test)."""
    if _SCRATCH[0].size < n:
        _SCRATCH[0] = np.empty(n)
    return _SCRATCH[0][:n]
