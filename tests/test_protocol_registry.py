"""Protocols as plugins (harness.protocols.registry): names, entry points, typed settings, and
the built-in adapters give exactly the numbers of the protocol functions."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import List, Optional

import pytest

from harness.errors import ConfigError
from harness.protocols.registry import Protocol, ProtocolContext, make_protocol, protocol_names, settings_of
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.helpers.plugin_tools import activate, write_plugin
from tests.helpers.policies import LstsqPolicy

PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass

    import numpy as np

    from harness.protocols.registry import Protocol, ProtocolResult, Table


    class ScoreSpread(Protocol):
        """Spread of a policy's in-sample scores: a toy protocol, one file."""

        name = "score_spread"

        @dataclass
        class Config:
            quantile: float = 0.9

        def run(self, task, factory, ctx):
            from harness.protocols.common import fit_policy, score_task

            policy = fit_policy(factory(), task, ctx.seed)
            s = score_task(policy, task, ctx.seed)
            q = float(np.quantile(s, ctx.settings.quantile))
            import pandas as pd
            frame = pd.DataFrame({"qid": task.qids, "score": s})
            return ProtocolResult(metrics={"spread/q": q, "spread/n": float(task.n)},
                                  summary=f"score spread: q{ctx.settings.quantile} = {q:.4f}",
                                  tables={"spread_scores": Table(frame, preview=True, per_question=True)})
