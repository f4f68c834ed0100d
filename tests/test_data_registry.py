"""load_dataset config handling, the shipped dataset yamls, and the `data` statistics command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from harness.data import load_dataset
from harness.data.cli import BUILTIN_CONFIGS, conf_dir, main
from harness.errors import ConfigError

QASPER = Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json"
HOTPOT = Path(__file__).parent / "fixtures" / "data" / "hotpot-fixture.json"


@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"loader": "nope"}, "dataset.loader"),
        ({}, "dataset.loader"),
        ({"loader": "qasper", "path": "???"}, "dataset.path"),
        ({"loader": "hotpotqa"}, "dataset.path"),
        ({"loader": "qasper_yesno", "path": "x"}, "dataset.path"),
        ({"loader": "qasper_yesno", "bogus": 1}, "dataset.bogus"),
        ({"loader": "hotpotqa", "path": str(HOTPOT), "max_questions": 0}, "dataset.max_questions"),
        ({"loader": "qasper", "path": str(QASPER), "split": "validation"}, "dataset.split"),
    ],
)
def test_config_errors_name_the_key(cfg, key):
    with pytest.raises(ConfigError) as e:
        load_dataset(cfg)
    assert e.value.key == key


def test_max_questions_takes_first_sorted_ids():
    ds = load_dataset({"loader": "qasper", "path": str(QASPER), "max_questions": 3, "name": "tiny"})
    assert [q.qid for q in ds.questions] == ["q1", "q2", "q3"]
    assert list(ds.documents) == ["P1"] and list(ds.pools) == ["P1"] and ds.name == "tiny"


def test_omegaconf_config_accepted():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"name": "h", "loader": "hotpotqa", "path": str(HOTPOT), "max_questions": None})
    assert len(load_dataset(cfg).questions) == 2


def test_shipped_yamls_match_builtin_configs():
    # conf/dataset may hold other entries (e.g. the app's synthetic table); ours must all match
    files = [conf_dir() / "dataset" / f"{name}.yaml" for name in BUILTIN_CONFIGS]
    assert len(files) == 4 and all(p.is_file() for p in files)
    for p in files:
        assert yaml.safe_load(p.read_text()) == BUILTIN_CONFIGS[p.stem], p.name
        assert BUILTIN_CONFIGS[p.stem]["name"] == p.stem


def test_cli_table_and_json(capsys):
    assert main(["qasper", "--path", str(QASPER)]) == 0
    out = capsys.readouterr().out
    lines = dict(re.split(r"\s{2,}", ln.strip()) for ln in out.splitlines())
    assert lines["documents"] == "2" and lines["questions"] == "6" and lines["with evidence"] == "3"
    assert lines["heading"] == "3" and lines["caption"] == "2" and lines["paragraph"] == "6"
    assert lines["matched exact"] == "2" and lines["matched fuzzy"] == "2" and lines["unmatched"] == "3"
    assert lines["licence"] == "CC BY 4.0" and lines["evidence strings"] == "7"
    assert main(["qasper", f"path={QASPER}", "max_questions=2", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["questions"] == 2 and s["licence"] == "CC BY 4.0" and len(s["fingerprint"]) == 64


def test_cli_errors(capsys):
    assert main(["qasper"]) == 2
    assert "dataset.path" in capsys.readouterr().err
    assert main(["no_such_dataset"]) == 2
    assert "unknown dataset config 'no_such_dataset'" in capsys.readouterr().err
    assert main(["hotpotqa", f"path={HOTPOT}", "extra=1"]) == 2
    assert "dataset.extra" in capsys.readouterr().err
