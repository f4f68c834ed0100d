"""Remaining-time lines (harness.progress) from measured throughput, on a fake clock: the root of a
build and the stages inside it (throttle, time left from the measured work, no estimate before
measured work); table builds whose output is not a terminal print them, with fakes and with the
real MiniLM (slow)."""

from __future__ import annotations

import pytest

from harness import progress
from harness.errors import HarnessError
from harness.progress import Progress, duration


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_time_left_is_the_measured_rate_applied_to_what_is_left():
    clock, lines = Clock(), []
    p = Progress("table x", 1000, "units", clock=clock, out=lines.append, interval_s=30)
    assert "time left: measured once the first units are computed" in p.line()
    clock.t += 2.0
    p.skip(400)  # found on disk: done, but not timed
    clock.t += 50.0
    p.advance(100)  # 100 units in 50 s of computing: 2 units/s
    assert p.rate == pytest.approx(2.0)
    assert p.remaining_s() == pytest.approx((1000 - 500) / 2.0)  # 250 s
    text = p.report(force=True)
    assert text == "[route-bench] table x: 500/1,000 units (50%), 52s elapsed, about 4m10s left (2 units/s measured here)"
    assert lines == [text]
    clock.t += 10.0
    assert p.report() is None  # within the interval: quiet
    clock.t += 20.0
    p.advance(300)  # 400 units in 80 s: 5 units/s, 200 left -> 40 s
    assert p.report() == ("[route-bench] table x: 800/1,000 units (80%), 1m22s elapsed, about 40s left "
                          "(5 units/s measured here)")
    clock.t += 40.0
    p.advance(200)
    assert p.report().endswith("1,000/1,000 units (100%), 2m02s elapsed, done")


def test_quiet_when_not_emitting_and_durations():
    p = Progress("t", 10, "q", emit=False, out=lambda line: pytest.fail(line))
    p.advance(10)
    assert p.report(force=True) is None
    assert [duration(x) for x in (0, 59.4, 61, 3599, 3600 + 125)] == ["0s", "59s", "1m01s", "59m59s", "1h02m"]
    assert duration(float("nan")) == duration(-1) == "?"


def test_a_stage_prints_its_first_line_after_its_first_measured_batch_then_at_most_every_interval():
    clock, lines = Clock(), []
    root = Progress("outcome table k", 100, "units", clock=clock, out=lines.append, interval_s=30, emit=False,
                    stages=True)
    root.where = "shard 1/1"
    with root.active(), progress.stage("encoding passages", 1000, "texts") as enc:
        assert progress.current("texts") is enc and progress.current("pairs") is not enc
        clock.t += 8.0  # loading the model and tokenising: not the stage's rate
        enc.start_timing()
        assert lines == []  # nothing measured yet: no line, no estimate
        times = []
        for _ in range(60):  # 60 batches of 10 texts, 5 s each
            clock.t += 5.0
            before = len(lines)
            progress.current("texts").tick(10)
            if len(lines) > before:
                times.append(clock.t)
        clock.t += 1.0  # then batches of 7 s: the line goes at the last batch that ends within 30 s
        enc.tick(10)
        at = [clock.t]
        for _ in range(30):
            clock.t += 7.0
            before = len(lines)
            enc.tick(10)
            if len(lines) > before:
                at.append(clock.t)
    assert progress.current("texts").total == 0  # outside the block: a silent stand-in
    assert [b - a for a, b in zip(at, at[1:])] == [28.0] * 7, at  # 4 batches: 28 s; a 5th would end at 35 s
    assert times[0] == 113.0  # right after the first measured batch (started at 100 + 8 s of loading)
    assert all(b - a >= 30 for a, b in zip(times, times[1:])) and len(times) == 10  # then every 30 s
    # 10 texts per 5 s = 2 texts/s; after the first batch 990 texts are left: 495 s
    assert lines[0] == ("[route-bench] outcome table k, shard 1/1, encoding passages: 10/1,000 texts (1%), "
                        "13s elapsed, about 8m15s left in this stage (2 texts/s measured in it)")


def test_a_stage_that_printed_says_when_it_is_done_and_never_zero_seconds_left():
    """Under half a second left reads "under 1s" (work is left); the stage's last count prints
    its "done" line (once) when it printed before, so a reader sees where its time left ended;
    a stage that printed nothing ends silently."""
    clock, lines = Clock(), []
    root = Progress("outcome table k", 10, "units", clock=clock, out=lines.append, interval_s=0, emit=False,
                    stages=True)
    with root.active():
        with progress.stage("encoding passages", 1000, "texts") as enc:
            clock.t += 10.0
            enc.tick(999)  # 99.9 texts/s: 1 text left, 0.01 s
            clock.t += 0.01
            enc.tick(1)
            enc.skip(0)
        quiet = Progress("q", 5, "units", clock=clock, out=lines.append, interval_s=30, emit=False, stages=True)
        with quiet.active(), progress.stage("search", 5, "questions") as search:
            search.skip(5)  # found finished: it printed nothing, so no done line either
    assert lines == [
        "[route-bench] outcome table k, encoding passages: 999/1,000 texts (100%), 10s elapsed, under 1s left in "
        "this stage (99.9 texts/s measured in it)",
        "[route-bench] outcome table k, encoding passages: 1,000/1,000 texts (100%), 10s elapsed, done"]


