"""The executor's settings, the local executor, and what must not depend on the executor (the
config hash, the sweep id), and what the cluster launcher hands its jobs; the real cluster is in
tests/test_ray_cluster.py."""

from __future__ import annotations

import pickle

import pytest

from harness.errors import ConfigError
from harness.executor import (LocalExecutor, RayExecutor, local_threads, make_executor, pool_threads, settings_of,
                              use_threads)


def test_settings_default_to_this_process_and_auto_cpus_are_the_torch_threads():
    assert isinstance(make_executor(None), LocalExecutor) and isinstance(make_executor({"name": "local"}), LocalExecutor)
    auto = settings_of({"name": "ray"})
    assert (auto.address, auto.num_cpus, auto.num_gpus, auto.max_retries) == ("auto", "auto", 0.0, 3)
    assert auto.task_threads() == local_threads() >= 1
    assert settings_of({"name": "ray", "num_cpus": 3}).task_threads() == 3
    assert settings_of({"name": "ray", "num_cpus": 0.5}).task_threads() == 1  # a fraction of a CPU: one thread
    assert isinstance(make_executor({"name": "ray"}), RayExecutor)  # no connection until a piece is run


@pytest.mark.parametrize("cfg, key", [
    ({"name": "dask"}, "executor.name"),
    ({"name": "ray", "num_cpus": 0}, "executor.num_cpus"),
    ({"name": "ray", "num_cpus": float("nan")}, "executor.num_cpus"),
    ({"name": "ray", "num_cpus": True}, "executor.num_cpus"),
    ({"name": "ray", "num_gpus": -0.5}, "executor.num_gpus"),
    ({"name": "ray", "max_retries": 1.5}, "executor.max_retries"),
    ({"name": "ray", "address": " "}, "executor.address"),
])
def test_bad_settings_name_their_key(cfg, key):
    with pytest.raises(ConfigError) as exc:
        settings_of(cfg)
    assert exc.value.key == key


def test_the_local_executor_runs_every_piece_in_order_with_the_shared_arguments():
    got = list(LocalExecutor().map(lambda base, x, y: base + x * y, [(1, 2), (3, 4), (5, 6)], shared=(100,)))
    assert got == [(0, 102), (1, 112), (2, 130)]


def test_the_executor_changes_neither_the_config_hash_nor_the_sweep_id():
    from omegaconf import OmegaConf

    from harness.config.compose import compose_config
    from harness.runner.sweep import sweep_id_of
    from harness.tracking.naming import config_hash
    from harness.app import to_plain

    given = ["dataset=synthetic", "cost.c=0.05"]
    on_ray = ["executor=ray", "executor.address=10.0.0.1:6379", "executor.num_cpus=4"]
    local = compose_config(given)
    ray = compose_config([*given, *on_ray])
    assert to_plain(ray)["executor"]["name"] == "ray"
    assert config_hash(to_plain(local)) == config_hash(to_plain(ray))
    # a sweep's config carries its hydra node: the overrides as typed, which the id reads
    for cfg, task in ((local, given), (ray, [*given, *on_ray])):
        OmegaConf.set_struct(cfg, False)
        cfg.hydra = {"overrides": {"task": task}, "sweeper": {"params": {}}}
    assert sweep_id_of(local) == sweep_id_of(ray)
    other = compose_config(["dataset=synthetic", "cost.c=0.1"])  # a value that matters: another sweep
    OmegaConf.set_struct(other, False)
    other.hydra = {"overrides": {"task": ["dataset=synthetic", "cost.c=0.1"]}, "sweeper": {"params": {}}}
    assert sweep_id_of(other) != sweep_id_of(local)


def test_a_piece_runs_with_the_threads_its_task_declares():
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    before, pools = torch.get_num_threads(), pool_threads()
    try:
        use_threads(1)
        assert torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
        use_threads(before, pools)  # auto: torch and the pools as large as the driver's
        assert pool_threads() == pools and torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
        threadpool_limits(limits=pools)
    assert pool_threads() == pools


def test_models_are_not_pickled_with_the_encoder_or_the_reranker():
    """A Ray worker receives the settings and loads its own model (never the weights)."""
    from harness.retrieval.encoder import DenseEncoder
    from harness.retrieval.rerankers import CrossEncoderReranker

    enc = DenseEncoder()
    enc._st = object()  # stands for a loaded model (not picklable by design)
    copy = pickle.loads(pickle.dumps(enc))
    assert copy._st is None and copy.identity() == enc.identity() and enc._st is not None
    rr = CrossEncoderReranker(model="cross-encoder/ms-marco-MiniLM-L-6-v2")
    rr._ce = object()
    assert pickle.loads(pickle.dumps(rr))._ce is None


def test_the_cluster_launcher_hands_the_drivers_cache_and_tracking_uri_to_its_jobs(monkeypatch):
    """A Ray worker inherits its raylet's environment, not the launching shell's: the launcher
    config hands over what is set here, and only that (an unset one keeps each node's default)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from harness import app
    from harness.executor import forwarded_env

    monkeypatch.setenv("HARNESS_CACHE_DIR", "/shared/route-bench-cache")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert forwarded_env() == {"HARNESS_CACHE_DIR": "/shared/route-bench-cache"}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://store.example:5000")
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=ray_cluster"], return_hydra_config=True)
    init = OmegaConf.to_container(cfg.hydra.launcher.ray.init, resolve=True)  # as the launcher resolves it
    assert init["runtime_env"] == {"env_vars": {"HARNESS_CACHE_DIR": "/shared/route-bench-cache",
                                                "MLFLOW_TRACKING_URI": "http://store.example:5000"}}
    # Ray refuses an object-store size when it joins a running cluster; the launcher sets one unless told
    assert "object_store_memory" in init and init["object_store_memory"] is None
