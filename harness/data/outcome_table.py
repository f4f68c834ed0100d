"""``dataset=outcomes path=FILE``: an outcome table you made yourself, CSV or Parquet (docs/own_arms.md).

Why: a team that already logged its arms' outcomes (an LLM router's models on a benchmark, two
search back-ends judged offline) routes between them without the harness re-running anything.
The file is the outcome table itself, one row per question:

* ``qid`` (required, unique, non-empty): the question's id;
* ``group`` (optional): the group splits and resamples keep together (a document, a user);
  without it every question is its own group;
* per arm, outcome columns ``<arm>.<metric>`` (0/1 for hit@k, all@k, ``correct``; in [0, 1]
  for any other metric) and cost columns ``<arm>.cost.<unit>`` (>= 0);
* optional ``feat.<name>`` features (NaN allowed: policies impute) and ``question`` text.

Outcomes and costs must be finite: a NaN, a value out of range, a non-number is refused in one
line naming the file, the row (1-based, header excluded) and the column. RouterBench's column
convention (``<model>`` score and ``<model>|total_cost``) is converted by ``from_routerbench``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.data.base import REQUIRED, DatasetLoader, check_path
from harness.data.schema import Dataset
from harness.data.validate import read_bytes
from harness.errors import ConfigError, DataError
from harness.io import sha256_bytes

BINARY_PREFIXES = ("hit@", "all@")
BINARY_NAMES = ("correct",)
ARM_COLUMN = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]*)\.(.+)$")
OPTIONAL = ("group", "question")


def is_binary(metric: str) -> bool:
    return metric.startswith(BINARY_PREFIXES) or metric in BINARY_NAMES


def _frame(path: Path) -> tuple[pd.DataFrame, str]:
    data = read_bytes(path, "outcome table")
    try:
        if data[:4] == b"PAR1":
            frame = pd.read_parquet(io.BytesIO(data))
        else:
            frame = pd.read_csv(io.BytesIO(data), dtype={"qid": str, "group": str}, keep_default_na=False,
                                na_values=["", "NaN", "nan", "NA"])
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise DataError(path.name, None, f"is neither a readable CSV nor Parquet file: {str(exc).splitlines()[0]}") from None
    return frame, sha256_bytes(data)


def arms_of(columns) -> dict[str, dict[str, list[str]]]:
    """{arm: {"outcomes": [metric, ...], "costs": [unit, ...]}} of an outcome table's columns."""
    out: dict[str, dict[str, list[str]]] = {}
    for c in map(str, columns):
        m = ARM_COLUMN.match(c)
        if not m or c.startswith("feat."):
            continue
        arm, rest = m.groups()
        entry = out.setdefault(arm, {"outcomes": [], "costs": []})
        if rest.startswith("cost."):
            entry["costs"].append(rest[len("cost."):])
        else:
            entry["outcomes"].append(rest)
    return out


def _bad_row(name: str, values: pd.Series, bad: np.ndarray, column: str, problem: str) -> DataError:
    i = int(np.argmax(bad))
    value = values.iloc[i]
    shown = repr(value.item() if isinstance(value, np.generic) else value)
    return DataError(f"{name}: row {i + 1}", column, f"{problem}, got {shown} ({int(bad.sum())} such row(s))")


def _check_column(name: str, frame: pd.DataFrame, column: str, kind: str) -> np.ndarray:
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    if kind == "feature":
        bad = raw.notna().to_numpy() & np.isnan(values)
        if bad.any():
            raise _bad_row(name, raw, bad, column, "a feature must be a number (or empty)")
        return values
    bad = ~np.isfinite(values)
    if bad.any():
        raise _bad_row(name, raw, bad, column, "must be a finite number (no NaN, no empty cell)")
    if kind == "cost" and (values < 0).any():
        raise _bad_row(name, raw, values < 0, column, "a cost must be >= 0")
    if kind == "binary" and (~np.isin(values, (0.0, 1.0))).any():
        raise _bad_row(name, raw, ~np.isin(values, (0.0, 1.0)), column, "a 0/1 metric must be 0 or 1")
    if kind == "graded" and ((values < 0) | (values > 1)).any():
        raise _bad_row(name, raw, (values < 0) | (values > 1), column, "an outcome must lie in [0, 1]")
    return values


