"""check_policy: every built-in and every installed plugin keeps the policy contract, and a
policy that breaks it fails with one error naming the policy and the check."""

from __future__ import annotations

import numpy as np
import pytest

import policies
from harness.errors import HarnessError
from policies.base import FLOAT, Policy
from policies.checks import CHECKS, PolicyCheckError, check_policy
from policies.registry import builtin_policy_configs, entry_point_policies, load_entry_point, make_policy

BUILTIN_CONFIGS = builtin_policy_configs()


def test_check_policy_is_public():
    assert policies.check_policy is check_policy and policies.PolicyCheckError is PolicyCheckError
    assert len(BUILTIN_CONFIGS) >= 28  # the parametrization below is not empty


@pytest.mark.parametrize("stem", sorted(BUILTIN_CONFIGS))
def test_builtin_policy_passes_every_check(stem):
    policy = make_policy(BUILTIN_CONFIGS[stem])
    check_policy(policy, missing_values=True)  # built-ins also impute NaN and +-inf
    if policy.fitted_attributes:
        assert not policy.is_fitted(), "check_policy fits copies only"


def test_installed_plugins_pass_every_check(installed_plugin):
    checked = []
    for name in entry_point_policies():
        try:
            policy = load_entry_point(name)
        except HarnessError:  # a plugin that needs parameters cannot be built bare
            continue
        check_policy(policy)
        checked.append(name)
    assert installed_plugin in checked
    # with a parameter, too
    check_policy(load_entry_point(installed_plugin, min_words=4))


# ---- deliberately broken policies ------------------------------------------------------------
class _Good(Policy):
    """A correct trainable policy; each broken variant below breaks one rule."""

    name = "good"
    trainable = True
    features = ("dense_top1",)
    fitted_attributes = {"median": FLOAT}

    def __init__(self, shift: float = 0.0):
        self.shift = shift

    def fit(self, X, delta, groups, seed=0):
        self.median_ = float(np.median(X["dense_top1"]))
        return self

    def score(self, X, ctx):
        return self.median_ - X["dense_top1"].to_numpy(dtype=float) + self.shift


class ReadsUndeclared(_Good):
    name = "reads_undeclared"

    def score(self, X, ctx):
        return super().score(X, ctx) + X["bm25_top1"].to_numpy(dtype=float)


class ReadsByPosition(_Good):
    name = "reads_by_position"

    def score(self, X, ctx):
        return self.median_ - X.to_numpy(dtype=float)[:, 0]


class MutatesFitInput(_Good):
    name = "mutates_fit_input"

    def fit(self, X, delta, groups, seed=0):
        X["dense_top1"] = X["dense_top1"].fillna(0.0) * 2  # in place: the caller's frame changes
        return super().fit(X, delta, groups, seed)


class MutatesScoreInput(_Good):
    name = "mutates_score_input"

    def score(self, X, ctx):
        s = super().score(X, ctx)
        X.iloc[0, 0] = -1.0
        return s


class MutatesDelta(_Good):
    name = "mutates_delta"

    def fit(self, X, delta, groups, seed=0):
        delta[delta < 0] = 0.0
        return super().fit(X, delta, groups, seed)


class NanScores(_Good):
    name = "nan_scores"

    def score(self, X, ctx):
        s = super().score(X, ctx)
        s[3] = np.nan
        return s


class TooFewScores(_Good):
    name = "too_few_scores"

    def score(self, X, ctx):
        return super().score(X, ctx)[:-1]


class BatchDependent(_Good):
    name = "batch_dependent"

    def score(self, X, ctx):
        s = super().score(X, ctx)
        return s - s.mean()  # centred on the scored batch: a question's score depends on the others


class ParamNotStored(_Good):
    name = "param_not_stored"

    def __init__(self, shift: float = 0.0):
        self.offset = shift


class FitChangesParam(_Good):
    name = "fit_changes_param"

    def fit(self, X, delta, groups, seed=0):
        self.shift = float(np.mean(delta))
        return super().fit(X, delta, groups, seed)


class NumpyState(_Good):
    name = "numpy_state"

    def get_state(self):
        return {"median": np.float32(self.median_)}


