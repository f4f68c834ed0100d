"""Arm blocks (harness.arm_blocks): found by name, cached on their own, resumable in chunks,
checked at the join, and the same numbers whatever the chunk size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.arm_blocks import ArmBlock, blocks_for, make_block
from harness.arm_blocks.build import add_blocks, joined_key
from harness.errors import ConfigError, HarnessError
from harness.synthetic import synthetic_outcome_table

CALLS: list[int] = []


class Union(ArmBlock):
    """Run keep and hybrid both and merge: a hit when either hits (a real, if costly, arm)."""

    name, arms, version = "union", ("union",), "1"

    def __init__(self, k: int = 10, chunk: int = 256):
        self.k = k
        self.chunk = chunk

    @property
    def chunk_size(self):  # type: ignore[override]
        return self.chunk

    def compute(self, rows, dataset):
        CALLS.append(len(rows))
        hit = np.maximum(rows[f"keep.hit@{self.k}"], rows[f"hybrid.hit@{self.k}"]).astype(np.int8)
        return pd.DataFrame({"qid": rows["qid"], f"union.hit@{self.k}": hit, "feat.union_seen": 1.0})


class NeedsUnion(ArmBlock):
    name, arms, requires = "after_union", ("after",), ("union",)

    def compute(self, rows, dataset):
        assert set(rows.columns) == {"qid", "union.hit@10", "feat.union_seen"}, rows.columns  # only what it requires
        return pd.DataFrame({"qid": rows["qid"], "after.hit@10": rows["union.hit@10"]})


@pytest.fixture
def table():
    return synthetic_outcome_table(n_docs=20, questions_per_doc=5, seed=3)


def test_block_is_joined_cached_and_never_recomputed(table, tmp_path):
    CALLS.clear()
    joined, builds = add_blocks(table, [Union(chunk=30)], None, base_key="base-1", cache_dir=tmp_path)
    expected = np.maximum(table["keep.hit@10"], table["hybrid.hit@10"]).to_numpy()
    got = joined.set_index("qid").loc[table["qid"], "union.hit@10"].to_numpy()
    np.testing.assert_array_equal(got, expected)
    assert CALLS == [30, 30, 30, 10] and builds[0].chunks_computed == 4
    assert list(joined.columns[: len(table.columns)]) == list(table.columns)  # base columns untouched
    again, builds2 = add_blocks(table, [Union(chunk=30)], None, base_key="base-1", cache_dir=tmp_path)
    assert CALLS == [30, 30, 30, 10]  # warm: nothing computed
    pd.testing.assert_frame_equal(joined, again)
    assert builds2[0].key == builds[0].key and joined_key("base-1", builds) != "base-1"
    assert joined_key("base-1", []) == "base-1"  # no block: today's key


def test_key_covers_parameters_and_the_base_table(table, tmp_path):
    _, a = add_blocks(table, [Union(chunk=30)], None, base_key="base-1", cache_dir=tmp_path)
    _, b = add_blocks(table, [Union(k=10, chunk=50)], None, base_key="base-2", cache_dir=tmp_path)
    _, c = add_blocks(table, [Union(chunk=50)], None, base_key="base-1", cache_dir=tmp_path)
    assert len({a[0].key, b[0].key, c[0].key}) == 3


def test_interrupted_build_resumes_from_its_chunks_with_identical_numbers(table, tmp_path):
    class Flaky(Union):
        fail_at = 2

        def compute(self, rows, dataset):
            if len(CALLS) == self.fail_at:
                raise KeyboardInterrupt  # as if the build was stopped here
            return super().compute(rows, dataset)

    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        add_blocks(table, [Flaky(chunk=30)], None, base_key="b", cache_dir=tmp_path)
    assert not list(tmp_path.rglob("block.parquet"))  # nothing half-finished is presented as done
    Flaky.fail_at = -1
    CALLS.clear()
    resumed, builds = add_blocks(table, [Flaky(chunk=30)], None, base_key="b", cache_dir=tmp_path)
    assert builds[0].chunks_reused == 2 and builds[0].chunks_computed == 2 and CALLS == [30, 10]
    fresh, _ = add_blocks(table, [Union(chunk=7)], None, base_key="b", cache_dir=tmp_path / "other")
    pd.testing.assert_frame_equal(resumed, fresh)  # chunk size changes nothing


@pytest.mark.parametrize("holder_writes", [False, True], ids=["holder-stopped", "holder-wrote"])
def test_a_chunk_another_process_holds_is_left_to_it(table, tmp_path, holder_writes):
    """A chunk whose lock is held elsewhere is skipped, the others are computed, then the build
    waits for it: written by its holder, it is read (not computed again); released unwritten
    (its holder stopped), it is computed here, once."""
    import fcntl
    import shutil
    import threading
    import time

    from harness.arm_blocks.build import build_block
    from harness.io import digest_of, sidecar_path

    block = Union(chunk=30)
    key = digest_of({"base": "b", "requires": {}, "block": block.identity()})
    inputs = table[["qid", "keep.hit@10", "hybrid.hit@10"]]
    if holder_writes:  # what the holder will write: the same block built in another cache folder
        build_block(block, inputs, None, base_key="b", required_keys={}, cache_dir=tmp_path / "elsewhere")
    CALLS.clear()
    out: dict = {}
    chunk = tmp_path / "union" / key / "chunks" / "chunk-00001.parquet"  # in the block's folder
    chunk.parent.mkdir(parents=True)
    holder = open(chunk.with_suffix(".lock"), "a+")
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    worker = threading.Thread(target=lambda: out.update(result=build_block(
        block, inputs, None, base_key="b", required_keys={}, cache_dir=tmp_path)), daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 120  # waits for a condition; never asserts a duration
        while len(CALLS) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert CALLS == [30, 30, 10]  # chunks 0, 2 and 3; chunk 1 left to its holder
        assert worker.is_alive() and not chunk.exists()
        if holder_writes:
            written = tmp_path / "elsewhere" / "union" / key / "chunks" / chunk.name
            shutil.copy(written, chunk)
            shutil.copy(sidecar_path(written), sidecar_path(chunk))
    finally:
        fcntl.flock(holder.fileno(), fcntl.LOCK_UN)
        holder.close()
    worker.join(timeout=120)
    assert not worker.is_alive()
    frame, build = out["result"]
    if holder_writes:
        assert CALLS == [30, 30, 10] and (build.chunks_computed, build.chunks_reused) == (3, 1)
    else:
        assert CALLS == [30, 30, 10, 30] and (build.chunks_computed, build.chunks_reused) == (4, 0)
    assert build.path.parent.name == key
    expected = np.maximum(table["keep.hit@10"], table["hybrid.hit@10"]).to_numpy()
    np.testing.assert_array_equal(frame.set_index("qid").loc[table["qid"], "union.hit@10"], expected)


class SlowRecordingUnion(Union):
    """Union that appends each computed chunk's first qid to a file (shared by processes)."""

    def __init__(self, k: int = 10, chunk: int = 256, log: str = ""):
        super().__init__(k, chunk)
        self.log = log

    def identity(self):
        return {"k": self.k}  # the log file is no part of what the block computes

    def compute(self, rows, dataset):
        import time

        with open(self.log, "a", encoding="utf-8") as f:
            f.write(f"{rows['qid'].iloc[0]}\n")
        time.sleep(0.05)
        return super().compute(rows, dataset)


