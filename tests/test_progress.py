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
    from tests.test_retrieval_table import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

    build_outcome_table(tiny_dataset(extra_docs=3), ARMS_CFG, MAXSIM, cache_dir=tmp_path, encoder=FakeEncoder())  # 4 shards
    out = capsys.readouterr().out.splitlines()  # stdout is not a terminal under pytest
    progress = [line for line in out if line.startswith("[route-bench] outcome table ")]
    assert len(progress) >= 2, out
    assert all(" left (" in line and "units/s measured here" in line for line in progress[:-1])
    assert progress[-1].endswith(", done")