def test_time_left_counts_undeclared_items_at_the_declared_mean_and_reused_items_as_done():
    clock = Clock()
    root = Progress("t", 10, "units", clock=clock, out=lambda line: None, interval_s=30)
    enc = root.stage("encoding passages", 100, "texts")
    enc.skip(20)  # read from the embedding cache: done, no rate
    assert enc.rate is None and enc.remaining_s() is None and enc._due(False) is False
    st = root.stage("reranking", 100, "questions", "pairs")
    st.skip(20)  # (as if) finished elsewhere: done, not timed
    st.expect(1000, items=40)  # the first block of 40 questions: 1,000 pairs (mean 25 a question)
    clock.t += 10.0
    st.tick(0, work=400)  # a cross-encoder batch: 400 pairs in 10 s: 40 pairs/s
    # left: 600 declared pairs + 40 undeclared questions x 25 pairs = 1,600 pairs -> 40 s
    assert st.work_left() == pytest.approx(1600.0)
    assert st.remaining_s() == pytest.approx(40.0)
    st.advance(40, work=0)  # the block's questions done (their pairs were counted by the ticks)
    assert st.done == 60 and st.computed == 40 and st.remaining_s() == pytest.approx(40.0)


def test_ticks_inside_a_part_are_not_counted_twice_and_the_interval_setting():
    clock, lines = Clock(), []
    root = Progress("arm block a", 32, "questions", clock=clock, out=lines.append, interval_s=30)
    with root.active():
        for _ in range(16):  # one chunk of 16 answers, 2 s each
            clock.t += 2.0
            progress.current("questions").tick(1)
        root.advance(16)  # the chunk written: its 16 questions are already counted
    assert root.done == 16 and root.rate == pytest.approx(0.5)
    assert lines[0].startswith("[route-bench] arm block a: 1/32 questions (3%), 2s elapsed, about 1m02s left")
    assert len(lines) == 2  # the first answer, then 30 s later
    clock.t += 4.0
    root.advance(16)  # a chunk computed without ticks counts whole
    assert root.done == 32 and root.report().endswith(", done")


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.5")
    assert Progress("t", 1, "u").interval_s == 0.5
    monkeypatch.delenv(progress.INTERVAL_ENV)
    assert Progress("t", 1, "u").interval_s == progress.INTERVAL_S == 30.0
    monkeypatch.setenv(progress.INTERVAL_ENV, "soon")
    with pytest.raises(HarnessError, match="^environment variable HARNESS_PROGRESS_INTERVAL_S: must be a number of "
                                           "seconds >= 0, got 'soon'$"):
        Progress("t", 1, "u")


def _root_and_stage_lines(out: list[str]) -> tuple[list[str], list[str]]:
    import re

    root = [line for line in out if re.match(r"\[route-bench\] outcome table [0-9a-f]{12}: ", line)]
    stages = [line for line in out if re.match(r"\[route-bench\] outcome table [0-9a-f]{12}, shard ", line)]
    return root, stages


def test_table_build_off_a_terminal_prints_the_time_left(tmp_path, capsys):
    from harness.retrieval.table import build_outcome_table
    from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

    enc = FakeEncoder()
    build_outcome_table(tiny_dataset(extra_docs=3), ARMS_CFG, MAXSIM, cache_dir=tmp_path, encoder=enc)  # 4 shards
    out = capsys.readouterr().out.splitlines()  # stdout is not a terminal under pytest
    assert out[0].endswith("(shards already on disk are reused); the time left is measured as the work is done")
    assert enc.calls == 2 * 4  # units and questions once per shard: no warm-up run
    root, stages = _root_and_stage_lines(out)
    assert len(root) >= 2, out
    assert all(" left (" in line and "units/s measured here" in line for line in root[:-1])
    assert root[-1].endswith(", done")
    said = [line for line in stages if not line.endswith(", done")]
    assert said and all(" left in this stage (" in line and "/s measured in it)" in line for line in said), stages
    done = {line.split(": ")[0] for line in stages if line.endswith(", done")}
    assert {line.split(": ")[0] for line in said} == done  # a stage that printed says when it is done


