"""Test-only policies that break in one method (``tests/test_bad_inputs.py``): a plugin's error
must name the plugin, the method and the first line of what it raised.

Selected with ``policy=always_keep policy._target_=tests.bad_plugins.<Class>`` (the repository
root on the path, as under pytest).
"""

from __future__ import annotations

from policies.builtin import AlwaysBase


class BoomInFit(AlwaysBase):
    trainable = True

    def fit(self, X, delta, groups, seed=0):
        raise ValueError("boom in fit\nsecond line of the error")


class BoomInScore(AlwaysBase):
    def score(self, X, ctx):
        raise RuntimeError("boom in score")


class BoomInSetState(AlwaysBase):
    def set_state(self, state):
        raise KeyError("boom in set_state")


class NotAPolicy:
    """A class that takes any parameter but is no Policy."""

    def __init__(self, **params):
        self.params = params


class BoomInInit(AlwaysBase):
    def __init__(self, **params):
        raise TypeError("boom in init\nsecond line of the error")


class ScoresDiffer(AlwaysBase):
    """Scores drawn afresh on every call (unseeded): a second score of the same rows differs."""

    def score(self, X, ctx):
        import numpy as np

        return np.random.default_rng().random(len(X))
