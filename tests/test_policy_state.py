"""Strict JSON policy state: anything but plain JSON is an error naming the policy and field.

A plugin's ``get_state()`` holding a NumPy array used to be written with ``str()`` (so its
frozen digest changed run to run and ``set_state`` failed later); now ``check_json_state``
refuses it at freeze time and ``canonical_json`` never stringifies.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.io import canonical_json, digest_of, json_problem
from policies.base import PolicyStateError, check_json_state
from tests.helpers.numeric import assert_same_numbers
from tests.helpers.recorded import BUILTIN_OUTPUTS_FILE, _builtin_outputs


@pytest.mark.parametrize("state,message", [
    ({"weights": np.zeros(3)}, r"^policy 'my_plugin' state\['weights'\]: numpy\.ndarray is not JSON; return a list"),
    ({"n": np.int64(3)}, r"state\['n'\]: numpy\.int64 is not JSON; return a Python number"),
    ({"flag": np.bool_(True)}, r"state\['flag'\]: numpy\.bool.* is not JSON"),
    ({"a": [1, {"b": float("nan")}]}, r"state\['a'\]\[1\]\['b'\]: nan is not a finite number"),
    ({"tau": math.inf}, r"state\['tau'\]: inf is not a finite number"),
    ({"shape": (2, 3)}, r"state\['shape'\]: tuple is not JSON; return a list"),
    ({"classes": {1: 0.5}}, r"state\['classes'\]: key 1 \(int\) is not a str"),
    ({"names": {"a", "b"}}, r"state\['names'\]: set is not JSON; return a sorted list"),
    ({"model": object()}, r"state\['model'\]: object is not JSON"),
])
def test_non_json_state_names_policy_and_field(state, message):
    with pytest.raises(PolicyStateError, match=message):
        check_json_state("my_plugin", state)
    assert issubclass(PolicyStateError, HarnessError)


def test_state_must_be_a_dict():
    with pytest.raises(PolicyStateError, match=r"policy 'p' get_state\(\) returned list, not a dict"):
        check_json_state("p", [1, 2])


def test_plain_state_passes_and_round_trips():
    state = {"kind": "ridge", "coef": [0.5, -1.25], "n": 3, "ok": True, "none": None,
             "nested": {"a": [{"b": "c"}]}, "f64": np.float64(0.1)}  # a float subclass serialises exactly
    assert check_json_state("ridge", state) is state
    text = canonical_json(state)
    assert json.loads(text) == {**state, "f64": 0.1}
    assert canonical_json(json.loads(text)) == text, "the frozen digest is stable"


def test_canonical_json_never_stringifies():
    with pytest.raises(TypeError, match=r"canonical JSON: value\['weights'\]: numpy\.ndarray is not JSON"):
        canonical_json({"weights": np.arange(3)})
    with pytest.raises(TypeError, match=r"value\[0\]\['p'\]: .*PosixPath is not JSON"):
        digest_of([{"p": __import__("pathlib").Path("/x")}])
    # what digests are taken of stays accepted: tuples, NaN, non-str keys json can write
    assert canonical_json({"t": (1, 2), "x": float("nan")}) == '{"t":[1,2],"x":NaN}'
    assert canonical_json({3: "k"}) == '{"3":"k"}'
    assert json_problem({"t": (1, 2), 3: None}) is None


def test_every_builtin_policy_state_is_strict_json(planted_table):
    from harness.task import RoutingTask
    from policies.registry import builtin_policy_configs, make_policy

    from harness.protocols.common import fit_policy

    task = RoutingTask.from_table(planted_table)
    for stem, cfg in builtin_policy_configs().items():
        if getattr(make_policy(cfg), "n_way", False):  # n-way: tests/test_arms_protocol.py round-trips its state
            continue
        policy = fit_policy(make_policy(cfg), task, 0)
        state = policy.get_state()
        check_json_state(policy.name, state)
        assert json.loads(canonical_json(state)) == state, stem


def test_plugin_with_numpy_state_fails_at_freeze_naming_it(planted_table, tmp_path):
    """Through the real freeze: today canonical_json refuses (naming the field); with the
    one-line ``check_json_state`` call in ``threshold.develop`` the message names the policy."""
    from harness.protocols.threshold_freeze import develop
    from harness.task import RoutingTask
    from policies.base import Policy

    class MyPlugin(Policy):
        name = "my_plugin"
        trainable = True
        features = ("q_len_words",)

        def fit(self, X, delta, groups, seed=0):
            self.w = np.ones(2)
            return self

        def score(self, X, ctx):
            return X["q_len_words"].to_numpy(dtype=float)

        def get_state(self):
            return {"weights": self.w}

    task = RoutingTask.from_table(planted_table)
    with pytest.raises((TypeError, PolicyStateError), match=r"\['weights'\]: numpy\.ndarray is not JSON"):
        develop(task, MyPlugin, cost=0.02, seed=0, n_folds=2, freeze_dir=tmp_path / "freeze")
    assert not (tmp_path / "freeze" / "policy_state.json").exists()


# the recording (how it was made, and how to regenerate it): tests/helpers/recorded.py
def test_builtin_scores_and_states_are_as_recorded(planted_table):
    got = _builtin_outputs(planted_table)
    recorded = json.loads(BUILTIN_OUTPUTS_FILE.read_text(encoding="utf-8"))
    assert len(got) >= 28 and set(recorded) == set(got)
    for stem in sorted(recorded):
        assert_same_numbers(got[stem], recorded[stem], f"built-in policy {stem!r}")
