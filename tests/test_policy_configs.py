"""conf/policy/signal_*.yaml are generated from SIGNAL_SIGNS (policies/signals.py): the files
in the repository must be exactly what ``python -m policies.signals --write-configs`` writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import policies.signals as signals
from policies.registry import builtin_policy_configs, default_conf_dir, make_policy
from policies.signals import (
    GENERATED_HEADER,
    SIGNAL_SIGNS,
    main,
    signal_config_problems,
    signal_config_texts,
    write_signal_configs,
)

REPO = Path(__file__).resolve().parent.parent


def test_repository_signal_configs_match_the_table():
    assert signal_config_problems() == [], "run: python -m policies.signals --write-configs"
    folder = default_conf_dir() / "policy"
    files = sorted(p.name for p in folder.glob("signal_*.yaml"))
    assert files == sorted(f"signal_{f}.yaml" for f in SIGNAL_SIGNS) and len(files) == 24  # 20 retrieval, 4 uncertainty signals
    configs = builtin_policy_configs()
    for feature, sign in SIGNAL_SIGNS.items():
        path = folder / f"signal_{feature}.yaml"
        assert path.read_text(encoding="utf-8").splitlines()[0] == GENERATED_HEADER
        cfg = OmegaConf.to_container(OmegaConf.load(path))
        assert cfg == {"name": f"signal_{feature}", "_target_": "policies.signals.SingleSignalPolicy", "feature": feature, "sign": sign}
        pol = make_policy(configs[f"signal_{feature}"])
        assert pol.sign == sign and pol.features == (feature,)


@pytest.fixture
def conf(tmp_path):
    """A copy of the repository's conf/policy to break."""
    shutil.copytree(default_conf_dir() / "policy", tmp_path / "policy")
    return tmp_path


def test_disagreements_are_reported_and_write_fixes_them(conf, capsys):
    folder = conf / "policy"
    assert signal_config_problems(conf) == []
    # a hand edit of a sign, a deleted file, a stale generated file, a hand-written extra file
    edited = folder / "signal_dense_top1.yaml"
    edited.write_text(edited.read_text(encoding="utf-8").replace("sign: -1", "sign: 1"), encoding="utf-8")
    (folder / "signal_bm25_top1.yaml").unlink()
    (folder / "signal_gone.yaml").write_text(f"{GENERATED_HEADER}\nname: signal_gone\n", encoding="utf-8")
    (folder / "signal_mine.yaml").write_text("name: signal_mine\n", encoding="utf-8")
    problems = signal_config_problems(conf)
    assert problems == [
        "signal_bm25_top1.yaml: missing (SIGNAL_SIGNS has 'bm25_top1')",
        "signal_dense_top1.yaml: differs from the text generated from SIGNAL_SIGNS",
        "signal_gone.yaml: no entry 'gone' in SIGNAL_SIGNS",
        "signal_mine.yaml: no entry 'mine' in SIGNAL_SIGNS",
    ]
    assert main(["--check", "--conf-dir", str(conf)]) == 1
    out = capsys.readouterr().out
    assert "out of date: signal_dense_top1.yaml" in out and "python -m policies.signals --write-configs" in out

    changed = {p.name for p in write_signal_configs(conf)}
    assert changed == {"signal_dense_top1.yaml", "signal_bm25_top1.yaml", "signal_gone.yaml"}
    assert not (folder / "signal_gone.yaml").exists()  # generated and stale: removed
    assert signal_config_problems(conf) == ["signal_mine.yaml: no entry 'mine' in SIGNAL_SIGNS"]  # hand-written: kept, reported
    (folder / "signal_mine.yaml").unlink()
    assert main(["--check", "--conf-dir", str(conf)]) == 0
    for name, text in signal_config_texts().items():
        assert (folder / name).read_text(encoding="utf-8") == text
        assert (folder / name).read_text(encoding="utf-8") == (default_conf_dir() / "policy" / name).read_text(encoding="utf-8")


def test_a_table_change_without_regenerating_fails(conf, monkeypatch):
    monkeypatch.setitem(signals.SIGNAL_SIGNS, "q_len_words", 1)
    monkeypatch.setitem(signals.SIGNAL_SIGNS, "dense_top1", 1)
    assert signal_config_problems(conf) == [
        "signal_dense_top1.yaml: differs from the text generated from SIGNAL_SIGNS",
        "signal_q_len_words.yaml: missing (SIGNAL_SIGNS has 'q_len_words')",
    ]
    assert main(["--write-configs", "--conf-dir", str(conf)]) == 0
    cfg = builtin_policy_configs(conf)["signal_q_len_words"]
    assert cfg["sign"] == 1 and make_policy(cfg).features == ("q_len_words",)
    assert builtin_policy_configs(conf)["signal_dense_top1"]["sign"] == 1


def test_the_command_runs_as_a_module():
    proc = subprocess.run(
        [sys.executable, "-m", "policies.signals", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stdout + proc.stderr
