"""Numbers and sweeps that meant nothing are refused before any work (issue 43's categories).

Numbers: every configured number finite and inside a documented range (docs/sweeps.md,
"Numbers"): ``cost.c`` in [0, 1000], ``protocol.gain_threshold`` within +-1e6, the synthetic
table's signal within +-100, regularisation strengths in [1e-12, 1e12], any other number of
the job config (plugin parameters too) at most 1e12 in magnitude; the schema's switches only
true or false. Sweeps: a sweep of no job, a value given twice once parsed (``cost.c=0,0.0``,
``seed=0,00``), a bad value anywhere among the swept ones (``experiment=smoke,nonexistent``,
``policy=glob(*)`` reaching the ``plugin`` entry) are one line, exit 2, nothing tracked.
Most cases run the validation functions in-process; a few go through the CLI entry.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from omegaconf import OmegaConf

from harness.config.compose import compose_config
from harness.config.validation import validate
from harness.console import sweep_jobs
from harness.errors import ConfigError
from tests.helpers.bad_inputs import _run

SYN = "dataset=synthetic"


def _refused(*overrides: str) -> ConfigError:
    cfg = compose_config([SYN, *overrides])
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    return info.value


# ---- numbers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("override, key, text", [
    ("cost.c=1e308", "cost.c", "in [0, 1000]"),
    ("cost.c=1e200", "cost.c", "in [0, 1000]"),
    ("cost.c=1000.5", "cost.c", "in [0, 1000]"),
    ("protocol.gain_threshold=1e308", "protocol.gain_threshold", "[-1e+06, 1e+06]"),
    ("protocol.gain_threshold=-2e6", "protocol.gain_threshold", "[-1e+06, 1e+06]"),
    ("dataset.signal=1e308", "dataset.signal", "[-100, 100]"),
    ("dataset.signal=-101", "dataset.signal", "[-100, 100]"),
    ("policy.alpha=1e308", "policy.alpha", "[1e-12, 1e+12]"),
    ("policy.alpha=1e-320", "policy.alpha", "[1e-12, 1e+12]"),
])
def test_a_number_out_of_its_range_is_refused_naming_the_key(override, key, text):
    err = _refused(override)
    assert err.key == key and text in str(err), str(err)


@pytest.mark.parametrize("overrides, key", [
    (["policy=logistic", "policy.C=1e308"], "policy.C"),
    (["policy=gbm", "policy.learning_rate=1e3"], "policy.learning_rate"),
    (["policy=gbm", "policy.lambda_l2=1e300"], "policy.lambda_l2"),
    (["executor=ray", "executor.num_gpus=1e308"], "executor.num_gpus"),
    (["executor=ray", "executor.max_retries=100000000"], "executor.max_retries"),
    (["executor=ray", "executor.num_cpus=1e9"], "executor.num_cpus"),
])
def test_policy_and_executor_numbers_are_bounded(overrides, key):
    assert _refused(*overrides).key == key


def test_the_edges_of_the_ranges_are_accepted():
    for overrides in (["cost.c=1000"], ["cost.c=0"], ["protocol.gain_threshold=-1e6"], ["dataset.signal=-100"],
                      ["policy.alpha=1e12"]):
        validate(compose_config([SYN, *overrides]))


def test_the_net_bounds_every_other_number_by_its_full_key():
    """A number no range check knows (a plugin's parameter, a free-form group's option)."""
    from harness.config.values import _check_numbers

    for value in (1e300, float("inf"), float("nan"), -1e13):
        cfg = OmegaConf.create({"policy": {"name": "p", "params": [1, {"weight": value}]}, "hydra": {"x": 1e300}})
        with pytest.raises(ConfigError) as info:
            _check_numbers(cfg)
        assert info.value.key == "policy.params[1].weight" and "at most 1e+12" in str(info.value)
    _check_numbers(OmegaConf.create({"seed": 2**32 - 1, "a": [1e12, -1e12, "1e300"], "hydra": {"x": 1e300}}))


def test_a_derived_cost_above_the_bound_names_the_price():
    from harness.app import resolve_cost

    frame = pd.DataFrame({"qid": ["q1", "q2"], "hybrid.marginal.total_ms": [5e6, 5e6]})
    task = SimpleNamespace(base_arm="keep", extra_arm="hybrid", qids=["q1", "q2"])
    plain = {"cost": {"c": None, "unit": "ms", "price": 1.0}}
    with pytest.raises(ConfigError) as info:
        resolve_cost(plain, SimpleNamespace(frame=frame, key="t"), task)
    assert info.value.key == "cost.price" and "1000" in str(info.value)
    plain["cost"]["price"] = 1e-4
    assert resolve_cost(plain, SimpleNamespace(frame=frame, key="t"), task)["cost/derived_c"] == pytest.approx(500.0)


# ---- booleans --------------------------------------------------------------------------------------
@pytest.mark.parametrize("override, key", [
    ("verbose=2", "verbose"), ("verbose=1", "verbose"), ("tracking.log_plots=2", "tracking.log_plots"),
    ("tracking.skip_finished=yes", "tracking.skip_finished"), ("tracking.log_decisions=0", "tracking.log_decisions"),
])
def test_a_switch_takes_only_true_or_false(override, key):
    err = _refused(override)
    assert err.key == key and "must be true or false" in str(err)


def test_true_and_false_still_pass():
    cfg = compose_config([SYN, "verbose=true", "tracking.log_plots=false", "tracking.skip_finished=True"])
    validate(cfg)
    assert cfg.verbose is True and cfg.tracking.log_plots is False


# ---- sweeps, expanded in-process ----------------------------------------------------------------------
@pytest.mark.parametrize("override, key", [
    ("seed=range(0,0)", "seed"), ("seed=range(5,1)", "seed"), ("cost.c=range(0.5,0.1,0.1)", "cost.c"),
])
def test_a_sweep_of_no_job_is_refused(override, key):
    with pytest.raises(ConfigError) as info:
        sweep_jobs([override, "policy=ridge,logistic"], None)
    assert info.value.key == key and "0 jobs" in str(info.value)


@pytest.mark.parametrize("override, key, twice", [
    ("cost.c=0,0.0", "cost.c", "'0.0'"), ("cost.c=0.02,2e-2", "cost.c", "'0.02'"), ("seed=1,1.0", "seed", "'1.0'"),
    ("budget.grid=[0.5],[5e-1]", "budget.grid", "'[0.5]'"), ("verbose=true,True", "verbose", "'True'"),
])
def test_values_equal_once_parsed_count_as_given_twice(override, key, twice):
    """Parsed numbers by value (Hydra's text of each, as the existing value-twice message)."""
    with pytest.raises(ConfigError) as info:
        sweep_jobs([override], {"policy": "ridge,logistic"})
    assert info.value.key == key and f"sweeps the value {twice} twice" in str(info.value), str(info.value)


def test_distinct_values_still_sweep():
    assert len(sweep_jobs(["cost.c=0,0.02", "seed=0,1", "verbose=true,false"], None)) == 8


def test_every_swept_value_is_tried_before_the_other_jobs():
    """A bad value is found after a few jobs (one per value), not after every job."""
    from harness.runner.sweep_check import _first_of_each_value

    jobs = sweep_jobs(["policy=ridge,logistic,always_keep", "seed=0,1,2,3", "experiment=smoke,nonexistent"], None)
    first = _first_of_each_value(jobs)
    assert len(jobs) == 24 and len(first) == 7  # at most one job per value: 3 + 4 + 2 - 2 shared by the first
    assert {item for job in first for item in job} == {item for job in jobs for item in job}
    assert first[0] == jobs[0] and any("experiment=nonexistent" in job for job in first)


# ---- the CLI: one line, exit 2, no run in the store ---------------------------------------------------
def _runs(folder: Path) -> int:
    """Every run of every store under ``folder`` (RUNNING ones too)."""
    n = 0
    for db in folder.rglob("*.db"):
        with sqlite3.connect(db) as con:
            try:
                n += con.execute("select count(*) from runs").fetchone()[0]
            except sqlite3.DatabaseError:
                pass
    return n


CLI = [
    (["-m", SYN, "experiment=none", "seed=range(3,3)"], "'seed': sweeps no value"),
    (["-m", SYN, "experiment=none", "policy=glob(nomatch*)"], "'policy': sweeps no value (policy=glob(nomatch*)"),
    (["-m", SYN, "experiment=none", "seed=0,00"], "'seed': sweeps the value '00' twice"),
    (["-m", SYN, "experiment=none", "cost.c=0.02,0.020"], "'cost.c': sweeps the value '0.02' twice"),
    (["-m", SYN, "experiment=none", "tracking.log_plots=true,2"], "'tracking.log_plots': bad sweep value '2'"),
    (["-m", SYN, "experiment=smoke,nonexistent"], "'experiment': bad sweep value 'nonexistent'"),
    (["-m", SYN, "experiment=none", "policy=glob(*)"], "'policy': bad sweep value 'plugin'"),
    ([SYN, "cost.c=1e308"], "'cost.c': must be a finite number in [0, 1000]"),
    ([SYN, "verbose=2"], "'verbose': must be true or false"),
]


@pytest.mark.parametrize("argv, needle", CLI, ids=[" ".join(c[0][1:]) for c in CLI])
def test_cli_refuses_in_one_line_before_any_run(argv, needle, workdir, capsys):
    _data, run, _cache = workdir
    start = time.monotonic()
    code, out, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, err, out[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: ConfigError: config key ") and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert _runs(run) == 0 and not (run / "mlruns").exists()
    assert time.monotonic() - start < 60