def read_outcome_table(path: str | Path) -> tuple[pd.DataFrame, str]:
    """(the table with ``qid``, ``doc_id`` and the file's columns, its SHA-256), checked (module
    docstring); a DataError names file, row and column."""
    path = Path(path).expanduser()
    frame, digest = _frame(path)
    name = path.name
    frame.columns = [str(c) for c in frame.columns]
    if "qid" not in frame.columns:
        raise DataError(name, "qid", f"no column 'qid' (the question id); columns: {list(frame.columns)[:8]}")
    if not len(frame):
        raise DataError(name, None, "has no row")
    qid = frame["qid"].astype(str).str.strip()
    empty = (qid == "") | frame["qid"].isna().to_numpy()
    if empty.any():
        raise _bad_row(name, frame["qid"], empty.to_numpy(), "qid", "a question id must not be empty")
    dup = qid.duplicated().to_numpy()
    if dup.any():
        raise _bad_row(name, qid, dup, "qid", "a question id must be unique")
    arms = arms_of(frame.columns)
    if not any(a["outcomes"] for a in arms.values()):
        raise DataError(name, None, "has no outcome column '<arm>.<metric>' (e.g. gpt4.correct)")
    out = {"qid": qid.to_numpy()}
    group = frame["group"].astype(str).str.strip() if "group" in frame.columns else qid
    out["doc_id"] = group.to_numpy()
    for c in frame.columns:
        m = ARM_COLUMN.match(c)
        if c.startswith("feat."):
            out[c] = _check_column(name, frame, c, "feature")
        elif m and m.group(2).startswith("cost."):
            out[c] = _check_column(name, frame, c, "cost")
        elif m:
            out[c] = _check_column(name, frame, c, "binary" if is_binary(m.group(2)) else "graded")
        elif c == "question":
            out[c] = frame[c].astype(str).to_numpy()
        elif c not in ("qid", "group"):
            raise DataError(name, c, "is not a column of an outcome table (qid, group, question, <arm>.<metric>, "
                                     "<arm>.cost.<unit>, feat.<name>)")
    return pd.DataFrame(out), digest


def check_pair(path: str | Path, base: str, extra: str, metric: str) -> None:
    """Both arms have the routed outcome column in the file; a DataError names file and column."""
    frame, _ = read_outcome_table(path)
    arms = arms_of(frame.columns)
    for arm in (base, extra):
        if f"{arm}.{metric}" not in frame.columns:
            have = ", ".join(f"{a} ({', '.join(v['outcomes'])})" for a, v in sorted(arms.items()))
            raise DataError(Path(path).name, f"{arm}.{metric}", f"no such column: arm {arm!r} on metric {metric!r} "
                                                               f"(arms.base / arms.extra / arms.metric); the file has: {have}")


def cost_unit(frame: pd.DataFrame, base: str, extra: str) -> str | None:
    """The cost unit both arms have a column of (the first in column order), else None."""
    units = arms_of(frame.columns)
    common = [u for u in units.get(base, {}).get("costs", []) if u in units.get(extra, {}).get("costs", [])]
    return common[0] if common else None


def from_routerbench(frame: pd.DataFrame, prompt_column: str = "prompt", group_column: str | None = "eval_name"):
    """RouterBench's columns (``<model>``: its score, ``<model>|total_cost``: its cost in dollars,
    ``sample_id``, ``prompt``, ``eval_name``) as an outcome table: ``<model>.correct`` when every
    score is 0 or 1, else ``<model>.score``; ``<model>.cost.usd``; ``qid`` from ``sample_id``."""
    models = [c[: -len("|total_cost")] for c in frame.columns if str(c).endswith("|total_cost")]
    if not models:
        raise DataError("RouterBench table", None, "has no '<model>|total_cost' column")
    if "sample_id" not in frame.columns:
        raise DataError("RouterBench table", "sample_id", "missing (the question id)")
    out = {"qid": frame["sample_id"].astype(str)}
    if group_column and group_column in frame.columns:
        out["group"] = frame[group_column].astype(str)
    if prompt_column in frame.columns:
        out["question"] = frame[prompt_column].astype(str)
    for model in models:
        if model not in frame.columns:
            raise DataError("RouterBench table", model, f"missing: '{model}|total_cost' has no score column")
        arm = re.sub(r"[^A-Za-z0-9_\-]", "_", model)
        arm = arm if re.match(r"^[A-Za-z]", arm) else f"m_{arm}"
        score = pd.to_numeric(frame[model], errors="coerce")
        metric = "correct" if score.isin([0, 1]).all() else "score"
        out[f"{arm}.{metric}"] = score
        out[f"{arm}.cost.usd"] = pd.to_numeric(frame[f"{model}|total_cost"], errors="coerce")
    return pd.DataFrame(out)


class OutcomeTableLoader(DatasetLoader):
    """``dataset=outcomes path=FILE``: the file is the outcome table (module docstring); the app
    reads it directly, so ``load`` refuses to make a dataset of documents of it."""

    name = "outcomes"
    options = {"path": REQUIRED}
    licence = "none given"

    def check(self, opts: dict) -> None:
        check_path(opts, "path")

    def load(self, opts: dict, name: str) -> Dataset:
        raise ConfigError("dataset.loader", "'outcomes' is an outcome table, not a dataset of documents; use it with "
                                            "the app (python -m harness dataset=outcomes dataset.path=FILE ...)")
