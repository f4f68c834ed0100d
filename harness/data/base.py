"""A dataset loader: one class per dataset, registered like every plugin (``harness.registry``).

Why: a new dataset should be one class in the user's own package, registered under the
entry-point group ``rag_route_bench.datasets`` (``my_data = "my_pkg:MyLoader"``), with no
harness edit: ``dataset.loader=my_data`` (or ``dataset=my_data``, from the config node the
harness makes of the class, or from an optional ``conf/dataset/my_data.yaml``) loads it, and
the options, checks, licence and default outcome metric all come from the class.

A loader declares (docs/datasets.md has a worked example):

- ``options``: {option: default} of its ``dataset.<option>`` keys besides ``loader``, ``name``
  and ``max_questions``; the default ``REQUIRED`` (Hydra's ``???``) means a config must set it.
  Any other key is a ConfigError naming it;
- ``check(opts)`` (optional): checks of the values that need no file, raising ConfigError
  naming ``dataset.<key>`` (run before any work, with ``harness.config.validation.validate``);
- ``load(opts, name) -> Dataset``: ``opts`` holds every option, unset ones at their default;
- ``licence`` / ``citation``: printed with the data (``python -m harness data``); a dataset
  that gives none says "none given", never another dataset's licence;
- ``fingerprint_inputs(opts)`` (optional): the files whose bytes identify the data, recorded
  with their SHA-256 as the dataset's sources when ``load`` records none. The dataset's
  fingerprint itself always hashes the loaded units and questions (``Dataset.fingerprint``);
- ``retrieval_metric``: the outcome metric the retrieval pairs route on unless ``arms.metric``
  is set (None: ``hit@10``; HotpotQA says ``all@2``, docs/arms.md "Outcome metrics per dataset").
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar, Mapping

from harness.data.schema import Dataset
from harness.errors import ConfigError

REQUIRED = "???"  # an option's default when every config must set it
NO_LICENCE = "none given"


class DatasetLoader(abc.ABC):
    """Loads one kind of dataset from its ``dataset`` config (module docstring)."""

    name: ClassVar[str] = ""  # the name it is registered under (dataset.loader)
    options: ClassVar[Mapping[str, Any]] = {}
    licence: ClassVar[str | None] = None
    citation: ClassVar[str | None] = None
    retrieval_metric: ClassVar[str | None] = None

    def check(self, opts: dict[str, Any]) -> None:
        """Refuse option values that are wrong without reading a file (ConfigError naming
        ``dataset.<key>``); ``opts`` as for ``load``."""

    def fingerprint_inputs(self, opts: dict[str, Any]) -> list[Path]:
        """The files whose bytes identify the data (none: the data are made in code)."""
        return []

    @abc.abstractmethod
    def load(self, opts: dict[str, Any], name: str) -> Dataset:
        """The dataset the options describe, called ``name``."""


MAX_QUESTIONS = 10_000_000  # dataset.max_questions / n_questions: far above any dataset read here


def check_question_count(value: Any, key: str) -> None:
    """``dataset.<key>`` (a number of questions to keep) is null or an integer in [1, MAX_QUESTIONS]:
    a typo'd zero too many is named, not read as "all of them"."""
    from harness.errors import ConfigError

    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUESTIONS:
        raise ConfigError(f"dataset.{key}", f"expected a positive integer (at most {MAX_QUESTIONS}) or null, "
                                            f"got {value!r}")


def check_path(opts: Mapping[str, Any], key: str, *, nullable: bool = False) -> None:
    """``dataset.<key>`` is a non-empty path string (or, ``nullable``, null)."""
    value = opts.get(key)
    if nullable and value is None:
        return
    if not (isinstance(value, str) and value.strip()):
        raise ConfigError(f"dataset.{key}", f"expected a path{' or null' if nullable else ''}, got {value!r}")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():  # a device, FIFO or oversized file: said before any work starts
        from harness.data.validate import check_regular

        check_regular(path)
