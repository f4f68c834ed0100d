"""Loading a dataset: ``load_dataset(cfg)`` turns a ``dataset`` config into a :class:`Dataset`.

``cfg`` keys: ``loader`` (a registered dataset loader: qasper | qasper_yesno | squad_pooled |
hotpotqa, or a plugin's, ``harness.data.registry``), optional ``name`` (defaults to the loader),
optional ``max_questions`` (keep the first N question ids in sorted order, a deterministic subset
that does not depend on file order), plus the loader's options (its class's ``options``,
``harness.data.base``; the QASPER-layout loaders take ``heading_text: full | last``, which text
the retrievers see for a section heading, default ``full``, see :mod:`harness.data.qasper`). An
unknown loader or option, or a missing required option, is a ConfigError naming
``dataset.<key>``. A value of ``"???"`` (Hydra's "must be set") counts as missing.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator, Mapping

from harness.data.base import NO_LICENCE, REQUIRED, DatasetLoader, check_question_count
from harness.data.registry import COMMON_OPTIONS, dataset_names, is_builtin, loader_class, make_loader
from harness.data.schema import Dataset, Question, Unit, subset
from harness.errors import ConfigError, DataSizeError, HarnessError, did_you_mean
from harness.plugin_guard import plugin_call


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


def first_questions(ds: Dataset, n: int) -> Dataset:
    """The dataset restricted to the first ``n`` question ids in sorted order."""
    keep = sorted(q.qid for q in ds.questions)[:n]
    return subset(ds, keep)


def loader_options(cls: type[DatasetLoader], d: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of the loader: its value in ``d``, else (unset, null or ``???``) its default."""
    return {k: (default if _missing(d.get(k)) else d[k]) for k, default in cls.options.items()}


def check_dataset_config(cfg: Any) -> dict:
    """Every check of a ``dataset`` config that needs no file (loader, options, their types and
    values), raising ConfigError naming ``dataset.<key>``; returns the config as a plain dict.
    ``harness.config.validation.validate`` calls it before any work, ``load_dataset`` before
    loading."""
    d = _to_dict(cfg)
    loader = d.get("loader")
    if _missing(loader):
        raise ConfigError("dataset.loader", f"missing; expected one of {', '.join(dataset_names())}")
    cls = loader_class(loader)
    name = d.get("name") or loader
    if not isinstance(name, str):
        raise ConfigError("dataset.name", f"expected a string, got {type(name).__name__}")
    check_question_count(d.get("max_questions"), "max_questions")
    options = sorted(set(COMMON_OPTIONS) | set(cls.options))
    for key in d:
        if key not in options:
            raise ConfigError(
                f"dataset.{key}",
                f"unknown option for loader {loader!r}{did_you_mean(key, options)}; allowed: {', '.join(options)}",
            )
    for key, default in cls.options.items():
        if default == REQUIRED and _missing(d.get(key)):
            raise ConfigError(f"dataset.{key}", f"required by loader {loader!r} (set dataset.{key}=...)")
    made = make_loader(loader)
    with naming_plugin(made, loader, "check"):
        made.check(loader_options(cls, d))
    return d


def check_usable(ds: Dataset, require_evidence: bool = True) -> Dataset:
    """A loaded dataset the harness can measure on: it has questions and (``require_evidence``)
    at least one question with gold evidence; else a DataSizeError naming it and the counts."""
    source = _source_of(ds)
    if not ds.questions:
        from harness.data.schema import left_out_said

        left = left_out_said(ds.stats())
        why = "; left out: " + ", ".join(f"{n} {reason}" for reason, n in left) if left else ""
        raise DataSizeError(source, None, f"dataset {ds.name!r} has no questions ({len(ds.documents)} documents{why})")
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
    loader = make_loader(d["loader"])
    opts = loader_options(type(loader), d)
    name = d.get("name") or d["loader"]
    ds = _loaded(loader, d["loader"], opts, name)
    max_q = d.get("max_questions")
    if max_q is not None:
        ds = first_questions(ds, max_q)
        ds.meta["max_questions"] = max_q
    return check_usable(ds, require_evidence)


class DatasetPluginError(HarnessError):
    """A plugin loader raised something other than a harness error: names the loader and the
    method (the traceback is shown with --debug)."""


@contextlib.contextmanager
def naming_plugin(loader: DatasetLoader, registered_as: str, method: str) -> Iterator[None]:
    """Around a call into a plugin loader: an error that is not a HarnessError becomes a
    DatasetPluginError naming the loader and ``method`` (a built-in's error is a bug: as it is)."""
    label = f"dataset loader {registered_as!r} ({type(loader).__module__}.{type(loader).__qualname__})"
    try:
        with plugin_call(label, method, error=DatasetPluginError):  # sys.exit: an error naming it
            yield
    except HarnessError:
        raise
    except Exception as exc:
        if is_builtin(registered_as):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise DatasetPluginError(f"{label}: {method}() raised {type(exc).__name__}" + (f": {first}" if first else "")) from exc


def _loaded(loader: DatasetLoader, registered_as: str, opts: dict, name: str) -> Dataset:
    """``loader.load`` with what every dataset carries: its licence and citation (the loader's,
    "none given" without one) and, when the loader recorded none, its sources (the files of
    ``fingerprint_inputs`` with their SHA-256)."""
    with naming_plugin(loader, registered_as, "load"):
        ds = loader.load(opts, name)
    if not isinstance(ds, Dataset):
        raise ConfigError("dataset.loader", f"dataset loader {registered_as!r}: load() returned {type(ds).__name__}, "
                                            "expected a harness.data.schema.Dataset")
    ds.meta.setdefault("licence", loader.licence or NO_LICENCE)
    if loader.citation:
        ds.meta.setdefault("citation", loader.citation)
    if not _has_sources(ds):
        with naming_plugin(loader, registered_as, "fingerprint_inputs"):
            inputs = list(loader.fingerprint_inputs(opts))
        if inputs:
            ds.meta["sources"] = [{"file": Path(p).name, "sha256": _sha256(Path(p))} for p in inputs]
    return ds


def _has_sources(ds: Any) -> bool:
    meta = getattr(ds, "meta", None)
    return isinstance(meta, dict) and bool(meta.get("sources") or meta.get("source"))


def _sha256(path: Path) -> str:
    from harness.data.validate import check_regular, os_problem
    from harness.io import sha256_file

    check_regular(path)
    try:
        return sha256_file(path)
    except OSError as exc:
        raise os_problem(exc, path) from None


__all__ = ["Dataset", "DatasetLoader", "Question", "Unit", "load_dataset", "first_questions", "check_dataset_config",
           "check_usable", "dataset_names"]
