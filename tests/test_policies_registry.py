"""Registry: built-in configs, make_policy, entry-point plugins, the listing, the docs example."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError, FeatureError
from harness.task import RoutingTask
from policies.base import Policy, ScoreContext
from policies.learned import GBMPolicy, LogisticPolicy, QPPRouter, RidgePolicy
from policies.registry import (
    ENTRY_POINT_GROUP,
    builtin_policy_configs,
    default_conf_dir,
    entry_point_policies,
    format_table,
    list_policies,
    load_entry_point,
    main,
    make_policy,
)

REPO = Path(__file__).resolve().parent.parent
BUILTINS = ("always_keep", "always_extra", "random", "oracle", "ridge", "logistic", "gbm", "qpp_ridge")


def test_every_builtin_has_a_config_with_name_target_and_builds():
    configs = builtin_policy_configs(default_conf_dir())
    assert set(BUILTINS) <= set(configs)
    assert any(k.startswith("signal_") for k in configs)
    assert "plugin" not in configs  # the loader is not itself a policy
    for stem, cfg in configs.items():
        assert cfg["name"] == stem
        pol = make_policy(cfg)
        assert isinstance(pol, Policy) and pol.name == stem
    # conf_dir may also be the policy folder itself
    assert builtin_policy_configs(default_conf_dir() / "policy").keys() == configs.keys()


def test_make_policy_passes_params_and_resolves_features():
    pol = make_policy({"name": "r2", "_target_": "policies.learned.RidgePolicy", "features": "baseline+bm25", "alpha": 5})
    assert isinstance(pol, RidgePolicy) and pol.name == "r2" and pol.alpha == 5.0
    assert pol.features[-2:] == ("bm25_top1", "bm25_margin12") and len(pol.features) == 8
    pol = make_policy({"name": "l", "_target_": "policies.learned.LogisticPolicy", "features": ["dense_top1", "bm25_top1"]})
    assert isinstance(pol, LogisticPolicy) and pol.features == ("dense_top1", "bm25_top1")
    assert isinstance(make_policy(builtin_policy_configs()["qpp_ridge"]), QPPRouter)
    assert isinstance(make_policy(builtin_policy_configs()["gbm"]), GBMPolicy)


def test_make_policy_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"policy\.alhpa"):
        make_policy({"name": "ridge", "_target_": "policies.learned.RidgePolicy", "alhpa": 1})
    with pytest.raises(ConfigError, match=r"policy\.features"):  # constants read no features
        make_policy({"name": "k", "_target_": "policies.builtin.AlwaysBase", "features": "baseline"})
    with pytest.raises(ConfigError, match=r"policy\._target_"):
        make_policy({"name": "x"})
    with pytest.raises(ConfigError, match=r"policy\._target_"):
        make_policy({"name": "x", "_target_": "policies.nowhere.Nothing"})
    with pytest.raises(ConfigError, match=r"policy\.feature"):
        make_policy({"name": "s", "_target_": "policies.signals.SingleSignalPolicy"})
    with pytest.raises(ConfigError, match=r"policy\.alpha"):  # raised inside the constructor
        make_policy({"name": "ridge", "_target_": "policies.learned.RidgePolicy", "alpha": -1})
    with pytest.raises(ConfigError, match=r"policy\._target_.*not a Policy"):
        make_policy({"name": "x", "_target_": "collections.OrderedDict"})


def test_plugin_config_requires_plugin_key():
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(default_conf_dir() / "policy" / "plugin.yaml")
    with pytest.raises(ConfigError, match=r"policy\.plugin"):
        make_policy(cfg)
    cfg.plugin = "surely_not_installed_policy"
    with pytest.raises(ConfigError, match=r"policy\.plugin.*surely_not_installed_policy"):
        make_policy(cfg)


def test_main_prints_the_table(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header == ["name", "source", "target", "trainable", "features"]
    for name in BUILTINS:
        assert re.search(rf"^{name}\s+builtin\s", out, flags=re.M), name
    rows = list_policies()
    ridge = next(r for r in rows if r["name"] == "ridge")
    assert ridge["trainable"] == "True" and ridge["features"].startswith("dense_top1,")
    assert format_table(rows) in out


def test_installed_plugin_is_listed_built_and_scores(installed_plugin, planted_table):
    eps = entry_point_policies()
    assert installed_plugin in eps and eps[installed_plugin].group == ENTRY_POINT_GROUP
    row = next(r for r in list_policies() if r["name"] == installed_plugin)
    assert row["source"] == "entry-point" and row["features"] == "q_len_words"
    assert row["target"] == "route_bench_example_plugin:LongQuestionPolicy"

    pol = make_policy({"_target_": "policies.registry.load_entry_point", "plugin": installed_plugin, "min_words": 3})
    assert pol.name == installed_plugin and pol.min_words == 3
    # the plugin.yaml form: name interpolated from plugin
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(default_conf_dir() / "policy" / "plugin.yaml")
    cfg.plugin = installed_plugin
    assert make_policy(cfg).name == installed_plugin
    with pytest.raises(ConfigError, match=r"policy\.max_words"):
        load_entry_point(installed_plugin, max_words=3)

    task = RoutingTask.from_table(planted_table)
    X = task.feature_matrix(pol.features)
    s = pol.score(X, ScoreContext(qids=task.qids))
    np.testing.assert_array_equal(s, planted_table.sort_values("qid")["feat.q_len_words"].to_numpy() - 3)
    # the harness path: a table without the plugin's feature is a FeatureError naming both
    with pytest.raises(FeatureError, match=r"q_len_words.*no_query_feats\.parquet"):
        RoutingTask.from_table(planted_table.drop(columns=["feat.q_len_words"]), source="no_query_feats.parquet").feature_matrix(pol.features)


def test_writing_a_policy_doc_example_runs(planted_table):
    text = (REPO / "docs" / "writing_a_policy.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "writing_a_policy.md", "exec"), namespace)
    cls = namespace["BelowMedianTop1"]
    task = RoutingTask.from_table(planted_table)
    even = np.array([int(g[3:]) % 2 == 0 for g in task.groups])
    dev, test = task.take(np.flatnonzero(even)), task.take(np.flatnonzero(~even))
    pol = cls().fit(dev.feature_matrix(cls.features), dev.delta, dev.groups)
    X = test.feature_matrix(cls.features)
    s = pol.score(X, ScoreContext(qids=test.qids))
    expected = np.median(dev.features["dense_top1"]) - test.features["dense_top1"].to_numpy()
    np.testing.assert_allclose(s, expected, rtol=0, atol=1e-15)
    rebuilt = cls()
    rebuilt.set_state(pol.get_state())
    np.testing.assert_array_equal(rebuilt.score(X, ScoreContext(qids=test.qids)), s)
    # and it routes: rescues score higher than harms on average
    assert s[test.delta == 1].mean() > s[test.delta == -1].mean()
    # the tutorial's contract check, as the page shows it, passes (NaN and +-inf included)
    from policies import check_policy
    from policies.checks import CHECKS

    assert "check_policy(BelowMedianTop1(), missing_values=True)" in text
    assert check_policy(cls(), missing_values=True, quiet=True).passed == CHECKS


@pytest.mark.slow
def test_installed_plugin_runs_in_a_sweep_job(installed_plugin, tmp_path):
    """The third-party policy runs through the real CLI sweep, no harness file touched."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [
        sys.executable, "-m", "harness", "-m", "dataset=synthetic", "experiment=none",
        "protocol=threshold", "policy=plugin", f"policy.plugin={installed_plugin}",
        "+policy.min_words=2", f"tracking.uri={uri}",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    runs = [
        r
        for e in client.search_experiments()
        for r in client.search_runs([e.experiment_id], filter_string="tags.`route_bench.role` = 'job'")
    ]
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["policy.plugin"] == installed_plugin
    assert 0.0 <= run.data.metrics["heldout/extra_share"] <= 1.0


