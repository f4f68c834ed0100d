"""The test-local ridge router (tests/helpers/policies.py) keeps its scores through a state
round trip, and refuses to score before it is fitted."""

from __future__ import annotations

import numpy as np
import pytest

from policies.base import ScoreContext
from tests.helpers.policies import LstsqPolicy


def test_lstsq_policy_state_round_trips(planted_table):
    from harness.task import RoutingTask

    task = RoutingTask.from_table(planted_table)
    X = task.feature_matrix(LstsqPolicy.features)
    fitted = LstsqPolicy().fit(X, task.delta, task.groups)
    rebuilt = LstsqPolicy()
    rebuilt.set_state(fitted.get_state())
    ctx = ScoreContext(task.qids, 0)
    np.testing.assert_array_equal(fitted.score(X, ctx), rebuilt.score(X, ctx))
    with pytest.raises(RuntimeError):
        LstsqPolicy().score(X, ctx)
