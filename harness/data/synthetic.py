"""``dataset.loader=synthetic``: the seeded synthetic outcome table's options (conf/dataset/synthetic.yaml).

Why a loader: its options are checked like every dataset's, before any work, and it is listed
with the others; but it is an outcome table made by ``harness.synthetic`` (no documents, no
models), so the app builds it directly and ``load`` refuses to make a dataset of it.
"""

from __future__ import annotations

import math

from harness.data.base import DatasetLoader
from harness.data.schema import Dataset
from harness.errors import ConfigError

# integer option -> (minimum, maximum); the table has n_docs x questions_per_doc rows
SYNTHETIC_OPTIONS = {"n_docs": (1, 100_000), "questions_per_doc": (1, 1_000), "seed": (0, 2**32 - 1)}
MAX_SYNTHETIC_ROWS = 1_000_000
MAX_SIGNAL = 100.0  # |dataset.signal|: the planted signal's strength (2.0 by default; 100 saturates it)
NOT_A_DATASET = ("'synthetic' is an outcome table for tests and demos, not a dataset of documents; use it with "
                 "the app (python -m harness dataset=synthetic ...)")


class SyntheticTable(DatasetLoader):
    """The synthetic outcome table's options (module docstring)."""

    name = "synthetic"
    options = {"n_docs": 60, "questions_per_doc": 5, "seed": 0, "signal": 2.0}
    licence = "none needed (generated)"

    def check(self, opts: dict) -> None:
        for key, (low, high) in SYNTHETIC_OPTIONS.items():
            v = opts.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high):
                raise ConfigError(f"dataset.{key}", f"expected an integer in [{low}, {high}], got {v!r}")
        rows = int(opts.get("n_docs") or 60) * int(opts.get("questions_per_doc") or 5)
        if rows > MAX_SYNTHETIC_ROWS:
            raise ConfigError("dataset.n_docs", f"{opts.get('n_docs')} documents x {opts.get('questions_per_doc')} "
                                                f"questions per document = {rows} rows; at most {MAX_SYNTHETIC_ROWS}")
        signal = opts.get("signal")
        if signal is not None and (isinstance(signal, bool) or not isinstance(signal, (int, float)) or not math.isfinite(signal)
                                   or abs(signal) > MAX_SIGNAL):
            raise ConfigError("dataset.signal", f"expected a finite number in [-{MAX_SIGNAL:g}, {MAX_SIGNAL:g}], got {signal!r}")

    def load(self, opts: dict, name: str) -> Dataset:
        raise ConfigError("dataset.loader", NOT_A_DATASET)
