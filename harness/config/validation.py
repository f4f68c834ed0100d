"""``validate``: every range and name check of a composed job config, in one fixed order (the
first problem found is the one reported), before any work."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from omegaconf import OmegaConf

from harness.config.arm_checks import _check_arms
from harness.config.pipeline import check_pipeline
from harness.config.cost import _check_cost, _check_cost_source
from harness.config.limits import (MAX_BOOTSTRAP, MAX_FOLDS, MAX_GAIN_THRESHOLD, MAX_GRID, MAX_MIN_DISCORDANT,
                                   MAX_CALL_SECONDS, MAX_REPEATS, MAX_RETRIES, MAX_SEED)
from harness.config.schema import BOOLEAN_KEYS, CALIBRATIONS, VERDICT_FRONTIERS, RootConfig
from harness.config.store import check_store_dir, tracking_uri_problem
from harness.config.values import _check_booleans, _check_missing, _check_numbers, _in_range, _is_number
from harness.data import check_dataset_config
from harness.errors import ConfigError, did_you_mean
from harness.executor import settings_of as executor_settings
from harness.stats import MIN_BOOTSTRAP, check_bootstrap_size
from policies.registry import make_policy


def validate(cfg: Any) -> None:
    """Every range and name check of a composed job config, before any work; raises ConfigError
    naming the key (with "did you mean" hints for names). The one place these checks live: the
    single-run app, ``table build``, a sweep's start and each sweep job call it."""
    _check_top_keys(cfg)
    _check_missing(cfg)
    _in_range("seed", cfg.seed, 0, MAX_SEED, integer=True)
    _check_booleans(cfg, BOOLEAN_KEYS)
    _check_machine(cfg)
    p, b = cfg.protocol, cfg.budget
    _check_protocol_run(cfg, p)
    _check_protocol_values(p)
    _check_cost(cfg.cost)
    _check_budget(b)
    _check_tracking(cfg.tracking)
    dataset = _check_dataset(cfg.dataset, p.n_boot)
    synthetic = dataset.get("loader") == "synthetic"
    check_pipeline(cfg.get("pipeline"), cfg.arms, dataset.get("loader"))  # before the arms keys it sets
    if dataset.get("loader") == "outcomes":  # the file is the table: its columns are the arms
        _check_file_arms(dataset, cfg.arms)
    else:
        _check_arms(cfg.arms, synthetic=synthetic)
    _check_reranker(cfg.reranker, synthetic)
    _check_cost_source(cfg.cost, cfg.arms, synthetic=synthetic)
    _check_policy(cfg.policy)
    _check_limits(cfg)
    _check_numbers(cfg)  # the net under the ranges above: any other number finite and bounded


def _check_file_arms(dataset: Any, arms: Any) -> None:
    """``dataset=outcomes``: no run file or block joins a table read whole, and the file has the
    routed column of both arms (the whole file is checked now, before any work)."""
    from harness.data.outcome_table import check_pair

    for key in ("runs", "blocks"):
        if arms.get(key):
            raise ConfigError(f"arms.{key}", "an outcome table read from a file (dataset=outcomes) is the whole table; "
                                             "put every arm's columns in the file")
    base, extra = str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))
    if base == extra:
        raise ConfigError("arms.extra", f"must differ from arms.base (both are {base!r}): the task compares two arms")
    check_pair(dataset.get("path"), base, extra, str(arms.get("metric", "hit@10")))


def _check_top_keys(cfg: Any) -> None:
    """No top-level key the schema lacks (the Hydra node aside)."""
    known_top = [f.name for f in fields(RootConfig)]
    for key in cfg.keys():
        if key != "hydra" and key not in known_top:
            raise ConfigError(str(key), f"unknown top-level key{did_you_mean(key, known_top)}; known: {', '.join(known_top)}")


