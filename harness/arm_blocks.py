"""Arm blocks: columns of the outcome table that are computed together and cached on their own.

Why: the outcome table is where arms meet. The four retrieval arms share their expensive work
(one encoding of each pool, one reranker call per question), so they form one block, the base
table (``harness.retrieval.table``). Anything else (another retrieval method, answers generated
with and without retrieval, a feature provider) is a further block: it reads the columns of the
blocks it ``requires`` (e.g. a RAG answer reads a retrieval arm's top-k unit ids), writes its own
columns, and is cached under its own content-addressed key. Adding a block therefore never
rebuilds another block, and the table a job sees is the base table joined with the blocks its
config asks for.

A block is one small class:

- ``name``: the block's name (also its entry-point name);
- ``arms``: the arms whose columns it writes, each as ``<arm>.<field>`` (an outcome such as
  ``<arm>.hit@10`` or ``<arm>.f1``, costs ``<arm>.cost.*``, its ranking or answer); it may also
  write features as ``feat.<name>``. It may not write anything else, nor a column another block
  wrote: the join is checked;
- ``metrics_for``: arms it does NOT provide but writes further outcome columns for (e.g. the
  built-in ``gold_at_k`` block writes ``keep.all@2`` from the base table's rankings,
  ``harness.metric_blocks``): it may write ``<arm>.<field>`` of those arms, except their costs
  (``<arm>.cost.*``, ``<arm>.marginal.*``), and never a column another block wrote;
- ``requires``: the blocks whose columns it reads (``"base"`` is the base table);
- ``version``: bumped when its numbers change (part of the key);
- ``feature_sets``: named sets of the ``feat.<name>`` columns it writes, so that policies can
  select them like the built-in sets (``policy.features=baseline+<set>``): a feature provider is
  a block with feature columns and no arm;
- ``params`` / ``identity()``: what else goes into its key (models, weight digests, settings);
- ``derive(frame, dataset)`` (optional): columns recomputed from the cached ones at every load
  (cheap ones, such as an answer's score from its cached text), so a change to that logic
  never leaves a stale number in the cache;
- ``compute(rows, dataset)``: one output row per input row, keyed by ``qid``. ``rows`` holds the
  required columns of some of the questions; a question's output may depend only on its own
  row and the dataset, so the harness computes a block in chunks of ``chunk_size`` questions,
  caches each chunk, and resumes an interrupted build from the chunks on disk, with the same
  numbers whatever the chunk size.

Blocks are found like every plugin (``harness.registry``): built-ins (``BUILTIN_BLOCKS``), the
entry-point group ``rag_route_bench.arms`` (``my_arm = "my_pkg:MyBlock"``), or a Hydra ``_target_`` in the config
(``arms.blocks=[{_target_: my_pkg.MyBlock, param: ...}]``). ``arms.blocks`` lists the blocks a
job asks for by name; a block that provides ``arms.base`` or ``arms.extra`` is added without
being listed, and so is ``gold_at_k`` when ``arms.metric`` names a metric only it provides
(``all@k``, ``recall@k`` below the table's k).

Layout under ``cache_root()/blocks/<name>/<key>/``: ``chunks/chunk-NNNNN.parquet``, then
``block.parquet``; each file verified by its digest sidecar (``harness.io``). Each chunk is
computed holding ``chunks/chunk-NNNNN.lock``, so processes that run the same build at once
(or on machines sharing the cache folder) share its chunks, each computed once; the one that
finds every chunk written assembles ``block.parquet`` under ``.lock``. A block's key is the digest of the base table's key, the keys of the blocks it
requires, its class, version and identity. What a block reports it ran with (``built_with()``,
e.g. a generator's ``describe()``) is recorded in each chunk's sidecar and, for all chunks, in
``block.parquet``'s; the table's info carries it to the run's tags.
"""

from __future__ import annotations

import abc
import inspect
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.io import CacheCorrupt, cache_root, digest_of, file_lock, move_aside
from harness.progress import Progress, duration
from harness.registry import Kind, import_class, lookup, origin, registered

