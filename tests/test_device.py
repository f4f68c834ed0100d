"""``device``: cpu by default everywhere (the same numbers on every machine), other devices
opt-in, validated under their key, and part of every cache key they touch."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.retrieval.encoder import DenseEncoder
from harness.retrieval.precision import resolve_device


def test_cpu_is_the_default_and_auto_falls_back_to_what_exists():
    import torch

    assert resolve_device("cpu") == "cpu"
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if torch.backends.mps.is_available() else "cpu")
    assert resolve_device("auto") == expected
    with pytest.raises(ConfigError, match=r"config key 'device'.*one of"):
        resolve_device("tpu")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_a_missing_device_is_one_config_error_before_any_work(tmp_path):
    from harness.__main__ import main

    with pytest.raises(ConfigError, match=r"config key 'device'.*not available"):
        resolve_device("cuda")
    code = main(["device=cuda", "dataset=synthetic", "experiment=none", f"tracking.uri=sqlite:///{tmp_path / 'x.db'}"])
    assert code == 2 and not (tmp_path / "x.db").exists()


def test_the_device_enters_the_key_only_when_it_is_not_cpu():
    cpu = DenseEncoder()
    assert "device" not in cpu.identity()  # today's tables keep their keys
    other = DenseEncoder()
    other.device = "cuda"  # as if resolved on a GPU machine
    assert other.identity()["device"] == "cuda" and other.identity() != cpu.identity()


def test_answer_arms_refuse_a_gpu_for_the_cpu_only_llama_cpp_wheel():
    from harness.arm_blocks import make_block

    with pytest.raises(ConfigError, match="CPU-only"):
        make_block({"name": "no_retrieval", "device": "cuda"})
    server = make_block({"name": "no_retrieval", "generator": "http://127.0.0.1:1", "device": "cuda"})
    assert server.device == "server"
    assert "device" not in make_block("no_retrieval").identity()["params"]
