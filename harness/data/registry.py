"""Where dataset loaders come from: the built-ins below and the entry-point group
``rag_route_bench.datasets``, found like every plugin (``harness.registry``).

Why here: everything that depends on which datasets exist (the loader a ``dataset.loader``
names, its options, a config node for ``dataset=<name>``, the default outcome metric of the
retrieval pairs) is read from the loader class, so a new dataset is one class and an entry
point, with no harness edit (harness/data/base.py says what the class declares).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from harness.data.base import REQUIRED, DatasetLoader
from harness.errors import ConfigError, HarnessError
from harness.registry import BUILT_IN, Kind, lookup, names, origin, registered

ENTRY_POINT_GROUP = "rag_route_bench.datasets"
COMMON_OPTIONS = ("loader", "name", "max_questions")  # every dataset config's own keys
BUILTIN_DATASETS = {  # the harness's own entry points: name -> "module:Class" (imported when used)
    "qasper_yesno": "harness.data.qasper_yesno:QasperYesNoLoader",
    "qasper": "harness.data.qasper:QasperLoader",
    "squad_pooled": "harness.data.squad_pooled:SquadPooledLoader",
    "hotpotqa": "harness.data.hotpotqa:HotpotQALoader",
    "musique": "harness.data.musique:MusiqueLoader",
    "2wikimultihopqa": "harness.data.twowiki:TwoWikiLoader",
    "boolq": "harness.data.boolq:BoolQLoader",
    "sciq": "harness.data.sciq:SciQLoader",
    "beir": "harness.data.jsonl_formats:BeirLoader",
    "jsonl": "harness.data.jsonl_formats:JsonlLoader",
    "synthetic": "harness.data.synthetic:SyntheticTable",
    "outcomes": "harness.data.outcome_table:OutcomeTableLoader",
}
DATASETS = Kind("dataset", ENTRY_POINT_GROUP, DatasetLoader, BUILTIN_DATASETS, key="dataset.loader")


def dataset_names() -> list[str]:
    """Every name ``dataset.loader`` may take: built-ins first, then installed plugins."""
    return names(DATASETS)


def loader_class(name: str, key: str = "dataset.loader") -> type[DatasetLoader]:
    """The loader class registered as ``name``; a ConfigError under ``key`` otherwise (unknown
    name with a hint, a plugin that fails to import or is no DatasetLoader)."""
    cls = lookup(DATASETS, name, key)
    if cls.name and cls.name != name:
        raise ConfigError(key, f"dataset loader {cls.__module__}.{cls.__qualname__} calls itself {cls.name!r}, "
                               f"registered as {name!r}")
    if not isinstance(cls.options, Mapping) or any(k in COMMON_OPTIONS for k in cls.options):
        raise ConfigError(key, f"dataset loader {name!r}: options must be a dict {{option: default}} without "
                               f"{', '.join(COMMON_OPTIONS)}")
    return cls


def make_loader(name: str, key: str = "dataset.loader") -> DatasetLoader:
    cls = loader_class(name, key)
    try:
        return cls()
    except (TypeError, ValueError) as exc:
        raise ConfigError(key, f"dataset loader {name!r} cannot be made without arguments: {exc}; its settings "
                               "are its options (dataset.<option>)") from None


def is_builtin(name: str) -> bool:
    """True for the harness's own loaders (an error in them is a bug, not a plugin's)."""
    ep = registered(DATASETS).get(name)
    return ep is not None and origin(ep) == BUILT_IN


def retrieval_metric(loader: Any) -> str | None:
    """The retrieval pairs' default ``arms.metric`` on the datasets of ``loader`` (its class's
    ``retrieval_metric``); None for the default, or when the name is no loader that can be
    imported (``harness.config.validation.validate`` names that problem)."""
    if not isinstance(loader, str) or loader not in registered(DATASETS):
        return None
    try:
        return loader_class(loader).retrieval_metric
    except HarnessError:
        return None


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value)


def config_node(name: str) -> dict[str, Any]:
    """The ``dataset`` config of loader ``name`` where no YAML gives one: its name, its options at
    their defaults (``???`` for a required one) and ``max_questions: null``. A plugin that cannot
    be imported gets the bare node (the job then fails naming its entry point)."""
    node: dict[str, Any] = {"name": name, "loader": name}
    try:
        options = loader_class(name).options
    except HarnessError:
        return node
    for key, default in options.items():
        if _plain(default):
            node[key] = list(default) if isinstance(default, tuple) else default
    node["max_questions"] = None
    return node


def yaml_names(conf_dir: str | Path) -> set[str]:
    """The dataset configs a config folder holds as YAML files (``dataset/<name>.yaml``)."""
    return {p.stem for p in (Path(conf_dir) / "dataset").glob("*.yaml")}


def register_dataset_configs(conf_dir: str | Path) -> list[str]:
    """Store a ConfigStore node ``dataset/<name>`` for every registered loader that has no YAML
    under ``conf_dir`` (a YAML of the same name wins), so ``dataset=<name>`` works like a
    built-in. Returns the names stored."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    have = yaml_names(conf_dir)
    done = []
    for name in dataset_names():
        if name in have or not _is_valid_node_name(name):
            continue
        store.store(group="dataset", name=name, node=config_node(name))
        done.append(name)
    return done


def _is_valid_node_name(name: str) -> bool:
    return bool(name) and all(c.isalnum() or c in "_-" for c in name)


__all__ = ["COMMON_OPTIONS", "DATASETS", "ENTRY_POINT_GROUP", "REQUIRED", "dataset_names", "loader_class",
           "make_loader", "retrieval_metric", "config_node", "register_dataset_configs"]
