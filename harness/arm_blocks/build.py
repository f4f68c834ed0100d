"""Computing, caching and joining arm blocks (``harness.arm_blocks``): each block's columns built
chunk by chunk under per-chunk locks (resumable, shared between processes), verified, cached under
the block's key, then joined to the base table by ``qid`` in requirement order.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from harness.arm_blocks import ALLOWED_SHARED, BASE, ArmBlock
from harness.errors import ConfigError, HarnessError
from harness.io import CacheCorrupt, cache_root, digest_of, file_lock, move_aside, sidecar_path
from harness.plugin_guard import plugin_call
from harness.progress import Progress, duration
from harness.retrieval.cached_parquet import read_part, read_verified_parquet, write_verified_parquet


@dataclass
class BlockBuild:
    name: str
    key: str
    path: Path
    sha256: str
    columns: list[str] = field(default_factory=list)
    chunks_computed: int = 0
    chunks_reused: int = 0
    built_with: list = field(default_factory=list)  # the distinct ``built_with()`` records of its chunks


def _owned(block: ArmBlock, column: str) -> bool:
    if column in ALLOWED_SHARED or column.startswith("feat."):
        return True
    if any(column.startswith(f"{arm}.") for arm in block.arms):
        return True
    # outcome columns of arms it does not provide (``metrics_for``): never their costs
    return any(column.startswith(f"{arm}.") and not column.startswith((f"{arm}.cost.", f"{arm}.marginal."))
               for arm in getattr(block, "metrics_for", ()))


def _check_output(block: ArmBlock, rows: pd.DataFrame, out: Any, existing: Sequence[str]) -> pd.DataFrame:
    label = f"arm block {block.name!r} ({type(block).__module__}.{type(block).__qualname__})"
    if not isinstance(out, pd.DataFrame):
        raise HarnessError(f"{label}: compute() returned {type(out).__name__}, expected a pandas DataFrame")
    if "qid" not in out.columns:
        raise HarnessError(f"{label}: compute() output has no 'qid' column")
    if len(out) != len(rows) or set(out["qid"]) != set(rows["qid"]) or out["qid"].duplicated().any():
        raise HarnessError(f"{label}: compute() must return exactly one row per input question "
                           f"({len(rows)} in, {len(out)} out)")
    foreign = [c for c in out.columns if not _owned(block, c)]
    if foreign:
        also = f" and outcome columns of {list(block.metrics_for)}" if getattr(block, "metrics_for", ()) else ""
        raise HarnessError(f"{label}: writes column(s) {foreign[:5]} outside its arms {list(block.arms)}{also} "
                           "(columns are '<arm>.<field>' or 'feat.<name>')")
    taken = [c for c in out.columns if c != "qid" and c in set(existing)]
    if taken:
        raise HarnessError(f"{label}: column(s) {taken[:5]} already come from another block")
    return out.set_index("qid").loc[list(rows["qid"])].reset_index()


CLAIM_WINDOW = 256  # chunks an executor build claims (and holds the lock files of) at a time


def block_chunk(block: ArmBlock, dataset: Any, rows: pd.DataFrame) -> tuple[Any, dict | None]:
    """One chunk's output and what the block ran with (a piece an executor runs), under the plugin
    guard (``harness.plugin_guard``: a block's sys.exit is an error naming it, not the end of the
    process)."""
    label = f"arm block {block.name!r} ({type(block).__module__}.{type(block).__qualname__})"
    with plugin_call(label, "compute"):
        out = block.compute(rows.copy(), dataset)
    with plugin_call(label, "built_with"):
        return out, block.built_with()


def build_block(block: ArmBlock, inputs: pd.DataFrame, dataset: Any, *, base_key: str,
                required_keys: Mapping[str, str], cache_dir: Path | None = None,
                executor=None) -> tuple[pd.DataFrame, BlockBuild]:
    """Load ``block``'s verified cached columns, or compute them chunk by chunk (resumable).
    ``inputs``: ``qid`` and the columns of the blocks it requires. ``executor``
    (``harness.executor``; None: this process) computes the chunks this process holds the locks
    of; this process checks and writes them."""
    key = digest_of({"base": base_key, "requires": dict(sorted(required_keys.items())), "block": block.identity()})
    folder = (Path(cache_dir) if cache_dir is not None else cache_root() / "blocks") / block.name / key
    path = folder / "block.parquet"
    got = _finished(path, key, locked=False) if path.exists() else None
    if got is not None:
        return _with_derived(block, got[0], dataset, BlockBuild(block.name, key, path, got[1]["sha256"],
                                                                built_with=list(got[1].get("built_with") or [])))
    folder.mkdir(parents=True, exist_ok=True)
    build = _ChunkedBuild(block, inputs, dataset, key, folder)
    # Chunks are claimed one at a time by a lock of their own: several processes running the same
    # build (two terminals, or machines sharing the cache folder) split the chunks between them; a
    # chunk another process holds is left to it and read once it is written (or computed here if
    # that process stopped without writing it).
    with build.eta.active():  # a block that ticks its questions (answers) reports inside a chunk too
        if executor is not None and executor.name != "local":
            elsewhere = build.claim_for(executor)
        else:
            elsewhere = build.claim_here()
        build.take_elsewhere(elsewhere)
    return build.assemble(path)


def _finished(path: Path, key: str, locked: bool) -> tuple[pd.DataFrame, dict] | None:
    """The verified block file, else None; a corrupt one is moved aside only under the lock
    (unlocked, it may be another process's write between the file and its sidecar)."""
    try:
        return read_verified_parquet(path, key)
    except FileNotFoundError:
        return None
    except CacheCorrupt as exc:
        if locked:
            move_aside(exc.path, exc.reason)
        return None


class _ChunkedBuild:
    """One block's build in chunks of ``chunk_size`` questions: the chunks kept so far, how many
    were computed or reused, and what the block ran with. Kept together because each chunk is
    claimed, read or computed, written and counted the same way on every path."""

    def __init__(self, block: ArmBlock, inputs: pd.DataFrame, dataset: Any, key: str, folder: Path):
        self.block, self.dataset, self.key, self.folder = block, dataset, key, folder
        self.existing = [c for c in inputs.columns]
        rows = inputs.sort_values("qid", kind="stable").reset_index(drop=True)
        size = max(1, int(block.chunk_size))
        self.chunks = [rows.iloc[start:start + size].reset_index(drop=True) for start in range(0, len(rows), size)]
        self.n_chunks = len(self.chunks)
        self.parts: dict[int, pd.DataFrame] = {}
        self.counts = {"computed": 0, "reused": 0}
        self.built_with: dict[str, Any] = {}
        self.eta = Progress(f"arm block {block.name}", len(rows), "questions")  # a bad interval: before any line
        print(f"[route-bench] arm block {block.name} ({key[:12]}): {len(rows)} questions in {self.n_chunks} chunks "
              "(chunks already on disk are reused; the time left is measured as chunks are computed)", flush=True)

    def chunk_lock(self, i: int) -> Path:
        return self.folder / "chunks" / f"chunk-{i:05d}.lock"

    def chunk_path(self, i: int) -> Path:
        return self.folder / "chunks" / f"chunk-{i:05d}.parquet"

    def keep(self, i: int, part: pd.DataFrame, made: dict | None, how: str, counted: bool) -> None:
        """Chunk ``i``'s columns kept for the block, counted as ``how`` (computed / reused)."""
        self.counts[how] += 1
        if not counted:
            (self.eta.advance if how == "computed" else self.eta.skip)(len(self.chunks[i]))
        if made is not None:
            self.built_with.setdefault(digest_of(made), made)
        self.parts[i] = part

    def reuse(self, i: int, counted: bool = False) -> bool:
        """Chunk ``i`` read from disk when it is there, verified (else False)."""
        part = read_part(self.chunk_path(i), self.key, "qids", digest_of(list(self.chunks[i]["qid"])))
        if part is not None:
            self.keep(i, part, _recorded(self.chunk_path(i), "built_with"), "reused", counted)
        return part is not None

    def store(self, i: int, out: Any, made: dict | None, counted: bool = False) -> None:
        """Chunk ``i``'s computed output checked and written; only ever called holding its lock."""
        part = _check_output(self.block, self.chunks[i], out, self.existing)
        write_verified_parquet(self.chunk_path(i), part, key=self.key, qids=digest_of(list(self.chunks[i]["qid"])),
                               chunk=i, **({"built_with": made} if made is not None else {}))
        self.keep(i, part, made, "computed", counted)

    def take(self, i: int, counted: bool = False) -> None:
        """Chunk ``i`` from disk, else computed here and written; only ever called holding its
        lock. ``counted``: its questions are already in the progress (left to another process)."""
        if not self.reuse(i, counted):
            self.store(i, *block_chunk(self.block, self.dataset, self.chunks[i]), counted=counted)

    def claim_for(self, executor: Any) -> list[int]:
        """The chunks free here claimed a window at a time (each lock held until its chunk is
        written; a window bounds the open lock files) and computed by the executor; this process
        writes each as it arrives. Returns the chunks another process holds."""
        elsewhere: list[int] = []
        for window in range(0, self.n_chunks, CLAIM_WINDOW):
            with ExitStack() as claimed:
                held: dict[int, ExitStack] = {}
                for i in range(window, min(window + CLAIM_WINDOW, self.n_chunks)):
                    one = ExitStack()
                    if not one.enter_context(file_lock(self.chunk_lock(i), wait=False)):
                        one.close()
                        elsewhere.append(i)
                        self.eta.skip(len(self.chunks[i]))
                    elif self.reuse(i):
                        one.close()
                    else:
                        held[i] = claimed.enter_context(one)
                todo = list(held)
                for j, (out, made) in executor.map(block_chunk, [(self.chunks[i],) for i in todo],
                                                   shared=(self.block, self.dataset)):
                    self.store(todo[j], out, made)
                    held.pop(todo[j]).close()  # written: free for another process at once
                    self.eta.report()  # a line at most every 30 s with the time left
        return elsewhere

    def claim_here(self) -> list[int]:
        """Each chunk free here read or computed in this process, in order. Returns the chunks
        another process holds."""
        elsewhere: list[int] = []
        for i in range(self.n_chunks):
            with file_lock(self.chunk_lock(i), wait=False) as held:
                if held:
                    self.take(i)
                else:
                    elsewhere.append(i)
                    self.eta.skip(len(self.chunks[i]))  # the time left is this process's share
            if i < self.n_chunks - 1:
                self.eta.report()  # a line at most every 30 s with the time left
        return elsewhere

    def take_elsewhere(self, elsewhere: list[int]) -> None:
        """The chunks other processes held, read once written (waiting on their locks), or
        computed here if such a process stopped without writing one."""
        pending = [i for i in elsewhere if not self.chunk_path(i).exists()]
        if pending:
            print(f"[route-bench] arm block {self.block.name}: waiting for {len(pending)} chunk(s) another process is "
                  "computing", flush=True)
        for i in elsewhere:
            with file_lock(self.chunk_lock(i)):
                self.take(i, counted=True)
        print(f"[route-bench] arm block {self.block.name}: {self.n_chunks}/{self.n_chunks} chunks "
              f"({self.counts['computed']} computed, {self.counts['reused']} reused, "
              f"{duration(time.perf_counter() - self.eta.start)} in all)", flush=True)

    def assemble(self, path: Path) -> tuple[pd.DataFrame, BlockBuild]:
        """``block.parquet`` written from the chunks under the block's lock (unless another
        process sharing the chunks assembled it first), read back, plus the derived columns."""
        with file_lock(self.folder / ".lock"):
            got = _finished(path, self.key, locked=True) if path.exists() else None
            if got is None:  # else another process sharing the chunks assembled it first
                frame = pd.concat([self.parts[i] for i in range(self.n_chunks)], ignore_index=True)
                frame = frame.sort_values("qid", kind="stable").reset_index(drop=True)
                made = list(self.built_with.values())
                write_verified_parquet(path, frame, key=self.key, **({"built_with": made} if made else {}))
                got = read_verified_parquet(path, self.key)  # read back: cold and warm give equal dtypes
        frame, record = got
        return _with_derived(self.block, frame, self.dataset,
                             BlockBuild(self.block.name, self.key, path, record["sha256"],
                                        chunks_computed=self.counts["computed"],
                                        chunks_reused=self.counts["reused"],
                                        built_with=list(record.get("built_with") or [])))


def _recorded(path: Path, field_name: str) -> Any:
    """A field of a verified cache file's sidecar record (None when absent or unreadable)."""
    try:
        return json.loads(sidecar_path(path).read_text(encoding="utf-8")).get(field_name)
    except (OSError, ValueError, AttributeError):
        return None


def _with_derived(block: ArmBlock, frame: pd.DataFrame, dataset: Any, build: BlockBuild) -> tuple[pd.DataFrame, BlockBuild]:
    """The cached columns plus the block's derived ones (replacing any cached column of the same
    name); the build's digest then covers the derived values too (they enter the table's
    fingerprint, hence the skip key)."""
    derived = block.derive(frame, dataset)
    if derived is not None and len(derived.columns):
        label = f"arm block {block.name!r}"
        if len(derived) != len(frame):
            raise HarnessError(f"{label}: derive() returned {len(derived)} rows for {len(frame)}")
        foreign = [c for c in derived.columns if not _owned(block, c) or c == "qid"]
        if foreign:
            raise HarnessError(f"{label}: derive() writes column(s) {foreign[:5]} outside its arms")
        frame = frame.drop(columns=[c for c in derived.columns if c in frame.columns])
        frame = pd.concat([frame.reset_index(drop=True), derived.reset_index(drop=True)], axis=1)
        build.sha256 = digest_of({"file": build.sha256, "derived": pd.util.hash_pandas_object(
            derived.astype(str), index=False).tolist()})
    build.columns = [c for c in frame.columns if c != "qid"]
    return frame, build


def add_blocks(table: pd.DataFrame, blocks: Sequence[ArmBlock], dataset: Any, *, base_key: str,
               cache_dir: Path | None = None, executor=None) -> tuple[pd.DataFrame, list[BlockBuild]]:
    """The base ``table`` joined (by ``qid``) with each block, in an order that puts every
    block after the blocks it requires. Returns the joined table and what each block built."""
    by_name = {b.name: b for b in blocks}
    if len(by_name) != len(blocks):
        raise ConfigError("arms.blocks", f"a block is listed twice: {[b.name for b in blocks]}")
    order: list[ArmBlock] = []
    done: set[str] = {BASE}

    def visit(block: ArmBlock, trail: tuple[str, ...]) -> None:
        if block.name in done:
            return
        if block.name in trail:
            raise ConfigError("arms.blocks", f"blocks require each other in a cycle: {' -> '.join(trail + (block.name,))}")
        for req in block.requires:
            if req not in done:
                if req not in by_name:
                    raise ConfigError("arms.blocks", f"arm block {block.name!r} requires block {req!r}; add it to arms.blocks")
                visit(by_name[req], trail + (block.name,))
        done.add(block.name)
        order.append(block)

    for b in blocks:
        visit(b, ())
    keys: dict[str, str] = {BASE: base_key}
    owned: dict[str, list[str]] = {BASE: [c for c in table.columns if c != "qid"]}
    builds: list[BlockBuild] = []
    joined = table
    for block in order:
        # a block sees only what it requires: its key covers exactly what it read
        seen = ["qid", *[c for r in block.requires for c in owned[r]]]
        frame, build = build_block(block, joined[seen], dataset, base_key=base_key,
                                   required_keys={r: keys[r] for r in block.requires}, cache_dir=cache_dir,
                                   executor=executor)
        clash = [c for c in frame.columns if c != "qid" and c in joined.columns]
        if clash:
            raise HarnessError(f"arm block {block.name!r}: column(s) {clash[:5]} already come from another block")
        joined = joined.merge(frame, on="qid", how="left", validate="one_to_one")
        keys[block.name] = build.key
        owned[block.name] = build.columns
        builds.append(build)
    return joined, builds


def joined_key(base_key: str, builds: Sequence[BlockBuild]) -> str:
    """The key of a joined table: the base key alone without blocks (so today's tables keep
    their keys), else the digest of the base key and every block's key."""
    if not builds:
        return base_key
    return digest_of({"base": base_key, "blocks": {b.name: b.key for b in builds}})