def test_an_arm_block_that_ticks_its_questions_reports_inside_a_chunk(tmp_path, capsys, monkeypatch):
    """As the answer arms do: one tick per answered question, lines inside a chunk (interval 0),
    and the chunk's questions counted once."""
    import numpy as np
    import pandas as pd

    from harness.arm_blocks import ArmBlock
    from harness.arm_blocks.build import add_blocks
    from harness.synthetic import synthetic_outcome_table

    class Ticking(ArmBlock):
        name, arms, version, chunk_size = "ticking", ("ticking",), "1", 50

        def compute(self, rows, dataset):
            for _ in range(len(rows)):
                progress.current("questions").tick(1)
            return pd.DataFrame({"qid": rows["qid"], "ticking.hit@10": np.ones(len(rows), dtype=np.int8)})

    monkeypatch.setenv(progress.INTERVAL_ENV, "0")
    table = synthetic_outcome_table(n_docs=20, questions_per_doc=5, seed=3)  # 100 questions: 2 chunks
    add_blocks(table, [Ticking()], None, base_key="base-1", cache_dir=tmp_path)
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("[route-bench] arm block ticking: ") and " questions (" in line]
    # a line per answer (interval 0) and the one after chunk 1, counted once: the chunk's own count
    # adds nothing; the last answer ends the block, whose summary line follows (no "done" from a tick)
    counts = [*range(1, 51), 50, *range(51, 100)]
    assert [line.split(": ")[1].split(" ")[0] for line in lines] == [f"{i}/100" for i in counts]
    assert all("questions/s measured here)" in line for line in lines)


def test_a_heartbeat_prints_what_is_at_work_when_a_batch_outlasts_the_interval(monkeypatch):
    """On the wall clock, a root that prints keeps a timer thread: a batch longer than the
    interval still gets a line (the stage's, at its last count), and the thread ends with the
    root's block. A test's own clock gets none (its lines come only from counting)."""
    import threading
    import time

    lines: list[str] = []
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.2")
    root = Progress("outcome table k", 10, "units", out=lines.append, emit=False, stages=True)
    with root.active(), progress.stage("encoding passages", 100, "texts") as enc:
        enc.start_timing()
        time.sleep(0.05)
        enc.tick(10)  # the first measured batch: its line
        first = len(lines)
        time.sleep(1.5)  # one long batch: no count, so only the heartbeat prints
        beats = lines[first:]
    assert first == 1 and beats, lines
    assert all(", encoding passages: 10/100 texts (10%)" in line and "left in this stage" in line for line in beats)
    assert not [t for t in threading.enumerate() if t.name == "route-bench-progress"]
    lines.clear()  # a stage done but its block still open (writing its results): the root's line
    root = Progress("outcome table k", 10, "units", out=lines.append, stages=True)
    with root.active(), progress.stage("encoding passages", 20, "texts") as enc:
        enc.start_timing()
        enc.tick(10)
        enc.tick(10)
        time.sleep(1.5)
    assert "10/20 texts (50%)" in lines[0] and lines[1].endswith("20/20 texts (100%), 0s elapsed, done"), lines
    assert len(lines) > 2 and all(line.startswith("[route-bench] outcome table k: 0/10 units (0%)")
                                  for line in lines[2:]), lines
    clock = Clock()
    quiet = Progress("t", 10, "units", clock=clock, out=lambda line: pytest.fail(line), emit=False, stages=True)
    with quiet.active(), progress.stage("s", 10, "texts"):
        assert not [t for t in threading.enumerate() if t.name == "route-bench-progress"]


@pytest.mark.slow
def test_a_real_global_pool_encode_prints_progress_inside_its_one_shard(tmp_path, capsys, monkeypatch):
    """The packaged MiniLM over a 40-passage global pool (one shard), lines at every batch
    (interval 0): the passages' encoding reports batch by batch with a measured time left, and
    the table equals one built without any line."""
    from harness.data.schema import Dataset, Question, Unit
    from harness.retrieval.table import build_outcome_table

    words = "retrieval passages are encoded in batches of one token length".split()
    units = [Unit(f"g#{i}", "g", i, "paragraph", " ".join(words[: 1 + i % len(words)]) + f" number {i}")
             for i in range(40)]
    qs = [Question(f"q{j}", "g", "g", f"which passage has number {j}?", gold_unit_ids=(f"g#{j}",)) for j in range(6)]
    ds = Dataset("global40", {"g": units}, qs, {"g": [u.unit_id for u in units]})
    cfg = {"k": 3, "candidates": 5, "precision": "fp32", "encoder": {"batch_size": 4}}
    monkeypatch.setenv(progress.INTERVAL_ENV, "0")
    shown = build_outcome_table(ds, cfg, {"name": "maxsim"}, cache_dir=tmp_path / "a")
    _, stages = _root_and_stage_lines(capsys.readouterr().out.splitlines())
    encoding = [line for line in stages if ", shard 1/1, encoding passages: " in line]
    assert len(encoding) >= 5, stages  # 40 texts of 12 lengths: at least 12 batches
    assert encoding[-1].endswith("40/40 texts (100%), " + encoding[-1].split(", ")[-2] + ", done")
    assert all("texts/s measured in it)" in line and " left in this stage " in line for line in encoding[:-1])
    quiet = build_outcome_table(ds, cfg, {"name": "maxsim"}, cache_dir=tmp_path / "b", progress=False)
    assert capsys.readouterr().out == ""
    same = [c for c in shown.frame.columns if not c.endswith("_ms") and "seconds" not in c]
    assert shown.key == quiet.key and shown.frame[same].equals(quiet.frame[same])
