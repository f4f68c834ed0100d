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


# ---- plugins that take control (tests/test_plugin_guard.py) ----------------------------------
SLOW_S = 30.0  # far past any limit the tests set


class ExitInFit(AlwaysBase):
    trainable = True

    def fit(self, X, delta, groups, seed=0):
        import sys

        sys.exit(0)


class ExitInScore(AlwaysBase):
    def score(self, X, ctx):
        raise SystemExit("bye")


class _Escape(BaseException):
    """Neither an error nor an interrupt."""


class BaseExceptionInFit(AlwaysBase):
    trainable = True

    def fit(self, X, delta, groups, seed=0):
        raise _Escape("escaping")


class TermInFit(AlwaysBase):
    """Sends its own process SIGTERM."""

    trainable = True

    def fit(self, X, delta, groups, seed=0):
        import os
        import signal
        import time

        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(SLOW_S)
        return self


class SlowFit(AlwaysBase):
    trainable = True

    def fit(self, X, delta, groups, seed=0):
        import time

        time.sleep(SLOW_S)
        return self


class SlowScore(AlwaysBase):
    def score(self, X, ctx):
        import time

        time.sleep(SLOW_S)
        return super().score(X, ctx)


class SwallowsTheLimit(AlwaysBase):
    """Catches everything, the timer's interruption too, and goes on for 1.5 s."""

    trainable = True

    def fit(self, X, delta, groups, seed=0):
        import time

        start = time.monotonic()
        while time.monotonic() - start < 1.5:
            try:
                time.sleep(0.05)
            except BaseException:  # noqa: BLE001 - the point of this plugin
                pass
        return self


class SeriesScores(AlwaysBase):
    """Scores ``dense_top1`` as a pandas Series, indexed as ``index`` says: ``qids`` /
    ``qids_reversed`` (the questions' ids), ``rows_reversed`` (the rows of X), ``foreign``
    (labels that are neither), ``duplicate`` (a label twice)."""

    features = ("dense_top1",)

    def __init__(self, index: str = "qids_reversed"):
        self.index = index

    def score(self, X, ctx):
        import numpy as np
        import pandas as pd

        values = X["dense_top1"].to_numpy(dtype=float)
        if self.index == "qids":
            return pd.Series(values, index=ctx.qids)
        if self.index == "qids_reversed":
            return pd.Series(values, index=ctx.qids)[::-1]
        if self.index == "rows_reversed":
            return pd.Series(values, index=X.index)[::-1]
        if self.index == "foreign":
            return pd.Series(values, index=[f"x{i}" for i in range(len(values))])
        return pd.Series(values, index=np.zeros(len(values), dtype=int))


class BadScores(AlwaysBase):
    """Returns scores of the ``kind`` asked for, none of them one finite float per question."""

    def __init__(self, kind: str = "strings"):
        self.kind = kind

    def score(self, X, ctx):
        import numpy as np
        import pandas as pd

        n = len(X)
        return {
            "strings": lambda: np.array(["a"] * n),
            "objects": lambda: [0.5] * (n - 1) + [None],
            "complex": lambda: np.ones(n, dtype=complex),
            "text_series": lambda: pd.Series(["a"] * n),
            "two_d": lambda: np.zeros((n, 1)),
            "frame": lambda: pd.DataFrame({"s": np.zeros(n)}),
            "short": lambda: np.zeros(n - 1),
            "nan": lambda: np.r_[np.zeros(n - 1), np.nan],
            "inf": lambda: np.r_[np.inf, np.zeros(n - 1)],
            "scalar": lambda: 0.5,
        }[self.kind]()


class OsExitInFit(AlwaysBase):
    """Ends the process the hard way in fit (os._exit skips every handler)."""

    trainable = True

    def fit(self, X, delta, groups, seed=0):
        import os

        os._exit(0)
