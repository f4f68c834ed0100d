"""The sweep's end warns once per outcome table when there is nothing to route (the arms agree on
every question) or the base arm is at ceiling, from the jobs' logged table metrics."""

from __future__ import annotations

from types import SimpleNamespace

from harness.runner.sweep_end import table_warnings


def _run(key: str, status: str = "FINISHED", **metrics) -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(status=status), data=SimpleNamespace(
        metrics={f"table/{k.replace('__', '/')}": v for k, v in metrics.items()}, tags={"route_bench.table_key": key}))


def test_nothing_to_route_and_ceiling_once_per_table():
    runs = [_run("a" * 64, rescues=0.0, harms=0.0, base__hit_at_10=0.8),
            _run("a" * 64, rescues=0.0, harms=0.0, base__hit_at_10=0.8),  # same table: one line
            _run("b" * 64, rescues=3.0, harms=1.0, base__hit_at_10=1.0),
            _run("c" * 64, rescues=2.0, harms=2.0, base__hit_at_10=0.9),  # nothing to say
            _run("d" * 64, status="FAILED", rescues=0.0, harms=0.0)]  # a failed job's table is not read
    got = table_warnings(runs, "hit@10")
    assert len(got) == 2
    assert got[0].startswith("warning: nothing to route: the arms agree on every question of table aaaaaaaaaaaa")
    assert got[1].startswith("warning: the base arm is at ceiling (hit@10 = 1.000 on table bbbbbbbbbbbb)")
    assert table_warnings(runs[3:], "hit@10") == []