ENTRY_POINT_GROUP = "rag_route_bench.arms"
BASE = "base"  # the base table's pseudo-block name in ``requires``
ALLOWED_SHARED = ("qid",)  # the join key, in every block


class ArmBlock(abc.ABC):
    """A block of outcome-table columns (module docstring). Subclasses set the class attributes
    and implement ``compute``; constructor parameters are stored under their own names (they
    go into the cache key through ``identity()``)."""

    name: ClassVar[str] = "block"
    arms: ClassVar[tuple[str, ...]] = ()
    # arms it does not provide but writes further outcome columns of (module docstring)
    metrics_for: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = (BASE,)
    version: ClassVar[str] = "1"
    chunk_size: ClassVar[int] = 256
    feature_sets: ClassVar[dict[str, tuple[str, ...]]] = {}

    def params(self) -> dict[str, Any]:
        """Constructor parameters read back from attributes of the same name (sklearn style)."""
        sig = inspect.signature(type(self).__init__)
        names = [n for n, p in sig.parameters.items()
                 if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        missing = [n for n in names if not hasattr(self, n)]
        if missing:
            raise HarnessError(f"arm block {self.name!r}: constructor parameter(s) {missing} are not stored "
                               "under their own name; the cache key needs them")
        return {n: getattr(self, n) for n in names}

    def identity(self) -> dict[str, Any]:
        """What identifies this block's numbers besides its inputs: class, version, parameters.
        Override to add model identities or weight digests."""
        return {"class": f"{type(self).__module__}.{type(self).__qualname__}", "version": str(self.version),
                "params": self.params()}

    @abc.abstractmethod
    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        """One row per row of ``rows`` with ``qid`` and this block's columns."""

    def derive(self, frame: pd.DataFrame, dataset: Any) -> pd.DataFrame | None:
        """Columns computed from the cached ones each time the block is loaded (cheap, so
        never stale: e.g. an answer's score from its cached text), one row per row of
        ``frame`` (same order); None for none."""
        return None

    def built_with(self) -> dict | None:
        """Plain JSON saying what the last ``compute`` ran with (e.g. a generator's
        ``describe()``): recorded in the cache's sidecars and on the runs, never in the key
        (whatever can change the numbers belongs in ``identity()``). None for nothing."""
        return None


# ---- finding blocks -------------------------------------------------------------------------
BUILTIN_BLOCKS: dict[str, str] = {  # the harness's own entry points: name -> "module:Class" (imported when used)
    "no_retrieval": "harness.generation.arms:NoRetrievalArm",
    "rag_keep": "harness.generation.arms:RagKeepArm",
    "rag_hybrid": "harness.generation.arms:RagHybridArm",
    "rag_bm25": "harness.generation.arms:RagBM25Arm",
    "gold_at_k": "harness.metric_blocks:GoldAtK",  # all@k, recall@k of the retrieval arms
    "hidden_state": "harness.generation.hidden_state:HiddenStateFeatures",  # seed 002's prober features
    "query_embedding": "harness.generation.hidden_state:QueryEmbeddingFeatures",  # MiniLM question vector
}


ARM_BLOCKS = Kind("arm block", ENTRY_POINT_GROUP, ArmBlock, BUILTIN_BLOCKS, key="arms.blocks")


def available_blocks() -> dict[str, str]:
    """{name: where it comes from} of every block that can be named: built-ins, then entry
    points (a built-in wins a name clash)."""
    return {name: f"{origin(ep)} {ep.value}" for name, ep in registered(ARM_BLOCKS).items()}


def _class_of(name: str, key: str) -> type:
    return lookup(ARM_BLOCKS, name, key)


def make_block(spec: Any, key: str = "arms.blocks") -> ArmBlock:
    """A block from a name or a ``{_target_: ..., param: ...}`` / ``{name: ..., param: ...}``
    mapping; every problem (a constructor that refuses its parameters, a missing ``name``, an
    identity that is not JSON) is a ConfigError under ``key``, or under ``key.<setting>`` when
    the constructor raised a ConfigError naming its setting."""
    if isinstance(spec, str):
        cls, params = _class_of(spec, key), {}
    elif isinstance(spec, Mapping):
        params = {k: v for k, v in dict(spec).items() if k not in ("_target_", "name")}
        if spec.get("_target_"):
            cls = import_class(str(spec["_target_"]), ArmBlock, f"{key}._target_", "arm block")
        elif spec.get("name"):
            cls = _class_of(str(spec["name"]), f"{key}.name")
        else:
            raise ConfigError(key, f"a block is a name or a mapping with _target_ or name, got {dict(spec)!r}")
    else:
        raise ConfigError(key, f"a block is a name or a mapping with _target_ or name, got {spec!r}")
    label = f"arm block {cls.__module__}.{cls.__qualname__}"
    try:
        block = cls(**params)
    except ConfigError as exc:  # a setting the constructor names: its full key
        raise ConfigError(f"{key}.{exc.key}", exc.problem) from None
    except (TypeError, ValueError, AssertionError) as exc:  # the constructor refused its parameters
        raise ConfigError(key, f"{label}: {type(exc).__name__}: {exc}") from None
    if block.name == ArmBlock.name:
        raise ConfigError(key, f"{label} has no name: set the class attribute `name`")
    try:
        digest_of(block.identity())
    except (TypeError, ValueError, HarnessError) as exc:
        raise ConfigError(key, f"{label}: identity() must be plain JSON (it keys the cache): {exc}; store plain "
                               "values (str, not Path) or override identity()") from None
    return block


def _loadable(name: str, key: str) -> type | None:
    """The class of an available block, or None when its plugin fails to load: scanning for an
    arm must not let one broken, unrelated plugin stop every job."""
    try:
        return _class_of(name, key)
    except ConfigError:
        return None


def _listed(arms_cfg: Mapping) -> list[Any]:
    listed = arms_cfg.get("blocks") or []
    if isinstance(listed, (str, Mapping)) or not isinstance(listed, Sequence):
        raise ConfigError("arms.blocks", f"must be a list of block names or mappings, got {listed!r} "
                                         "(e.g. arms.blocks=[union])")
    return list(listed)


def _with_device(spec: Any, device: str) -> Any:
    """The job's ``device`` for a block whose constructor takes one and whose spec names none."""
    if device == "cpu":
        return spec
    spec = {"name": spec} if isinstance(spec, str) else dict(spec)
    if "device" in spec:
        return spec
    cls = (import_class(str(spec["_target_"]), ArmBlock, "arms.blocks", "arm block") if spec.get("_target_")
           else _loadable(str(spec.get("name")), "arms.blocks"))
    if cls is not None and "device" in inspect.signature(cls.__init__).parameters:
        spec["device"] = device
    return spec


def blocks_for(arms_cfg: Mapping, present: Sequence[str], device: str = "cpu") -> list[ArmBlock]:
    """The blocks a job needs: ``arms.blocks`` as listed, plus for ``arms.base``/``arms.extra``
    not among the ``present`` arms the block that provides it (built-ins and entry points).
    Blocks that take a ``device`` get the job's (``device``) unless their spec names one. A
    metric only the ``gold_at_k`` block provides (``all@k``, ``recall@k`` below ``arms.k``,
    ``harness.metric_blocks``) adds that block unless it is listed."""
    blocks = [make_block(_with_device(spec, device), f"arms.blocks[{i}]") for i, spec in enumerate(_listed(arms_cfg))]
    from harness.gold_metrics import BLOCK_NAME, needs_gold_block

    if needs_gold_block(arms_cfg) and all(b.name != BLOCK_NAME for b in blocks):
        blocks.append(make_block(BLOCK_NAME, "arms.metric"))
    provided = {a for b in blocks for a in b.arms} | set(present)
    for role in ("base", "extra"):
        arm = arms_cfg.get(role)
        if arm is None or arm in provided:
            continue
        for name in available_blocks():
            cls = _loadable(name, f"arms.{role}")
            if cls is not None and arm in cls.arms:
                try:
                    blocks.append(make_block(_with_device(name, device), f"arms.{role}"))
                except ConfigError as exc:
                    raise ConfigError(f"arms.{role}", f"arm {arm!r} comes from block {name!r}, which cannot be made "
                                                      f"without parameters ({exc.problem}); list it in arms.blocks "
                                                      "with them") from None
                provided |= set(cls.arms)
                break
    return blocks


def block_arms(listed: Sequence[Any]) -> dict[str, str]:
    """{arm: block name} of the blocks ``listed`` in ``arms.blocks`` and of every available
    block that loads (a listed block wins): the arms a config may name besides the base table's."""
    out: dict[str, str] = {}
    for i, spec in enumerate(_listed({"blocks": listed})):
        block = make_block(spec, f"arms.blocks[{i}]")
        out.update({arm: block.name for arm in block.arms})
    for name in available_blocks():
        for arm in getattr(_loadable(name, "arms.blocks"), "arms", ()):
            out.setdefault(arm, name)
    return out


# ---- computing, caching, joining ------------------------------------------------------------
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
    """One chunk's output and what the block ran with (a piece an executor runs)."""
    return block.compute(rows.copy(), dataset), block.built_with()


def build_block(block: ArmBlock, inputs: pd.DataFrame, dataset: Any, *, base_key: str,
                required_keys: Mapping[str, str], cache_dir: Path | None = None,
                executor=None) -> tuple[pd.DataFrame, BlockBuild]:
    """Load ``block``'s verified cached columns, or compute them chunk by chunk (resumable).
    ``inputs``: ``qid`` and the columns of the blocks it requires. ``executor``
    (``harness.executor``; None: this process) computes the chunks this process holds the locks
    of; this process checks and writes them."""
    from harness.retrieval.table import _write_parquet, read_part, read_verified_parquet

    key = digest_of({"base": base_key, "requires": dict(sorted(required_keys.items())), "block": block.identity()})
    folder = (Path(cache_dir) if cache_dir is not None else cache_root() / "blocks") / block.name / key
    path = folder / "block.parquet"
    existing = [c for c in inputs.columns]

    def finished(locked: bool) -> tuple[pd.DataFrame, dict] | None:
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

    def cached(got: tuple[pd.DataFrame, dict]) -> tuple[pd.DataFrame, BlockBuild]:
        return _with_derived(block, got[0], dataset, BlockBuild(block.name, key, path, got[1]["sha256"],
                                                                built_with=list(got[1].get("built_with") or [])))

    got = finished(locked=False) if path.exists() else None
    if got is not None:
        return cached(got)
    folder.mkdir(parents=True, exist_ok=True)
    rows = inputs.sort_values("qid", kind="stable").reset_index(drop=True)
    size = max(1, int(block.chunk_size))
    chunks = [rows.iloc[start:start + size].reset_index(drop=True) for start in range(0, len(rows), size)]
    n_chunks = len(chunks)
    parts: dict[int, pd.DataFrame] = {}
    counts = {"computed": 0, "reused": 0}
    built_with: dict[str, Any] = {}
    print(f"[route-bench] arm block {block.name} ({key[:12]}): {len(rows)} questions in {n_chunks} chunks "
          "(chunks already on disk are reused; the time left is measured as chunks are computed)", flush=True)
    eta = Progress(f"arm block {block.name}", len(rows), "questions")

    def chunk_lock(i: int) -> Path:
        return folder / "chunks" / f"chunk-{i:05d}.lock"

    def chunk_path(i: int) -> Path:
        return folder / "chunks" / f"chunk-{i:05d}.parquet"

    def keep(i: int, part: pd.DataFrame, made: dict | None, how: str, counted: bool) -> None:
        """Chunk ``i``'s columns kept for the block, counted as ``how`` (computed / reused)."""
        counts[how] += 1
        if not counted:
            (eta.advance if how == "computed" else eta.skip)(len(chunks[i]))
        if made is not None:
            built_with.setdefault(digest_of(made), made)
        parts[i] = part

    def reuse(i: int, counted: bool = False) -> bool:
        """Chunk ``i`` read from disk when it is there, verified (else False)."""
        part = read_part(chunk_path(i), key, "qids", digest_of(list(chunks[i]["qid"])))
        if part is not None:
            keep(i, part, _recorded(chunk_path(i), "built_with"), "reused", counted)
        return part is not None

    def store(i: int, out: Any, made: dict | None, counted: bool = False) -> None:
        """Chunk ``i``'s computed output checked and written; only ever called holding its lock."""
        part = _check_output(block, chunks[i], out, existing)
        _write_parquet(chunk_path(i), part, key=key, qids=digest_of(list(chunks[i]["qid"])), chunk=i,
                       **({"built_with": made} if made is not None else {}))
        keep(i, part, made, "computed", counted)

    def take(i: int, counted: bool = False) -> None:
        """Chunk ``i`` from disk, else computed here and written; only ever called holding its
        lock. ``counted``: its questions are already in the progress (left to another process)."""
        if not reuse(i, counted):
            store(i, *block_chunk(block, dataset, chunks[i]), counted=counted)

    # Chunks are claimed one at a time by a lock of their own: several processes running the same
    # build (two terminals, or machines sharing the cache folder) split the chunks between them; a
    # chunk another process holds is left to it and read once it is written (or computed here if
    # that process stopped without writing it).
    elsewhere: list[int] = []
    if executor is not None and executor.name != "local":
        # the chunks free here are claimed a window at a time (each lock held until its chunk is
        # written; a window bounds the open lock files) and computed by the executor; this
        # process writes each as it arrives
        for window in range(0, n_chunks, CLAIM_WINDOW):
            with ExitStack() as claimed:
                held: dict[int, ExitStack] = {}
                for i in range(window, min(window + CLAIM_WINDOW, n_chunks)):
                    one = ExitStack()
                    if not one.enter_context(file_lock(chunk_lock(i), wait=False)):
                        one.close()
                        elsewhere.append(i)
                        eta.skip(len(chunks[i]))
                    elif reuse(i):
                        one.close()
                    else:
                        held[i] = claimed.enter_context(one)
                todo = list(held)
                for j, (out, made) in executor.map(block_chunk, [(chunks[i],) for i in todo], shared=(block, dataset)):
                    store(todo[j], out, made)
                    held.pop(todo[j]).close()  # written: free for another process at once
                    eta.report()  # a line at most every 30 s with the time left
    else:
        for i in range(n_chunks):
            with file_lock(chunk_lock(i), wait=False) as held:
                if held:
                    take(i)
                else:
                    elsewhere.append(i)
                    eta.skip(len(chunks[i]))  # the time left is this process's share
            if i < n_chunks - 1:
                eta.report()  # a line at most every 30 s with the time left
    pending = [i for i in elsewhere if not chunk_path(i).exists()]
    if pending:
        print(f"[route-bench] arm block {block.name}: waiting for {len(pending)} chunk(s) another process is "
              "computing", flush=True)
    for i in elsewhere:
        with file_lock(chunk_lock(i)):
            take(i, counted=True)
    print(f"[route-bench] arm block {block.name}: {n_chunks}/{n_chunks} chunks ({counts['computed']} computed, "
          f"{counts['reused']} reused, {duration(time.perf_counter() - eta.start)} in all)", flush=True)
    with file_lock(folder / ".lock"):
        got = finished(locked=True) if path.exists() else None
        if got is None:  # else another process sharing the chunks assembled it first
            frame = pd.concat([parts[i] for i in range(n_chunks)], ignore_index=True)
            frame = frame.sort_values("qid", kind="stable").reset_index(drop=True)
            made = list(built_with.values())
            _write_parquet(path, frame, key=key, **({"built_with": made} if made else {}))
            got = read_verified_parquet(path, key)  # read back: cold and warm give equal dtypes
    frame, record = got
    return _with_derived(block, frame, dataset, BlockBuild(block.name, key, path, record["sha256"],
                                                           chunks_computed=counts["computed"],
                                                           chunks_reused=counts["reused"],
                                                           built_with=list(record.get("built_with") or [])))


def _recorded(path: Path, field_name: str) -> Any:
    """A field of a verified cache file's sidecar record (None when absent or unreadable)."""
    import json

    from harness.io import sidecar_path

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
