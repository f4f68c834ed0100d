"""Remaining-time lines (harness.progress) from measured throughput, on a fake clock; and a real
table build whose output is not a terminal prints them with the time left."""

from __future__ import annotations

import pytest

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


def test_table_build_off_a_terminal_prints_the_time_left(tmp_path, capsys):
    from harness.retrieval.table import build_outcome_table
    from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

    build_outcome_table(tiny_dataset(extra_docs=3), ARMS_CFG, MAXSIM, cache_dir=tmp_path, encoder=FakeEncoder())  # 4 shards
    out = capsys.readouterr().out.splitlines()  # stdout is not a terminal under pytest
    progress = [line for line in out if line.startswith("[route-bench] outcome table ")]
    assert len(progress) >= 2, out
    assert all(" left (" in line and "units/s measured here" in line for line in progress[:-1])
    assert progress[-1].endswith(", done")


def test_the_warm_up_times_its_second_run_and_gives_the_first_estimate():
    from harness.progress import expect_text, warm_up_rate

    clock, runs = Clock(), []

    def work():  # the first run also loads the models: 10 s; then 2 s for 50 units
        clock.t += 10.0 if not runs else 2.0
        runs.append(1)

    assert warm_up_rate(work, 50, clock=clock) == pytest.approx(25.0) and len(runs) == 2
    assert warm_up_rate(work, 0, clock=clock) is None
    assert expect_text(1000, "units", 25.0) == "expect about 40s (25 units/s in a warm-up here)"
    assert expect_text(1000, "units", None) == "the time left is measured as the work is done"
    lines = []
    p = Progress("table x", 1000, "units", clock=clock, out=lines.append, warm_up_rate=25.0)
    assert p.line().endswith("about 40s left (25 units/s in a warm-up here)")  # before anything is computed
    clock.t += 10.0
    p.advance(100)  # then the rate measured by the build itself: 10 units/s
    assert p.line().endswith("about 1m30s left (10 units/s measured here)")


def test_a_cold_table_build_warms_up_on_one_pool_and_keeps_the_same_table(tmp_path, capsys):
    from harness.retrieval.table import build_outcome_table
    from harness.retrieval.warm_up import warm_up_pool
    from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

    data = tiny_dataset(extra_docs=60)  # 304 units: a 5-unit pool is under the warm-up's share
    pool = warm_up_pool(data, [[p] for p in sorted(data.pools)], tmp_path / "none", 304)
    assert pool == ["d0"]  # the median pool of the first shard to compute (one pool per shard here)
    warm = build_outcome_table(data, ARMS_CFG, MAXSIM, cache_dir=tmp_path / "a", encoder=FakeEncoder())
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("[route-bench] building outcome table ") and "units/s in a warm-up here)" in first
    assert "expect about " in first
    quiet = build_outcome_table(data, ARMS_CFG, MAXSIM, cache_dir=tmp_path / "b", encoder=FakeEncoder(), progress=False)
    assert capsys.readouterr().out == ""  # progress=False: no warm-up, no line
    same = [c for c in warm.frame.columns if not c.endswith("_ms") and "seconds" not in c]
    assert warm.key == quiet.key and warm.frame[same].equals(quiet.frame[same])  # the warm-up's rows are discarded
    # a pool too large for a warm-up (the tiny table: 19 units, pools of 4-5): measured as shards are done
    build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path / "c", encoder=FakeEncoder())
    assert capsys.readouterr().out.splitlines()[0].endswith("the time left is measured as the work is done")