def _check_machine(cfg: Any) -> None:
    """Where the job computes: a device this machine has, executor settings that can be used."""
    from harness.retrieval.precision import resolve_device

    resolve_device(cfg.device, "device")  # a device this machine lacks: one line, before any work
    executor_settings(OmegaConf.to_container(cfg.executor, resolve=True) if "executor" in cfg else None)


def _check_limits(cfg: Any) -> None:
    """``limits.fit_s`` / ``limits.score_s``: null or seconds in (0, MAX_CALL_SECONDS]."""
    limits = cfg.get("limits") or {}
    for key in ("fit_s", "score_s"):
        value = limits.get(key)
        if value is not None:
            _in_range(f"limits.{key}", value, 0, MAX_CALL_SECONDS, low_open=True)


def _check_protocol_run(cfg: Any, p: Any) -> None:
    """``protocol.run`` names known protocols, each once, at least one; their settings are theirs."""
    run = list(p.run)
    from harness.protocols.registry import make_protocol, settings_of

    settings = dict(p.settings or {})
    for i, name in enumerate(run):  # built-ins and installed plugins (did-you-mean on a typo)
        protocol = make_protocol(str(name), f"protocol.run[{i}]")
        settings_of(protocol, settings.get(name))  # its typed settings, checked under their keys
        protocol.check(cfg)  # what else it needs of the job (e.g. an answer pair)
    if len(set(run)) != len(run):
        raise ConfigError("protocol.run", f"names a protocol twice: {run}")
    for name in settings:
        if name not in run:
            raise ConfigError(f"protocol.settings.{name}", f"settings of a protocol that protocol.run does not list ({run})")
    if not run:
        raise ConfigError("protocol.run", "is empty; name at least one protocol")


def _check_protocol_values(p: Any) -> None:
    """The protocols' numbers (splits, folds, resamples, levels, margins) and the verdict frontier."""
    _in_range("protocol.dev_frac", p.dev_frac, 0, 1, low_open=True, high_open=True)
    _in_range("protocol.n_folds", p.n_folds, 2, MAX_FOLDS, integer=True)
    if not (_is_number(p.n_boot) and p.n_boot >= MIN_BOOTSTRAP):
        raise ConfigError("protocol.n_boot", f"docs/metrics.md §5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {p.n_boot}")
    _in_range("protocol.n_boot", p.n_boot, MIN_BOOTSTRAP, MAX_BOOTSTRAP, integer=True)
    _in_range("protocol.repeats", p.repeats, 1, MAX_REPEATS, integer=True)
    if p.nested_folds != 0:
        _in_range("protocol.nested_folds", p.nested_folds, 2, MAX_FOLDS, integer=True)
    if p.gain_threshold is not None and not (math.isfinite(p.gain_threshold) and abs(p.gain_threshold) <= MAX_GAIN_THRESHOLD):
        raise ConfigError("protocol.gain_threshold", f"must be a finite number in [-{MAX_GAIN_THRESHOLD:g}, "
                                                     f"{MAX_GAIN_THRESHOLD:g}] or null, got {p.gain_threshold}")
    _in_range("protocol.min_discordant", p.min_discordant, 1, MAX_MIN_DISCORDANT, integer=True)
    _in_range("protocol.min_heldout", p.min_heldout, 1, MAX_MIN_DISCORDANT, integer=True)
    for key in ("alpha", "power"):
        _in_range(f"protocol.{key}", getattr(p, key), 0, 1, low_open=True, high_open=True)
    _in_range("protocol.alpha", p.alpha, 0, 0.5, low_open=True, high_open=True)  # two one-sided tests at alpha
    _in_range("protocol.equivalence_margin", p.equivalence_margin, 0, 1, low_open=True)
    _in_range("protocol.equivalence_fraction", p.equivalence_fraction, 0, 1, low_open=True)
    if p.verdict_frontier not in VERDICT_FRONTIERS:
        raise ConfigError("protocol.verdict_frontier", f"unknown {p.verdict_frontier!r}"
                          f"{did_you_mean(p.verdict_frontier, VERDICT_FRONTIERS)}; choose from {VERDICT_FRONTIERS}")


