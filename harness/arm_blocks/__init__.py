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
``block.parquet``'s; the table's info carries it to the run's tags. Computing, caching and
joining live in ``harness.arm_blocks.build``.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, ClassVar, Mapping, Sequence

import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.io import digest_of
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
    not among the ``present`` arms the block that provides it (built-ins and entry points); the
    run files of ``arms.runs`` are added by the caller (``harness.arm_blocks.runs.run_blocks``),
    their arms counted as present.
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
