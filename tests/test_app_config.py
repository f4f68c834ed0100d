"""The config tree composes, and bad keys/types/values fail before any work, naming the key."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from harness import app
from harness.config.validation import validate
from harness.errors import ConfigError


def _compose(*overrides: str, return_hydra: bool = False):
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra)


def test_defaults_compose_to_the_documented_tree():
    cfg = _compose(return_hydra=True)
    assert cfg.dataset.name == "boolq"
    assert (cfg.arms.base, cfg.arms.extra, cfg.arms.metric) == ("keep", "hybrid", "hit@10")
    assert cfg.reranker.name == "maxsim"
    assert cfg.policy.name == "ridge"
    assert list(cfg.protocol.run) == ["threshold", "budget", "gain"]
    assert cfg.cost.c == 0.02
    assert list(cfg.budget.grid) == [0.10, 0.25, 0.50, 0.75, 0.90]
    assert cfg.tracking.uri is None and cfg.seed == 0
    params = cfg.hydra.sweeper.params  # the default sweep (experiment/default.yaml)
    policies = params.policy.split(",")
    for name in ("always_keep", "always_extra", "random", "oracle", "ridge", "logistic", "gbm", "qpp_ridge"):
        assert name in policies
    assert [float(c) for c in params["cost.c"].split(",")] == [0.0, 0.01, 0.02, 0.05]
    assert params.protocol == "threshold_budget"
    assert "route_bench" in cfg.hydra.callbacks
    for name in policies:  # every swept policy has a config file
        assert (app.CONF_DIR / "policy" / f"{name}.yaml").is_file(), name


def test_tracking_server_choice():
    assert _compose("tracking=server").tracking.uri == "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    "override, key",
    [("cost.cc=1", "cost.cc"), ("cost.c=abc", "cost.c"), ("budget.n_splits=two", "budget.n_splits"),
     ("tracking.urri=x", "tracking.urri"), ("protocol.n_boots=5", "protocol.n_boots"), ("seed=x", "seed")],
)
def test_typo_or_wrong_type_fails_at_composition_naming_the_key(override, key):
    with pytest.raises(ConfigCompositionException) as err:
        _compose(override)
    text = str(err.value) + str(err.value.__cause__)
    assert key.split(".")[-1] in text and f"full_key: {key}" in text


@pytest.mark.parametrize(
    "override, key",
    [("protocol.run=[threshold,budgte]", "protocol.run[1]"), ("budget.grid=[0.1,1.5]", "budget.grid[1]"),
     ("cost.c=-0.1", "cost.c"), ("protocol.dev_frac=1.0", "protocol.dev_frac")],
)
def test_value_checks_name_the_key(override, key):
    cfg = _compose(override)
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.key == key


def test_cli_typo_exits_nonzero_before_any_work(tmp_path, cli):
    code, out, err = cli(["-m", "dataset=synthetic", "cost.cc=1"])
    assert code != 0
    assert "cost.cc" in err + out
    assert not (tmp_path / "mlruns").exists()  # nothing was tracked


def test_plain_config_excludes_hydra_and_resolves():
    cfg = _compose("dataset=synthetic", return_hydra=True)
    plain = app.to_plain(cfg)
    assert "hydra" not in plain and plain["dataset"]["loader"] == "synthetic"
    assert OmegaConf.create(plain).cost.c == 0.02


@pytest.mark.parametrize("choice", ["default", "fine", "strict"])
def test_every_budget_choice_composes_and_validates(choice):
    cfg = _compose(f"budget={choice}")
    validate(cfg)
    grid = list(cfg.budget.grid)
    assert cfg.budget.name == choice and grid == sorted(grid) and all(0 < b < 1 for b in grid)
    assert 0 < cfg.budget.dkw_delta < 1 and cfg.budget.tol >= 0


@pytest.mark.parametrize(
    "override, key",
    [("protocol.alpha=nan", "protocol.alpha"), ("protocol.power=1", "protocol.power"),
     ("protocol.repeats=0", "protocol.repeats"), ("protocol.nested_folds=1", "protocol.nested_folds"),
     ("budget.calibration=foo", "budget.calibration"), ("budget.cal_folds=1", "budget.cal_folds"),
     ("protocol.min_discordant=0", "protocol.min_discordant"), ("protocol.gain_threshold=inf", "protocol.gain_threshold"),
     ("budget.tol=nan", "budget.tol"), ("protocol.equivalence_margin=0", "protocol.equivalence_margin"),
     ("protocol.alpha=0.5", "protocol.alpha"), ("protocol.equivalence_fraction=0", "protocol.equivalence_fraction"),
     ("protocol.equivalence_fraction=1.5", "protocol.equivalence_fraction"),
     ("protocol.verdict_frontier=exact", "protocol.verdict_frontier")],
)
def test_single_run_bad_value_is_one_line_and_exit_2(tmp_path, override, key, cli):
    """The CLI entry point in-process (tests/test_bad_inputs.py runs a few such cases as real
    processes, to show that no traceback reaches the terminal)."""
    code, _, err = cli(["dataset=synthetic", override, f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"])
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"config key '{key}'" in errors[0]
    assert "Traceback" not in err
