"""One registry for every kind of plugin: a dataset that a package the harness has never seen
registers (the worked example of docs/datasets.md) loads, is checked, listed and run through a
real job with no harness edit; built-ins are found, checked and listed the same way."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ConfigError
from tests.helpers.faq import N_PAGES, PARAGRAPHS, QUESTIONS, write_faq
from tests.helpers.plugin_tools import activate, write_plugin

DOCS = Path(__file__).resolve().parent.parent / "docs"
REPO = DOCS.parent


def _python_block(page: str) -> str:
    """The one ```python block of a docs page: the tests run what the docs show."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, page
    return blocks[0]


FAQ = _python_block("datasets.md")
VARIANTS = '''
from faq_ext.faq import FaqLoader


class BareFaq(FaqLoader):  # no licence given
    name, licence = "faq_bare", None


class MultiHopFaq(FaqLoader):  # routes on all@2 by default, like HotpotQA
    name, retrieval_metric = "faq_all2", "all@2"


class NotALoader:
    name = "not_a_loader"
'''
ENTRY_POINTS = {"rag_route_bench.datasets": {
    "faq": "faq_ext.faq:FaqLoader",
    "faq_bare": "faq_ext.variants:BareFaq",
    "faq_all2": "faq_ext.variants:MultiHopFaq",
    "not_a_loader": "faq_ext.variants:NotALoader",
    "qasper": "faq_ext.faq:FaqLoader",  # a built-in's name: the built-in wins
}}


@pytest.fixture
def faq(tmp_path, monkeypatch):
    """The docs' FAQ loader installed as package ``faq_ext``: (its data file, subprocess env)."""
    root = write_plugin(tmp_path / "site", "faq_ext", {"faq.py": FAQ, "variants.py": VARIANTS}, ENTRY_POINTS)
    env = activate(monkeypatch, root)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(REPO)])  # this checkout's harness, from any folder
    return write_faq(tmp_path / "faq.json"), env


@pytest.fixture
def clean_dataset_store():
    """Forget the ConfigStore nodes a test registers in group ``dataset`` (the store is global)."""
    from hydra.core.config_store import ConfigStore

    before = dict(ConfigStore.instance().repo.get("dataset", {}))
    yield
    ConfigStore.instance().repo["dataset"] = before


def test_plugin_dataset_loads_through_load_dataset(faq):
    from harness.data import load_dataset

    path, _ = faq
    ds = load_dataset({"loader": "faq", "path": str(path)})
    assert ds.name == "faq" and len(ds.questions) == N_PAGES * QUESTIONS
    assert len(ds.documents) == N_PAGES and ds.n_units == N_PAGES * PARAGRAPHS
    assert all(q.has_evidence for q in ds.questions)
    # its licence, and its fingerprint input recorded with the file's own digest
    assert ds.meta["licence"] == "CC0 1.0"
    assert ds.meta["sources"] == [{"file": "faq.json", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}]
    # an option recorded in Dataset.options changes the fingerprint (hence the table's key)
    lower = load_dataset({"loader": "faq", "path": str(path), "lowercase": True, "max_questions": 5})
    assert len(lower.questions) == 5 and lower.questions[0].text.startswith("which page")
    assert lower.fingerprint() != load_dataset({"loader": "faq", "path": str(path), "max_questions": 5}).fingerprint()


@pytest.mark.parametrize("cfg, key, message", [
    ({"loader": "fqa"}, "dataset.loader", "unknown dataset 'fqa'; did you mean 'faq'"),
    ({"loader": "not_a_loader"}, "dataset.loader",
     r"dataset 'not_a_loader' \(entry point faq_ext.variants:NotALoader\) is not a harness.data.base.DatasetLoader subclass"),
    ({"loader": "faq"}, "dataset.path", "required by loader 'faq'"),
    ({"loader": "faq", "path": "x.json", "lowercas": True}, "dataset.lowercas", "did you mean 'lowercase'"),
    ({"loader": "faq", "path": "x.json", "lowercase": "yes"}, "dataset.lowercase", "expected true or false"),
])
def test_bad_plugin_configs_name_the_key(faq, cfg, key, message):
    from harness.data import check_dataset_config, load_dataset

    for check in (check_dataset_config, load_dataset):
        with pytest.raises(ConfigError, match=message) as err:
            check(cfg)
        assert err.value.key == key


def test_a_plugin_data_error_names_the_file(faq, tmp_path):
    from harness.data import DatasetPluginError, load_dataset
    from harness.errors import DataError

    path, _ = faq
    data = json.loads(path.read_text(encoding="utf-8"))
    data["questions"][2]["page"] = "page99"
    (tmp_path / "bad.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.json, field 'questions\[2\].page': no page 'page99'"):
        load_dataset({"loader": "faq", "path": str(tmp_path / "bad.json")})
    # an error the plugin did not foresee names the plugin and the method, not a traceback
    (tmp_path / "no_pages.json").write_text(json.dumps({"questions": []}), encoding="utf-8")
    with pytest.raises(DatasetPluginError, match=r"^dataset loader 'faq' \(faq_ext.faq.FaqLoader\): load\(\) raised "
                                                 r"KeyError: 'pages'$"):
        load_dataset({"loader": "faq", "path": str(tmp_path / "no_pages.json")})


def test_builtins_and_plugins_are_found_and_listed_alike(faq):
    from harness.data.qasper import QasperLoader
    from harness.data.registry import BUILTIN_DATASETS, DATASETS, dataset_names, loader_class
    from harness.registry import sources

    assert dataset_names()[:len(BUILTIN_DATASETS)] == list(BUILTIN_DATASETS)
    assert {"faq", "faq_bare", "faq_all2", "not_a_loader"} <= set(dataset_names())
    assert loader_class("qasper") is QasperLoader  # the built-in wins a name clash
    listed = {(s.name, s.source): s.target for s in sources(DATASETS)}
    assert listed[("qasper", "built-in")] == "harness.data.qasper:QasperLoader"
    assert listed[("faq", "entry point (faq_ext)")] == "faq_ext.faq:FaqLoader"
    assert listed[("qasper", "entry point (faq_ext), shadowed by the built-in")] == "faq_ext.faq:FaqLoader"


def test_builtins_are_entry_points_imported_only_when_looked_up(tmp_path, monkeypatch):
    from harness.registry import Kind, lookup, names

    root = write_plugin(tmp_path / "site", "lazy_ext", {
        "__init__.py": "class Base:\n    pass\n",
        "impl.py": "import lazy_ext\n\n\nclass Impl(lazy_ext.Base):\n    pass\n\n\nclass Other:\n    pass\n",
    }, {})
    activate(monkeypatch, root)
    import lazy_ext

    kind = Kind("gadget", "rag_route_bench.test_gadgets", lazy_ext.Base,
                {"impl": "lazy_ext.impl:Impl", "other": "lazy_ext.impl:Other"}, key="gadget.name")
    assert names(kind) == ["impl", "other"] and "lazy_ext.impl" not in sys.modules
    assert lookup(kind, "impl").__name__ == "Impl" and "lazy_ext.impl" in sys.modules
    with pytest.raises(ConfigError, match=r"gadget 'other' \(built-in lazy_ext.impl:Other\) is not a lazy_ext.Base"):
        lookup(kind, "other")
    with pytest.raises(ConfigError, match=r"config key 'gadget.name': unknown gadget 'imp'; did you mean 'impl'"):
        lookup(kind, "imp")


def test_dataset_equals_name_composes_the_plugins_node(faq, clean_dataset_store):
    from omegaconf import OmegaConf

    from harness.config import CONF_DIR
    from harness.config.compose import compose_config
    from harness.config.validation import validate
    from harness.data.registry import config_node, register_dataset_configs

    path, _ = faq
    stored = register_dataset_configs(CONF_DIR)  # as when the app starts with the plugin installed
    assert {"faq", "faq_bare", "faq_all2", "not_a_loader"} <= set(stored) and "qasper" not in stored
    assert config_node("faq") == {"name": "faq", "loader": "faq", "path": "???", "lowercase": False,
                                  "max_questions": None}
    cfg = compose_config(["dataset=faq", f"dataset.path={path}"])
    validate(cfg)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert plain["dataset"] == {**config_node("faq"), "path": str(path)}
    assert plain["arms"]["metric"] == "hit@10"
    # the retrieval pairs' default metric comes from the loader class
    assert OmegaConf.to_container(compose_config(["dataset=faq_all2", f"dataset.path={path}"]),
                                  resolve=True)["arms"]["metric"] == "all@2"
    with pytest.raises(ConfigError, match="dataset.loader"):
        validate(compose_config(["dataset=not_a_loader"]))


def test_data_command_prints_the_plugins_licence_or_none(faq, capsys):
    from harness.data.cli import main

    path, _ = faq
    assert main(["faq", f"path={path}"]) == 0
    rows = dict(re.split(r"\s{2,}", ln.strip()) for ln in capsys.readouterr().out.splitlines())
    assert rows["questions"] == str(N_PAGES * QUESTIONS) and rows["licence"] == "CC0 1.0"
    assert main(["faq_bare", f"path={path}"]) == 0
    rows = dict(re.split(r"\s{2,}", ln.strip()) for ln in capsys.readouterr().out.splitlines())
    assert rows["licence"] == "none given"
    assert main(["fqa", f"path={path}"]) == 2
    assert "did you mean 'faq'" in capsys.readouterr().err


def test_plugins_command_lists_every_kind_and_its_source(faq, tmp_path):
    _, env = faq
    proc = subprocess.run([sys.executable, "-m", "harness", "plugins"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {tuple(re.split(r"\s{2,}", ln.strip())) for ln in proc.stdout.splitlines()[1:] if ln.strip()}
    assert ("datasets", "faq", "entry point (faq_ext)", "faq_ext.faq:FaqLoader") in rows
    assert ("datasets", "qasper", "built-in", "harness.data.qasper:QasperLoader") in rows
    assert ("datasets", "qasper", "entry point (faq_ext), shadowed by the built-in", "faq_ext.faq:FaqLoader") in rows
    assert ("arms", "gold_at_k", "built-in", "harness.metric_blocks:GoldAtK") in rows
    assert ("protocols", "threshold", "built-in", "harness.protocols.builtin:ThresholdProtocol") in rows
    assert ("policies", "ridge", "built-in (conf/policy/ridge.yaml)", "policies.learned.RidgePolicy") in rows
    bad = subprocess.run([sys.executable, "-m", "harness", "plugins", "--kind", "dataset"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: UsageError: python -m harness plugins: --kind 'dataset' is no kind; did you mean 'datasets'? "
        "(kinds: datasets, arms, policies, protocols)"]


@pytest.mark.slow
def test_plugin_dataset_runs_a_real_job(faq, tmp_path):
    """dataset=faq through the real app: the outcome table is built with the real encoder and
    reranker, and the run is FINISHED with the dataset's fingerprint."""
    from mlflow.tracking import MlflowClient

    from harness.data import load_dataset

    path, env = faq
    env = {**env, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "dataset=faq", f"dataset.path={path}", "experiment=none",
           "protocol=threshold", "policy=ridge", f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
            if r.data.tags.get("route_bench.role") == "single"]
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    run = runs[0]
    assert run.data.tags["route_bench.dataset_fingerprint"] == load_dataset({"loader": "faq", "path": str(path)}).fingerprint()
    assert run.data.metrics["dataset/questions"] == N_PAGES * QUESTIONS
    assert run.data.params["dataset.loader"] == "faq"


def test_found_entry_points_follow_a_plugin_put_on_the_path(tmp_path, monkeypatch):
    """Entry points are kept while sys.path and its folders are unchanged, and found again as
    soon as a distribution appears on the path (no stale plugin list within one process)."""
    import sys

    from harness.registry import entry_points
    from tests.helpers.plugin_tools import write_plugin

    before = entry_points("rag_route_bench.protocols")
    assert entry_points("rag_route_bench.protocols") == before  # kept: the same answer
    root = write_plugin(tmp_path / "site", "kept_ext", {"p.py": "X = 1\n"},
                        {"rag_route_bench.protocols": {"kept_proto": "kept_ext.p:X"}})
    monkeypatch.syspath_prepend(str(root))
    assert "kept_proto" in entry_points("rag_route_bench.protocols") and "kept_proto" not in before
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(root)])
    assert "kept_proto" not in entry_points("rag_route_bench.protocols")