def _check_budget(b: Any) -> None:
    """Protocol B's calibration, budget grid (each budget once, in (0, 1]) and tolerances."""
    if b.calibration not in CALIBRATIONS:
        raise ConfigError("budget.calibration", f"unknown {b.calibration!r}{did_you_mean(b.calibration, CALIBRATIONS)}; choose from {CALIBRATIONS}")
    _in_range("budget.cal_folds", b.cal_folds, 2, MAX_FOLDS, integer=True)
    grid = list(b.grid)
    if not grid:
        raise ConfigError("budget.grid", "is empty; give at least one budget in (0, 1], e.g. budget.grid=[0.25]")
    if len(grid) > MAX_GRID:
        raise ConfigError("budget.grid", f"has {len(grid)} budgets; at most {MAX_GRID}")
    for i, rho in enumerate(grid):
        _in_range(f"budget.grid[{i}]", rho, 0, 1, low_open=True)
        if rho in grid[:i]:
            raise ConfigError(f"budget.grid[{i}]", f"budget {rho} appears twice")
    _in_range("budget.dkw_delta", b.dkw_delta, 0, 1, low_open=True, high_open=True)
    _in_range("budget.tol", b.tol, 0, 1, high_open=True)  # a share of the questions, like the budgets
    _in_range("budget.n_splits", b.n_splits, 1, MAX_REPEATS, integer=True)
    from harness.protocols.calibration_size import check_cal_sizes

    check_cal_sizes(b.cal_sizes)


def _check_tracking(tracking: Any) -> None:
    """Store retries, non-empty names, a tracking URI MLflow can open, a store folder that can be made."""
    _in_range("tracking.retries", tracking.retries, 1, MAX_RETRIES, integer=True)
    if not str(tracking.store_dir).strip():
        raise ConfigError("tracking.store_dir", "is empty; name a folder (default: mlruns)")
    if tracking.experiment is not None and not str(tracking.experiment).strip():
        raise ConfigError("tracking.experiment", "is empty; name the MLflow experiment, or null for "
                                                 "<dataset>/<base>-vs-<extra>")
    if tracking.uri is not None and not str(tracking.uri).strip():
        raise ConfigError("tracking.uri", "is empty; give a tracking URI or null")
    if tracking.uri is not None and tracking_uri_problem(str(tracking.uri)):
        raise ConfigError("tracking.uri", str(tracking_uri_problem(str(tracking.uri))))
    check_store_dir(tracking)


def _check_dataset(dataset_cfg: Any, n_boot: Any) -> Any:
    """The dataset config, checked by its loader; the synthetic table's documents are known
    before it is built, so the bootstrap's size is checked against them now. Returns it checked."""
    if "name" not in dataset_cfg:
        raise ConfigError("dataset.name", "missing (each dataset config names itself)")
    dataset = check_dataset_config(dataset_cfg)
    if dataset.get("loader") == "synthetic":  # its documents are known before the table is built
        check_bootstrap_size(n_boot, int(dataset.get("n_docs") or 60), "dataset.n_docs of the synthetic table")
    return dataset


def _check_reranker(reranker: Any, synthetic: bool) -> None:
    """The reranker settings; the synthetic table reranks nothing, so any setting is refused
    there (it would be ignored yet logged)."""
    from harness.retrieval.settings import check_reranker, refuse_reranker_on_synthetic

    if not synthetic:
        check_reranker(reranker)
    else:  # the synthetic table reranks nothing: a reranker setting would be ignored yet logged
        refuse_reranker_on_synthetic(reranker)


def _check_policy(policy: Any) -> None:
    """The policy config names itself and can be made."""
    if "name" not in policy:
        raise ConfigError("policy.name", "missing (each policy config names itself)")
    make_policy(policy)  # a bad _target_, plugin or parameter is named before the store is opened

