"""``python -m harness features TABLE | key=value ...``: an outcome table's feature columns, one
line each, with what each measures (``harness.retrieval.feature_descriptions``).

Why: a team's first question of a table is "what can a policy read here?"; the ``feat.*`` column
names alone (``qpp_nqc_bm25``, ``overlap_dense_rerank10``) do not say. TABLE is an outcome table
file (Parquet or CSV: a built table, or one for ``dataset=outcomes``); key=value overrides compose
a job's config and build (or reuse from the cache) its table, as ``table build`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from harness.errors import DataError, UsageError
from harness.retrieval.feature_descriptions import describe, plugin_descriptions
from harness.retrieval.feature_names import FEATURE_PREFIX

USAGE = "usage: python -m harness features TABLE.parquet|TABLE.csv  |  python -m harness features key=value ..."
UNDESCRIBED = "(no description: not a harness feature; a plugin block can give one in its feature_descriptions)"


def file_columns(path: str) -> list[str]:
    """The column names of an outcome table file, read without its rows."""
    from harness.data.validate import check_regular

    file = Path(path)
    if not file.is_file():
        raise DataError(path, None, "no such file (expected an outcome table, .parquet or .csv)")
    check_regular(file)
    try:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(file).names)
        if file.suffix == ".csv":
            import pandas as pd

            return [str(c) for c in pd.read_csv(file, nrows=0).columns]
    except Exception as exc:  # noqa: BLE001 - an unreadable file is bad input, said in one line
        raise DataError(path, None, f"not a readable table ({type(exc).__name__}: "
                                    f"{(str(exc).splitlines() or [''])[0][:120]})") from None
    raise DataError(path, None, f"unknown table format {file.suffix!r}; expected .parquet or .csv")


def config_columns(overrides: Sequence[str]) -> tuple[str, list[str]]:
    """(the table's key, its columns) of the job config ``overrides`` compose, built or reused."""
    from omegaconf import OmegaConf

    from harness import app
    from harness.config.compose import compose_config
    from harness.config.validation import validate

    cfg = compose_config(list(overrides))
    validate(cfg)
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    table = app.build_table(plain)
    return f"outcome table {table.key}", [str(c) for c in table.frame.columns]


def feature_lines(columns: Sequence[str]) -> list[str]:
    """One line per ``feat.*`` column, in table order: the name and what it measures."""
    names = [c[len(FEATURE_PREFIX):] for c in columns if c.startswith(FEATURE_PREFIX)]
    extra = None
    if any(describe(n) is None for n in names):  # only then look at installed blocks
        extra = plugin_descriptions()
    width = max((len(n) for n in names), default=0)
    return [f"  {n:<{width}}  {describe(n, extra) or UNDESCRIBED}" for n in names]


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if not argv or any(a in ("-h", "--help") for a in argv):
        print(__doc__.split("\n\n")[0] + "\n" + USAGE)
        return 0 if argv else 2
    if all("=" in a and not a.startswith("-") for a in argv):
        keys = [a.partition("=")[0].lstrip("+~") for a in argv]
        twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if twice:
            raise UsageError(f"features: {twice} given twice on the command line; give it once")
        source, columns = config_columns(argv)
    elif len(argv) == 1 and not argv[0].startswith("-"):
        source, columns = f"table file {argv[0]}", file_columns(argv[0])
    else:
        raise UsageError(f"features: give one table file or key=value overrides, got {' '.join(argv)!r}; {USAGE}")
    lines = feature_lines(columns)
    print(f"{source}: {len(lines)} feature columns (feat.<name>; a policy reads them with policy.features=...)")
    print("\n".join(lines))
    return 0