''')


def test_builtins_are_listed_and_named():
    assert protocol_names()[:3] == ["threshold", "budget", "gain"]
    for name in ("threshold", "budget", "gain"):
        assert make_protocol(name).name == name
    with pytest.raises(ConfigError, match=r"protocol\.run.*unknown protocol 'budgte'; did you mean 'budget'"):
        make_protocol("budgte")


def test_entry_point_protocol_is_found_and_typed(tmp_path, monkeypatch):
    root = write_plugin(tmp_path / "site", "spread_plugin", PLUGIN,
                        {"rag_route_bench.protocols": {"score_spread": "spread_plugin:ScoreSpread"}})
    activate(monkeypatch, root)
    assert "score_spread" in protocol_names()
    proto = make_protocol("score_spread")
    assert settings_of(proto, {}).quantile == 0.9
    assert settings_of(proto, {"quantile": 0.5}).quantile == 0.5
    with pytest.raises(ConfigError, match=r"protocol\.settings\.score_spread\.quantil.*did you mean 'quantile'"):
        settings_of(proto, {"quantil": 0.5})
    with pytest.raises(ConfigError, match=r"protocol\.settings\.score_spread\.quantile.*must be a number"):
        settings_of(proto, {"quantile": "high"})
    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=10, questions_per_doc=4, seed=1))
    ctx = ProtocolContext(cfg={"seed": 0, "cost": {"c": 0.0}, "protocol": {}}, artifact_dir=tmp_path,
                          settings=settings_of(proto, {"quantile": 0.5}))
    res = proto.run(task, LstsqPolicy, ctx)
    assert res.metrics["spread/n"] == 40 and math.isfinite(res.metrics["spread/q"])
    assert list(res.tables) == ["spread_scores"]


def test_settings_without_a_config_are_refused():
    class Bare(Protocol):
        name = "bare"

        def run(self, task, factory, ctx):  # pragma: no cover - never run
            raise AssertionError

    assert settings_of(Bare(), None) is None
    with pytest.raises(ConfigError, match=r"protocol\.settings\.bare.*takes no settings"):
        settings_of(Bare(), {"x": 1})

    class Typed(Bare):
        @dataclass
        class Config:
            n: int = 3

    with pytest.raises(ConfigError, match=r"protocol\.settings\.bare\.n.*must be an integer"):
        settings_of(Typed(), {"n": 2.5})
    assert settings_of(Typed(), {"n": 4}).n == 4


def test_settings_types_and_shapes_are_checked():
    class Typed(Protocol):
        name = "typed"

        @dataclass
        class Config:
            on: bool = False
            label: str = "x"
            k: Optional[int] = None
            grid: List[float] = None  # type: ignore[assignment]

            def __post_init__(self):
                if self.k is not None and self.k < 1:
                    raise ValueError(f"k must be >= 1, got {self.k}")

        def run(self, task, factory, ctx):  # pragma: no cover - never run
            raise AssertionError

    p = Typed()
    ok = settings_of(p, {"on": True, "label": "a", "k": None, "grid": [0.1, 1]})
    assert ok.on is True and ok.grid == [0.1, 1]
    for bad, key, why in [({"on": "no"}, "on", "true or false"), ({"label": 5}, "label", "a string"),
                          ({"k": "many"}, "k", "an integer"), ({"grid": 0.3}, "grid", "a list"),
                          ({"grid": [0.1, "x"]}, "grid", "item 1")]:
        with pytest.raises(ConfigError, match=rf"protocol\.settings\.typed\.{key}.*{why}"):
            settings_of(p, bad)
    with pytest.raises(ConfigError, match=r"protocol\.settings\.typed.*k must be >= 1"):
        settings_of(p, {"k": 0})
    with pytest.raises(ConfigError, match=r"protocol\.settings\.typed.*must be a mapping"):
        settings_of(p, 0.5)


def test_results_of_two_protocols_may_not_clash():
    import pandas as pd

    from harness.errors import HarnessError
    from harness.protocols.registry import ProtocolResult, Table, check_results

    a = ProtocolResult(metrics={"heldout/utility": 0.7, "cost": 0.02}, summary="",
                       tables={"decisions": Table(pd.DataFrame({"x": [1]}))})
    check_results({"threshold": a, "budget": ProtocolResult(metrics={"cost": 0.02}, summary="")})  # shared setting
    with pytest.raises(HarnessError, match="'threshold' and 'clobber' both write the metric 'heldout/utility'"):
        check_results({"threshold": a, "clobber": ProtocolResult(metrics={"heldout/utility": 123.0}, summary="")})
    with pytest.raises(HarnessError, match="both write the artifact 'decisions.parquet'"):
        check_results({"threshold": a, "clobber": ProtocolResult(metrics={}, summary="",
                                                                 tables={"decisions": Table(pd.DataFrame())})})
    for bad in ("../x", "frozen/router.json", ".hidden"):
        with pytest.raises(HarnessError, match="is not allowed"):
            check_results({"p": ProtocolResult(metrics={}, summary="", tables={bad: Table(pd.DataFrame())})})
    for bad in ("summary.txt", "config.yaml", "frozen"):  # files the app writes itself
        with pytest.raises(HarnessError, match="is not allowed"):
            check_results({"p": ProtocolResult(metrics={}, summary="", plots={bad: lambda path: path})})


def test_a_sweep_stage_tags_only_its_own_job_runs_under_its_own_names(monkeypatch):
    """``SweepResult.job_tags``: tags for run ids that are not the sweep's jobs, or named like
    MLflow's or the harness's own tags, make the stage a one-line failure (the jobs' results
    stand); tags on the sweep's jobs pass through."""
    from harness.protocols import registry
    from harness.protocols.sweep_stage import SweepContext, SweepJob, SweepResult, run_sweep_stages

    jobs = [SweepJob("r1", "a c=0", "FINISHED", {}, {}, {}), SweepJob("r2", "b c=0", "FINISHED", {}, {}, {})]
    cases = {"good": ({"r1": {"verdict": "deploy (b0.25)"}}, None),
             "stray": ({"r9": {"verdict": "x"}}, "not jobs of this sweep: ['r9']"),
             "mlflow": ({"r1": {"mlflow.runName": "x"}}, "not mlflow.* or route_bench.*"),
             "harness": ({"r2": {"route_bench.policy": "x"}}, "not mlflow.* or route_bench.*")}

    class Stage:
        def __init__(self, name):
            self.name = name

        def aggregate(self, jobs, ctx):
            return SweepResult(title=self.name, text="t", job_tags=cases[self.name][0])

    monkeypatch.setattr(registry, "make_protocol", Stage)
    results = run_sweep_stages(jobs, list(cases), SweepContext())
    assert results["good"].job_tags == {"r1": {"verdict": "deploy (b0.25)"}}
    for name, (_, why) in cases.items():
        if why:
            assert results[name].job_tags == {} and why in results[name].text, results[name].text
