"""Random sign patterns shared by every sign-flip computation of a process, and their sums.

Why a module: a sweep's end runs hundreds of sampled sign-flip tests with one seed; the signs
of one seed are one stream (see ``sign_stream``), drawn once and read by every test, and every
test sums its patterns over its document totals the same way (``signed_sums``: bit-packed
signs, one order of additions on every machine).
"""

from __future__ import annotations

import functools
from collections import OrderedDict

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


@functools.lru_cache(maxsize=20)
def exact_patterns(k: int) -> np.ndarray:
    """All 2^k sign patterns over k documents, packed (``pack_signs``' layout): pattern i gives
    document j the sign of bit j of i (+1 when set), so byte c of pattern i is bits 8c..8c+7 of i."""
    i = np.arange(2 ** int(k), dtype=np.int64)
    out = np.stack([(i >> (8 * c)) & 0xFF for c in range((int(k) + 7) // 8)]).astype(np.uint8)
    out.setflags(write=False)
    return out


_PACKED: "OrderedDict[tuple, np.ndarray]" = OrderedDict()
PACKED_KEPT = 8  # packed pattern sets of the stream kept (one per document count a sweep's tests meet)


def stream_patterns(seed, n_perm: int, k: int) -> np.ndarray:
    """The first ``n_perm`` patterns over ``k`` documents of seed ``seed``'s stream (pattern i =
    signs i*k .. (i+1)*k - 1), packed (``pack_signs``: chunks x patterns); kept per (seed,
    n_perm, k) for a plain integer seed, since a sweep's end tests many totals of one size."""
    key = (int(seed), int(n_perm), int(k)) if isinstance(seed, (int, np.integer)) and not isinstance(
        seed, (bool, np.bool_)) else None
    if key is not None and key in _PACKED:
        _PACKED.move_to_end(key)
        return _PACKED[key]
    stream = sign_stream(seed, n_perm * k)
    out = np.empty(((k + 7) // 8, n_perm), dtype=np.uint8)
    for start in range(0, n_perm, 4096):  # 4,096 patterns at a time: memory stays flat
        m = min(4096, n_perm - start)
        out[:, start:start + m] = pack_signs(stream[start * k:(start + m) * k].reshape(m, k), axis=1)
    if key is not None:
        out.setflags(write=False)
        _PACKED[key] = out
        while len(_PACKED) > PACKED_KEPT:
            _PACKED.popitem(last=False)
    return out


def _draw_signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` signs drawn from ``rng`` as 0/1 in 32-bit words, in parts of at most 2**22."""
    out = np.empty(n, dtype=np.int8)
    for start in range(0, n, 1 << 22):
        part = out[start:start + (1 << 22)]
        np.subtract(np.multiply(rng.integers(0, 2, size=part.size, dtype=np.int32), 2), 1, out=part, casting="unsafe")
    return out


_BYTE_SIGNS = ((np.arange(256)[:, None] >> np.arange(8)) & 1) * 2.0 - 1.0  # (256 x 8): bit j of byte b as +-1


def pack_signs(signs: np.ndarray, axis: int) -> np.ndarray:
    """+1/-1 signs packed eight documents to a byte along ``axis`` (the documents' axis of a
    2-D array): (chunks x patterns) uint8, C-contiguous; bit j of byte c is document 8c + j,
    set for +1 (a short last chunk is padded with -1 signs on zero values)."""
    bits = np.packbits(np.asarray(signs) > 0, axis=axis, bitorder="little")
    return np.ascontiguousarray(bits if axis == 0 else bits.T)


def signed_sums(packed: np.ndarray, values: np.ndarray) -> np.ndarray:
    """s @ values for every pattern s of ``packed`` (``pack_signs``; ``values`` one per document),
    added in one fixed order: per chunk of eight documents its 256 signed partial sums
    (+-v_0 +- v_1 ... +- v_7, added in document order), then the chunks' partials in chunk order.

    Why not a matrix product: BLAS adds in an order its CPU kernel chooses (AVX2 and AVX-512
    builds differ in the last bits), and it needs the signs as a float matrix, eight bytes per
    sign. This order is the same on every machine, and it reads one byte per eight signs."""
    n_chunks = packed.shape[0]
    v = np.zeros(n_chunks * 8)
    v[:len(values)] = values
    v = v.reshape(n_chunks, 8)
    tables = _BYTE_SIGNS[None, :, 0] * v[:, 0:1]
    for j in range(1, 8):
        tables = tables + _BYTE_SIGNS[None, :, j] * v[:, j:j + 1]
    out = tables[0][packed[0]]
    for c in range(1, n_chunks):
        out += tables[c][packed[c]]
    return out
