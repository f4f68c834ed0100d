"""Unit embeddings cached by content hash, so a grown corpus encodes only its new units.

Why: the outcome table's key holds the dataset's fingerprint, so adding ten passages to a
10^5-passage corpus makes a new table, and without this cache every passage would be encoded
again. Here each text's encoder output (sentence vector and the token embeddings MaxSim reads)
is stored under the SHA-256 of the text, in a folder named by the encoder's identity (model,
weight digest, max_seq_length, device) and precision; a later build of any table with the same
encoder reads the vectors of texts it has seen and encodes only the others.

Exactness: only an encoder whose numbers for a text do not depend on the other texts of its
call (``batch_independent``; the packaged MiniLM in fp32, tests/test_batching.py) is cached,
so a cached vector is bit-identical to encoding the text again (tests/test_embedding_cache.py
checks a table built from a cold, a warm and a partly warm cache for equality).

Costs: each text keeps the seconds its encoder call spent on it (the call's time split by
token count); a cached text reports those seconds again, so a table's ``encode_ms`` is the
measured cost of encoding its units, not the cost of reading the cache.

New texts are encoded ``SEGMENT_TEXTS`` at a time (every k-th text, so each part samples the
whole input), each part written as it is done, so a build of a large pool that is stopped keeps
what it encoded (the outcome table's shards resume the rest); the encoder reports its batches to the build's current stage (``harness.progress``),
cached texts count as done there, not towards the rate.

Layout under ``<root>/<key>/``: ``seg-<digest>.parquet`` files (one per encoder call of at most
``SEGMENT_TEXTS`` new texts) with columns ``sha256``, ``vector`` and ``tokens`` (raw float32 bytes), ``token_rows``,
``n_tokens`` and ``seconds``; each written atomically with a verified sidecar. A segment that
fails verification is reported in one line, moved aside, and its texts are encoded again.
Disk: 4 bytes x dimension x (token rows + 1) per text, e.g. about 230 KB for a 150-token
passage with MiniLM (384 dimensions); ``arms.embedding_cache=false`` turns the cache off.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from harness import progress
from harness.io import CacheCorrupt, atomic_write_verified, digest_of, move_aside, verify_file
from harness.retrieval.encoder import EncodedTexts

EMBEDDING_CACHE_VERSION = "emb-1"
SEGMENT_TEXTS = 4096


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CachedEncoder:
    """Wraps a batch-independent encoder; ``encode`` returns what the encoder would return."""

    batch_independent = True

    def __init__(self, encoder, root: Path, precision: str):
        self.inner = encoder
        self.key = digest_of({"encoder": encoder.identity(), "precision": precision,
                              "version": EMBEDDING_CACHE_VERSION})
        self.folder = Path(root) / self.key
        self.encoded_texts = 0  # texts this process sent to the encoder (misses)
        self.cached_texts = 0  # texts read from the cache (hits)
        self._index: dict[str, Path] | None = None
        self._loaded: dict[str, tuple[np.ndarray, np.ndarray, int, float]] = {}

    # the encoder's own interface, unchanged
    def identity(self) -> dict:
        return self.inner.identity()

    @property
    def forward_seconds(self) -> float:
        return float(getattr(self.inner, "forward_seconds", 0.0))

    def __getattr__(self, name):  # precision, model, ... of the wrapped encoder
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _segments(self) -> dict[str, Path]:
        if self._index is None:
            import pyarrow.parquet as pq

            self._index = {}
            for seg in sorted(self.folder.glob("seg-*.parquet")):
                try:
                    verify_file(seg, key=self.key)
                    shas = pq.read_table(seg, columns=["sha256"]).column(0).to_pylist()
                except CacheCorrupt as exc:
                    move_aside(exc.path, exc.reason, then="its texts are encoded again")
                    continue
                except FileNotFoundError:  # removed by another process meanwhile
                    continue
                for s in shas:
                    self._index.setdefault(s, seg)
        return self._index

    def _load(self, seg: Path) -> None:
        import pyarrow.parquet as pq

        t = pq.read_table(seg).to_pydict()
        for sha, vec, tok, rows, ntok, sec in zip(t["sha256"], t["vector"], t["tokens"], t["token_rows"],
                                                 t["n_tokens"], t["seconds"]):
            v = np.frombuffer(vec, dtype=np.float32).copy()
            self._loaded[sha] = (v, np.frombuffer(tok, dtype=np.float32).reshape(int(rows), v.size).copy(),
                                 int(ntok), float(sec))

    def _store(self, shas: list[str], enc: EncodedTexts, seconds: np.ndarray) -> None:
        """The texts of one encoder call as one segment."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.folder.mkdir(parents=True, exist_ok=True)
        for lo in range(0, len(shas), SEGMENT_TEXTS):
            part = range(lo, min(lo + SEGMENT_TEXTS, len(shas)))
            table = pa.table({
                "sha256": [shas[i] for i in part],
                "vector": [np.ascontiguousarray(enc.vectors[i], dtype=np.float32).tobytes() for i in part],
                "tokens": [np.ascontiguousarray(enc.tokens[i], dtype=np.float32).tobytes() for i in part],
                "token_rows": [int(len(enc.tokens[i])) for i in part],
                "n_tokens": [int(enc.n_tokens[i]) for i in part],
                "seconds": [float(seconds[i]) for i in part],
            })
            names = [shas[i] for i in part]
            path = self.folder / f"seg-{digest_of(names)[:32]}.parquet"
            atomic_write_verified(path, lambda tmp: pq.write_table(table, tmp), key=self.key, texts=len(names))
            del table
            if self._index is not None:
                for s in names:
                    self._index.setdefault(s, path)

    def encode(self, texts: list[str]) -> EncodedTexts:
        shas = [text_digest(t) for t in texts]
        self._load_cached(shas)
        missing = list(dict.fromkeys(s for s in shas if s not in self._loaded))
        progress.current("texts").skip(len(shas) - len(missing))  # read from the cache: done, not timed
        if missing:
            self._encode_missing(texts, shas, missing)
        self.encoded_texts += len(missing)
        self.cached_texts += len(set(shas)) - len(missing)
        if not texts:
            return EncodedTexts(np.zeros((0, 0), np.float32), [], np.zeros(0, dtype=np.int64), 0.0)  # as DenseEncoder
        got = [self._loaded[s] for s in shas]
        self._loaded = {}  # held only for this call: a corpus of papers never sits in memory whole
        return EncodedTexts(
            vectors=np.stack([g[0] for g in got]).astype(np.float32),
            tokens=[g[1] for g in got],
            n_tokens=np.asarray([g[2] for g in got], dtype=np.int64),
            seconds=float(sum(g[3] for g in got)),
        )

    def _load_cached(self, shas: list[str]) -> None:
        """The segments holding any of these texts loaded; one that cannot be read is moved aside
        and its texts forgotten, so they are encoded again."""
        index = self._segments()
        for seg in {index[s] for s in shas if s in index and s not in self._loaded}:
            try:
                self._load(seg)
            except Exception as exc:  # noqa: BLE001 - verified moments ago; a racing writer
                move_aside(seg, f"unreadable: {type(exc).__name__}", then="its texts are encoded again")
                for s in [s for s, p in index.items() if p == seg]:
                    del index[s]

    def _encode_missing(self, texts: list[str], shas: list[str], missing: list[str]) -> None:
        """The texts not in the cache encoded by the inner encoder, one call per segment, each
        segment stored as soon as it is encoded (its time apportioned by tokens)."""
        first = {s: i for i, s in reversed(list(enumerate(shas)))}
        n_parts = -(-len(missing) // SEGMENT_TEXTS)
        for j in range(n_parts):
            # one encoder call per segment: a build stopped midway keeps the segments written. Every
            # n_parts-th text: each segment samples the whole input (a corpus of long papers, then
            # short paragraphs), so the rate measured in the first is the build's (harness.progress)
            part = missing[j::n_parts]
            enc = self.inner.encode([texts[first[s]] for s in part])
            tok = np.maximum(np.asarray(enc.n_tokens, dtype=np.float64), 1.0)
            seconds = enc.seconds * tok / tok.sum()
            for j, s in enumerate(part):
                self._loaded[s] = (np.asarray(enc.vectors[j], dtype=np.float32), enc.tokens[j],
                                   int(enc.n_tokens[j]), float(seconds[j]))
            self._store(part, enc, seconds)