@pytest.fixture
def clean_policy_store():
    """Forget the ConfigStore nodes a test registers in group ``policy`` (the store is global)."""
    from hydra.core.config_store import ConfigStore

    before = dict(ConfigStore.instance().repo.get("policy", {}))
    yield
    ConfigStore.instance().repo["policy"] = before


def test_entry_points_are_hydra_options_and_a_yaml_name_wins(installed_plugin, tmp_path, clean_policy_store, capsys):
    import warnings

    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra

    import harness.config  # noqa: F401  (registers the schema the defaults list names)
    from policies.registry import PolicyNameClash, entry_point_config, register_policy_configs

    with warnings.catch_warnings():
        warnings.simplefilter("error", PolicyNameClash)  # no clash with the repository's configs
        assert installed_plugin in register_policy_configs()
    node = entry_point_config(installed_plugin)
    assert node == {"name": installed_plugin, "_target_": "policies.registry.load_entry_point", "plugin": installed_plugin, "min_words": 0}
    assert f"{installed_plugin}.yaml" in ConfigStore.instance().repo["policy"]

    # composed like a built-in: policy=<entry point>, its parameter without "+"
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(default_conf_dir()), version_base=None):
        cfg = compose("config", overrides=[f"policy={installed_plugin}", "policy.min_words=3", "dataset=synthetic"])
    GlobalHydra.instance().clear()
    pol = make_policy(cfg.policy)
    assert type(pol).__name__ == "LongQuestionPolicy" and pol.name == installed_plugin and pol.min_words == 3

    # a YAML file of the same name wins; the clash is reported, the plugin stays reachable
    conf = tmp_path / "conf"
    shutil.copytree(default_conf_dir() / "policy", conf / "policy")
    (conf / "policy" / f"{installed_plugin}.yaml").write_text(
        f"name: {installed_plugin}\n_target_: policies.builtin.AlwaysBase\n", encoding="utf-8"
    )
    with pytest.warns(PolicyNameClash, match=rf"entry point '{installed_plugin}'.*{installed_plugin}\.yaml.*policy=plugin policy\.plugin={installed_plugin}"):
        assert installed_plugin not in register_policy_configs(conf)
    row = next(r for r in list_policies(conf) if r["name"] == installed_plugin and r["source"] != "builtin")
    assert row["source"] == "entry-point(shadowed)"
    assert main(["--conf-dir", str(conf)]) == 0
    out = capsys.readouterr().out
    assert f"entry point '{installed_plugin}' is shadowed by {installed_plugin}.yaml" in out
    assert main([]) == 0
    assert f"policy={installed_plugin}  (or policy=plugin policy.plugin={installed_plugin})" in capsys.readouterr().out