def _build_in_process(table, cache_dir, log, out):
    joined, _ = add_blocks(table, [SlowRecordingUnion(chunk=7, log=log)], None, base_key="b", cache_dir=cache_dir)
    joined.to_parquet(out)


def test_processes_running_the_same_build_share_its_chunks(table, tmp_path):
    """Two real processes build one block at once: every chunk is computed exactly once between
    them and both get the table a single process builds (that the chunks are split, not queued,
    is shown by the test above, which holds one chunk's lock)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    log = tmp_path / "computed.txt"
    procs = [ctx.Process(target=_build_in_process, args=(table, tmp_path / "cache", str(log), tmp_path / f"out{n}.parquet"),
                         daemon=True) for n in range(2)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=300)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0, 0]
    computed = log.read_text(encoding="utf-8").split()
    first_qids = sorted(table["qid"])[::7]
    assert sorted(computed) == sorted(first_qids)  # each chunk once, none twice
    single, _ = add_blocks(table, [Union(chunk=30)], None, base_key="b", cache_dir=tmp_path / "single")
    for n in range(2):
        got = pd.read_parquet(tmp_path / f"out{n}.parquet")
        pd.testing.assert_frame_equal(got, single, check_dtype=False)
    assert len(list((tmp_path / "cache").rglob("block.parquet"))) == 1


def test_corrupt_cached_block_is_moved_aside_and_rebuilt(table, tmp_path, capsys):
    joined, builds = add_blocks(table, [Union()], None, base_key="b", cache_dir=tmp_path)
    builds[0].path.write_bytes(b"garbage")
    CALLS.clear()
    again, _ = add_blocks(table, [Union()], None, base_key="b", cache_dir=tmp_path)
    pd.testing.assert_frame_equal(joined, again)
    assert CALLS == []  # rebuilt from its verified chunks
    assert list(tmp_path.rglob("block.parquet.corrupt*")) or list(tmp_path.rglob("*corrupt*"))


def test_requirements_order_blocks_and_limit_what_they_see(table, tmp_path):
    joined, builds = add_blocks(table, [NeedsUnion(), Union()], None, base_key="b", cache_dir=tmp_path)
    assert [b.name for b in builds] == ["union", "after_union"]
    np.testing.assert_array_equal(joined["after.hit@10"], joined["union.hit@10"])
    with pytest.raises(ConfigError, match="requires block 'union'"):
        add_blocks(table, [NeedsUnion()], None, base_key="b", cache_dir=tmp_path)


@pytest.mark.parametrize(
    "body, message",
    [
        ("return rows", "outside its arms"),
        ("return pd.DataFrame({'qid': rows['qid'][:-1], 'bad.x': 1})", "one row per input question"),
        ("return pd.DataFrame({'qid': rows['qid'], 'other.hit@10': 1})", "outside its arms"),
        ("return [1, 2]", "expected a pandas DataFrame"),
    ],
)
def test_join_is_checked(table, tmp_path, body, message):
    namespace = {"pd": pd, "ArmBlock": ArmBlock}
    exec(f"class Bad(ArmBlock):\n    name, arms = 'bad', ('bad',)\n    def compute(self, rows, dataset):\n        {body}\n",
         namespace)
    with pytest.raises(HarnessError, match=message):
        add_blocks(table, [namespace["Bad"]()], None, base_key="b", cache_dir=tmp_path)
    assert not list(tmp_path.rglob("*.parquet"))  # nothing cached from a bad block


def test_a_block_cannot_overwrite_base_columns(table, tmp_path):
    class Steal(ArmBlock):
        name, arms = "steal", ("keep",)

        def compute(self, rows, dataset):
            return pd.DataFrame({"qid": rows["qid"], "keep.hit@10": 1})

    with pytest.raises(HarnessError, match="already come from another block"):
        add_blocks(table, [Steal()], None, base_key="b", cache_dir=tmp_path)


def test_names_and_targets(table):
    assert isinstance(make_block({"_target_": "tests.test_arm_blocks.Union", "k": 10}), Union)
    with pytest.raises(ConfigError, match=r"arms\.blocks.*unknown arm block 'unoin'"):
        make_block("unoin")
    with pytest.raises(ConfigError, match=r"not a harness\.arm_blocks\.ArmBlock subclass"):
        make_block({"_target_": "pandas.DataFrame"})
    with pytest.raises(ConfigError, match="unexpected keyword"):
        make_block({"_target_": "tests.test_arm_blocks.Union", "nope": 1})
    # a pair whose arms are in the table needs no block
    assert blocks_for({"base": "keep", "extra": "hybrid"}, ["keep", "hybrid"]) == []


BROKEN_AND_PICKY = '''
from pathlib import Path

import pandas as pd

from harness.arm_blocks import ArmBlock

raise_on_import = None


class NeedsParam(ArmBlock):
    name, arms = "needs_param", ("np_arm",)

    def __init__(self, k):
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        self.k = k

    def compute(self, rows, dataset):
        return pd.DataFrame({"qid": rows["qid"], "np_arm.hit@10": 1})


class PathParam(ArmBlock):
    name, arms = "path_param", ("pp_arm",)

    def __init__(self, model_dir=Path("models")):
        self.model_dir = model_dir

    def compute(self, rows, dataset):
        return pd.DataFrame({"qid": rows["qid"], "pp_arm.hit@10": 1})
'''


def test_plugin_problems_are_config_errors_and_unrelated_broken_plugins_are_ignored(tmp_path, monkeypatch):
    from harness.arm_blocks import block_arms
    from harness.config.arm_checks import _check_arms
    from tests.helpers.plugin_tools import activate, write_plugin

    write_plugin(tmp_path / "site", "picky_ext", BROKEN_AND_PICKY, {"rag_route_bench.arms": {
        "needs_param": "picky_ext:NeedsParam", "path_param": "picky_ext:PathParam"}})
    write_plugin(tmp_path / "site", "broken_ext", "raise ImportError('boom')\n",
                 {"rag_route_bench.arms": {"a_broken": "broken_ext:Whatever"}})
    activate(monkeypatch, tmp_path / "site")
    # an unrelated broken plugin stops nothing: the default pair and a good plugin arm still validate
    _check_arms({"base": "keep", "extra": "hybrid"}, synthetic=True)
    assert "np_arm" in block_arms([]) and "a_broken" not in str(block_arms([]))
    # ... but naming it is an error that says why
    with pytest.raises(ConfigError, match=r"arms\.blocks\[0\].*'a_broken'.*failed to load: boom"):
        block_arms(["a_broken"])
    with pytest.raises(ConfigError, match=r"arms\.extra.*block 'needs_param'.*list it in arms\.blocks"):
        _check_arms({"base": "keep", "extra": "np_arm"}, synthetic=True)
    with pytest.raises(ConfigError, match=r"arms\.blocks\[0\].*ValueError: k must be positive"):
        block_arms([{"name": "needs_param", "k": -1}])
    assert block_arms([{"name": "needs_param", "k": 2}])["np_arm"] == "needs_param"
    with pytest.raises(ConfigError, match=r"arms\.extra.*identity\(\) must be plain JSON"):
        _check_arms({"base": "keep", "extra": "pp_arm"}, synthetic=True)
    with pytest.raises(ConfigError, match=r"arms\.blocks.*must be a list"):
        blocks_for({"blocks": "union"}, ["keep", "hybrid"])


def test_derived_columns_are_recomputed_at_every_load_and_enter_the_fingerprint(table, tmp_path):
    class Scored(Union):
        name, arms = "scored", ("scored",)
        bonus = 0.0

        def compute(self, rows, dataset):
            CALLS.append(len(rows))
            return pd.DataFrame({"qid": rows["qid"], "scored.raw": rows["keep.hit@10"].astype(float)})

        def derive(self, frame, dataset):
            return pd.DataFrame({"scored.hit@10": frame["scored.raw"] + self.bonus}, index=frame.index)

    CALLS.clear()
    a, ba = add_blocks(table, [Scored()], None, base_key="b", cache_dir=tmp_path)
    Scored.bonus = 1.0  # the scoring logic changes; the cached raw column does not
    b, bb = add_blocks(table, [Scored()], None, base_key="b", cache_dir=tmp_path)
    assert len(CALLS) == 1  # computed once, derived twice
    np.testing.assert_array_equal(b["scored.hit@10"], a["scored.hit@10"] + 1.0)
    assert ba[0].key == bb[0].key and ba[0].sha256 != bb[0].sha256  # same cache, new fingerprint
