"""load_dataset config handling, the shipped dataset yamls, and the `data` statistics command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from harness.data import load_dataset
from harness.data.cli import conf_dir, main
from harness.data.registry import BUILTIN_DATASETS, COMMON_OPTIONS, config_node, loader_class
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


def test_shipped_yamls_match_their_loaders():
    # every shipped dataset YAML is its loader's config: the loader's options at the class's
    # defaults (the node `dataset=<name>` gets where no YAML exists), nothing else
    files = sorted((conf_dir() / "dataset").glob("*.yaml"))
    assert {p.stem for p in files} == set(BUILTIN_DATASETS)
    for p in files:
        cfg = yaml.safe_load(p.read_text())
        assert cfg["name"] == cfg["loader"] == p.stem, p.name
        node = config_node(p.stem)
        options = loader_class(p.stem).options
        assert set(cfg) - set(COMMON_OPTIONS) <= set(options), p.name
        assert {k: v for k, v in cfg.items() if k in options} == {k: node[k] for k in cfg if k in options}, p.name
        assert cfg.get("max_questions", None) is None and node["max_questions"] is None


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