@pytest.mark.slow
def test_builtin_and_plugin_in_one_sweep(installed_plugin, tmp_path):
    """policy=ridge,<entry point> in one real multirun: two FINISHED runs."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [
        sys.executable, "-m", "harness", "-m", f"policy=ridge,{installed_plugin}", "dataset=synthetic",
        "experiment=none", "protocol=threshold", f"tracking.uri={uri}",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    client = MlflowClient(tracking_uri=uri)
    runs = [
        r
        for e in client.search_experiments()
        for r in client.search_runs([e.experiment_id], filter_string="tags.`route_bench.role` = 'job'")
    ]
    if proc.returncode != 0:  # say why: the failed jobs' error.txt
        errors = []
        for r in runs:
            try:
                errors.append(Path(client.download_artifacts(r.info.run_id, "error.txt", str(tmp_path))).read_text()[-1500:])
            except Exception as exc:  # pragma: no cover - diagnostics only
                errors.append(f"(no error.txt: {exc})")
        pytest.fail(proc.stdout[-1500:] + proc.stderr[-1500:] + "\n".join(errors))
    assert sorted(r.data.params["policy.name"] for r in runs) == sorted(["ridge", installed_plugin])
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    plugin_run = next(r for r in runs if r.data.params["policy.name"] == installed_plugin)
    assert plugin_run.data.params["policy.plugin"] == installed_plugin
    assert plugin_run.data.params["policy.min_words"] == "0"