class LosesState(_Good):
    name = "loses_state"

    def set_state(self, state):
        self.median_ = 0.0


class Unseeded(_Good):
    name = "unseeded"

    def fit(self, X, delta, groups, seed=0):
        super().fit(X, delta, groups, seed)
        self.median_ += float(np.random.default_rng().normal())
        return self


class Drifting(_Good):
    """Scores that change from one call to the next (a hidden counter)."""

    name = "drifting"

    def score(self, X, ctx):
        self.calls_ = getattr(self, "calls_", 0) + 1
        return super().score(X, ctx) + self.calls_


class FeaturesAsString(_Good):
    name = "features_as_string"
    features = "dense_top1"


@pytest.mark.parametrize(
    "cls,check,message",
    [
        (ReadsUndeclared, "declared_features_only", r"KeyError.*bm25_top1.*reads a column it does not declare"),
        (ReadsByPosition, "declared_features_only", r"undeclared columns.*by name, not by position"),
        (MutatesFitInput, "inputs_untouched", r"changed the frame given to fit"),
        (MutatesScoreInput, "inputs_untouched", r"changed the frame given to score"),
        (MutatesDelta, "inputs_untouched", r"changed delta given to fit"),
        (NanScores, "finite_scores", r"1 of \d+ scores are NaN or infinite \(first at row 3\)"),
        (TooFewScores, "one_score_per_row", r"returned shape \(\d+,\) for \d+ rows"),
        (BatchDependent, "row_independence", r"scoring a subset of the rows does not give those rows' scores"),
        (ParamNotStored, "get_params", r"constructor parameter 'shift' is not stored as self\.shift"),
        (FitChangesParam, "params_unchanged_by_fit", r"fit changed constructor parameter\(s\) \['shift'\]"),
        (NumpyState, "state_round_trip", r"state\['median'\]: numpy\.float32 is not JSON"),
        (LosesState, "state_round_trip", r"scores differently"),
        (Drifting, "repeatable_score", r"a second score\(\) of the same fitted policy on the same rows gives other scores"),
        (Unseeded, "deterministic_fit", r"two fits with seed 0 on the same rows score differently"),
        (FeaturesAsString, "features", r"features must be a tuple of names, got 'dense_top1'"),
    ],
)
def test_broken_policy_fails_the_right_check(cls, check, message):
    check_policy(_Good())  # the unbroken original passes
    with pytest.raises(PolicyCheckError, match=message) as err:
        check_policy(cls())
    assert err.value.check == check
    assert str(err.value).startswith(f"check_policy: policy '{cls.name}' (tests.test_check_policy.{cls.__name__}) fails check '{check}': ")
    assert isinstance(err.value, HarnessError) and isinstance(err.value, AssertionError)
    assert check in CHECKS


def test_check_policy_leaves_the_given_policy_unfitted_and_takes_a_table(planted_table):
    policy = _Good(shift=0.5)
    check_policy(policy, planted_table, seed=3)
    assert not policy.is_fitted() and policy.get_params() == {"shift": 0.5}
    # a policy reading a feature the table lacks is named with the check that found it
    with pytest.raises(PolicyCheckError, match=r"'features'.*dense_top1.*not in the check table"):
        check_policy(_Good(), planted_table.drop(columns=["feat.dense_top1"]))


def test_not_a_policy_is_refused():
    with pytest.raises(PolicyCheckError, match=r"fails check 'is_policy': dict is not a policies\.base\.Policy"):
        check_policy({"name": "x"})


def test_policies_never_import_the_layers_above_them():
    """Imports run one way: policies may use harness data/retrieval/task-level modules, never
    the protocols, the app, the tracking, the config schema or the reports."""
    import ast
    from pathlib import Path

    above = ("harness.protocols", "harness.app", "harness.tracking", "harness.config", "harness.report",
             "harness.protocols.compare", "harness.protocols.decision_table", "harness.console", "harness.__main__")
    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "policies").glob("*.py")) + sorted((root / "tests" / "plugin_example").rglob("*.py"))
    assert len(files) >= 8
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            found += [f"{path.name}: {n}" for n in names if n == "harness" or n.startswith(above)]
    assert found == []


