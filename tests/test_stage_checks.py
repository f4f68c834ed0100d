"""``check_policy`` on a cascade stage's stop rule (policies.stage_checks): the built-ins pass, and
each broken rule fails the check named for what it breaks (one test id per check)."""

from __future__ import annotations

import numpy as np
import pytest

from policies.cascade_stages import CascadeStage, LogisticStop, TopScore
from policies.checks import PolicyCheckError, check_policy
from policies.stage_checks import STAGE_CHECKS


@pytest.mark.parametrize("stage", [TopScore(), TopScore("bm25_top1", -1), LogisticStop(), LogisticStop(["q_len_words"])],
                         ids=["top_score", "top_score_feature", "logistic", "logistic_subset"])
def test_built_in_stop_rules_pass_every_check(stage):
    report = check_policy(stage, quiet=True)
    assert report.passed == STAGE_CHECKS
    assert not hasattr(stage, "medians_")  # the stage handed in is never fitted itself


class _Base(CascadeStage):
    name = "broken"

    def score(self, X):
        return X["bm25_top1"].to_numpy(dtype=float)


class NaNScore(_Base):
    def score(self, X):
        s = super().score(X).copy()
        s[0] = np.nan
        return s


class WrongLength(_Base):
    def score(self, X):
        return super().score(X)[:-1]


class Unrepeatable(_Base):
    calls = 0

    def score(self, X):
        self.calls += 1
        return super().score(X) + self.calls


class RandomFit(_Base):
    def fit(self, X, stop_ok, groups, seed=0):
        self.shift_ = np.random.default_rng().random()
        return self

    def score(self, X):
        return super().score(X) + self.shift_


class RankScore(_Base):
    def score(self, X):
        return np.argsort(np.argsort(super().score(X))).astype(float)  # depends on the other rows


class Mutating(_Base):
    def fit(self, X, stop_ok, groups, seed=0):
        stop_ok[:] = 1
        return self


class Raising(_Base):
    def fit(self, X, stop_ok, groups, seed=0):
        raise ValueError("no")


@pytest.mark.parametrize("stage, check", [
    (object(), "is_stage"), (Raising(), "fit_score"), (WrongLength(), "one_score_per_row"),
    (NaNScore(), "no_nan_or_plus_inf"), (Unrepeatable(), "repeatable_score"), (RandomFit(), "deterministic_fit"),
    (RankScore(), "row_independence"), (Mutating(), "inputs_untouched"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)
def test_a_broken_stop_rule_fails_the_named_check(stage, check):
    if check == "is_stage":  # not a stage at all: check_policy says it is no policy
        with pytest.raises(PolicyCheckError) as err:
            check_policy(stage, quiet=True)
        assert err.value.check == "is_policy"
        from policies.stage_checks import run_stage_checks

        def fail(c, m):
            raise PolicyCheckError("x", c, m)
        with pytest.raises(PolicyCheckError) as err:
            run_stage_checks(stage, None, 0, fail)
        assert err.value.check == "is_stage"
        return
    with pytest.raises(PolicyCheckError) as err:
        check_policy(stage, quiet=True)
    assert err.value.check == check, err.value
