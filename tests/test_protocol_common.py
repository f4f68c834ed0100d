"""score_task / fit_policy: what a policy sees, and bad policies or configs give clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ConfigError, FeatureError, HarnessError
from harness.protocols import fit_policy, run_budget_protocol, run_threshold_protocol, score_task
from harness.task import RoutingTask
from policies.base import Policy
from tests.helpers.policies import ConstantPolicy, LstsqPolicy, OraclePolicy


class _NaNPolicy(Policy):
    name = "nan"

    def score(self, X, ctx):
        return np.full(len(ctx.qids), np.nan)


class _InfPolicy(Policy):
    name = "inf"

    def score(self, X, ctx):
        out = np.zeros(len(ctx.qids))
        out[0] = np.inf  # would collide with the "never run" threshold tau = +inf
        return out


class _ShortPolicy(Policy):
    name = "short"

    def score(self, X, ctx):
        return np.zeros(1)


class _MissingFeaturePolicy(ConstantPolicy):
    features = ("no_such_feature",)


def test_oracle_gets_true_delta_others_do_not(planted_table):
    task = RoutingTask.from_table(planted_table)
    np.testing.assert_array_equal(score_task(OraclePolicy(), task, 0), task.delta)
    seen = {}

    class Spy(Policy):
        def score(self, X, ctx):
            seen["delta"] = ctx.true_delta
            seen["columns"] = list(X.columns)
            return np.zeros(len(ctx.qids))

    Spy.features = ("dense_top1",)
    score_task(Spy(), task, 0)
    assert seen == {"delta": None, "columns": ["dense_top1"]}


def test_fit_only_when_trainable(planted_table):
    task = RoutingTask.from_table(planted_table)
    assert fit_policy(LstsqPolicy(), task, 0).state is not None
    calls = []

    class Untrainable(ConstantPolicy):
        def fit(self, *a, **k):
            calls.append(1)
            return self

    fit_policy(Untrainable(), task, 0)
    assert calls == []


def test_bad_policies_and_configs_raise_clear_errors(planted_table, tmp_path):
    task = RoutingTask.from_table(planted_table)
    with pytest.raises(HarnessError, match="NaN"):
        score_task(_NaNPolicy(), task, 0)
    with pytest.raises(HarnessError, match=r"policy inf .*non-finite.* for 1 questions"):
        score_task(_InfPolicy(), task, 0)
    with pytest.raises(HarnessError, match="1 scores for 300"):
        score_task(_ShortPolicy(), task, 0)
    with pytest.raises(FeatureError, match="no_such_feature"):
        score_task(_MissingFeaturePolicy(), task, 0)
    with pytest.raises(ConfigError, match="cost"):
        run_threshold_protocol(task, ConstantPolicy, cost=-1, freeze_dir=tmp_path)
    assert not (tmp_path / "manifest.json").exists()  # nothing frozen on a bad config
    with pytest.raises(ConfigError, match="n_boot"):
        run_threshold_protocol(task, ConstantPolicy, n_boot=10, freeze_dir=tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(ConfigError, match=r"budget\.grid"):
        run_budget_protocol(task, ConstantPolicy, budgets=(1.5,))
    with pytest.raises(ConfigError, match=r"budget\.grid.*\(0, 1\]"):  # as harness.config.validate says
        run_budget_protocol(task, ConstantPolicy, budgets=(0.0,))


def test_an_undefined_number_prints_as_undefined_never_nan():
    """A NaN the run declared undefined (APGR, CPT, Spearman on too little) prints as the word the
    report uses, in the protocols' tables and the job lines; defined numbers as before."""
    from harness.protocols.builtin import GainProtocol
    from harness.protocols.common import fmt, shown, text_table

    assert [fmt(float("nan")), fmt(None), fmt(0.5), fmt(3)] == ["undefined", "undefined", "0.5000", "3"]
    assert text_table(["x", "APGR"], [["policy", float("nan")]]).splitlines()[-1].split() == ["policy", "undefined"]
    assert [shown(float("nan"), ".3f"), shown(0.25, ".3f")] == ["undefined", "0.250"]
    line = GainProtocol().job_line({"gain/selective/quality": 0.81, "gain/spearman": float("nan")}, "hit@10", [])
    assert line == "C test half: selective hit@10=0.8100 spearman=undefined"