def test_docs_worked_example_runs_and_passes_the_check(planted_table):
    import re
    from pathlib import Path

    from harness.task import RoutingTask
    from policies.base import ScoreContext

    text = (Path(__file__).resolve().parent.parent / "docs" / "policies.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    from policies.learned import RidgePolicy

    namespace: dict = {"policy": RidgePolicy(), "my_outcome_table": planted_table}
    for i, code in enumerate(blocks):  # every block runs, in order (check_policy calls included)
        exec(compile(code, f"docs/policies.md block {i}", "exec"), namespace)
    cls = namespace["BelowMedian"]
    namespace["test_below_median_keeps_the_policy_contract"]("dense_margin12")
    # the generic state of the declared attributes, and what the harness would score
    task = RoutingTask.from_table(planted_table)
    pol = cls("dense_top1").fit(task.feature_matrix(("dense_top1",)), task.delta, task.groups)
    state = pol.get_state()
    assert set(state) == {"feature", "median", "n_train"} and state["n_train"] == task.n
    s = pol.score(task.feature_matrix(("dense_top1",)), ScoreContext(qids=task.qids))
    np.testing.assert_allclose(s, np.median(task.features["dense_top1"]) - task.features["dense_top1"], rtol=0, atol=1e-15)
    with pytest.raises(HarnessError, match=r"state is for feature 'dense_top1', but this policy has feature 'bm25_top1'"):
        cls("bm25_top1").set_state(state)
    # the entry point line and every check are documented
    assert 'below_median = "my_routing_plugin:BelowMedian"' in text
    assert '[project.entry-points."rag_route_bench.policies"]' in text
    for check in CHECKS:
        assert f"| `{check}` |" in text, check


def test_readme_policy_example_passes_check_policy():
    """The policy shown in README.md ("Policies") keeps the contract it describes."""
    import re
    from pathlib import Path

    from policies import check_policy

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "class BelowMedianTop1" in b]
    assert len(blocks) == 1
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    policy = namespace["BelowMedianTop1"]()
    report = check_policy(policy, quiet=True)
    assert report.passed == CHECKS or report.passed + report.not_applicable == CHECKS
    assert not policy.is_fitted()  # check_policy works on copies


def test_check_policy_says_what_passed(capsys):
    from policies import AlwaysBase, RidgePolicy, check_policy

    report = check_policy(RidgePolicy(), missing_values=True)
    assert report.passed == CHECKS and report.not_applicable == () and report.missing_values
    line = capsys.readouterr().out.strip()
    assert line == str(report) and line.startswith("check_policy: policy 'ridge'")
    assert f"passed all {len(CHECKS)} checks" in line and all(c in line for c in CHECKS)
    fixed = check_policy(AlwaysBase(), quiet=True)  # learns nothing: no fit to repeat
    assert fixed.not_applicable == ("deterministic_fit",) and "deterministic_fit" not in fixed.passed
    assert capsys.readouterr().out == ""


def test_an_undeclared_fitted_attribute_gets_a_hint():
    import numpy as np

    from policies import PolicyCheckError, check_policy
    from policies.base import FLOAT, Policy

    class Forgetful(Policy):
        name = "forgetful"
        trainable = True
        features = ("dense_top1",)
        fitted_attributes = {"median": FLOAT}

        def fit(self, X, delta, groups, seed=0):
            self.median_ = float(np.median(X["dense_top1"]))
            self.spread_ = float(np.std(X["dense_top1"]))  # learned, but not declared
            return self

        def score(self, X, ctx):
            spread = getattr(self, "spread_", 1.0)
            return (self.median_ - X["dense_top1"].to_numpy(dtype=float)) / spread

    with pytest.raises(PolicyCheckError) as err:
        check_policy(Forgetful(), quiet=True)
    assert err.value.check == "state_round_trip"
    assert "['spread_']" in str(err.value) and 'fitted_attributes = {"spread": <codec>}' in str(err.value)
    # declared, it passes
    Forgetful.fitted_attributes = {"median": FLOAT, "spread": FLOAT}
    assert check_policy(Forgetful(), quiet=True).passed == CHECKS
