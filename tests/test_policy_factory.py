"""``harness.app.policy_factory`` clones policies (``type(p)(**get_params())``) only where a
clone is provably the same policy; elsewhere it instantiates from the config every time."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from harness.app import policy_factory
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.base import Policy, ScoreContext
from policies.builtin import resolve_features

REPO = Path(__file__).resolve().parent.parent


class KwPolicy(Policy):
    """Legal but not clonable: options arrive as **kwargs and are not constructor parameters."""

    name, trainable, features = "kw", False, ("dense_top1",)

    def __init__(self, scale: float = 1.0, **options):
        self.scale = scale
        self.options = dict(options)

    def score(self, X, ctx):
        sign = -1.0 if self.options.get("flip") else 1.0
        return sign * self.scale * X["dense_top1"].to_numpy(dtype=float)


class Top1(Policy):
    name, trainable = "top1", False

    def __init__(self, feature: str = "dense_top1"):
        self.feature = feature
        self.features = (feature,)

    def score(self, X, ctx):
        return X[self.feature].to_numpy(dtype=float)


def top1_on(feature: str):
    """A factory function as ``_target_``: it sets what the class's own default would not."""
    policy = Top1()
    policy.features = resolve_features(feature)
    policy.feature = feature
    return policy


def _scores(policy):
    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=10, questions_per_doc=3, seed=2))
    X = task.feature_matrix(policy.features)
    return np.asarray(policy.score(X, ScoreContext(qids=task.qids)))


def test_every_builtin_is_cloned_and_clones_equal_fresh_instances():
    from policies.registry import make_policy

    for path in sorted(glob.glob(str(REPO / "conf" / "policy" / "*.yaml"))):
        if path.endswith("plugin.yaml"):
            continue
        spec = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
        factory = policy_factory(spec)
        assert factory.__name__ == "clone", path
        assert vars(factory()) == vars(make_policy(spec)), path


def test_kwargs_and_factory_targets_are_instantiated_from_the_config():
    spec = {"name": "kw", "_target_": "tests.test_policy_factory.KwPolicy", "scale": 2.0, "flip": True}
    factory = policy_factory(spec)
    assert factory.__name__ == "from_config"
    a, b = factory(), factory()
    assert a is not b and a.options == {"flip": True}
    np.testing.assert_array_equal(_scores(a), -2.0 * _scores(Top1()))
    spec = {"name": "top1_q", "_target_": "tests.test_policy_factory.top1_on", "feature": "q_n_capitalised"}
    factory = policy_factory(spec)
    assert factory.__name__ == "from_config" and factory().features == ("q_n_capitalised",)
