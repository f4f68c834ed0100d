"""Checks of a ``--config-dir`` (``-cd``) folder before Hydra reads any file in it."""

from __future__ import annotations

import os
from pathlib import Path

from harness.data.validate import check_regular
from harness.errors import DataError, UsageError

MAX_CONF_FILES = 10_000  # YAML files one --config-dir may hold (each is stat-ed before Hydra reads any)


def check_config_dir(folder: str, option: str = "--config-dir") -> None:
    """A ``--config-dir`` (``-cd``) Hydra would search: a folder whose every YAML file is a regular
    file under the size cap. Checked before Hydra opens any: reading a FIFO there blocks forever,
    /dev/zero never ends. A UsageError (or DataError of the file) names the option and the file."""
    path = Path(folder).expanduser()
    if not path.exists():
        raise UsageError(f"{option} {folder!r}: not found (expected a folder of YAML configs)")
    if not path.is_dir():
        raise UsageError(f"{option} {folder!r}: not a folder (expected a folder of YAML configs)")
    seen = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if not name.endswith((".yaml", ".yml")):
                continue
            seen += 1
            if seen > MAX_CONF_FILES:
                raise UsageError(f"{option} {folder!r}: holds more than {MAX_CONF_FILES} YAML files")
            file = Path(root) / name
            try:
                check_regular(file, "YAML config file")
            except DataError as exc:
                problem = exc.problem.rsplit(": ", 1)[0] if exc.problem.endswith(str(file)) else exc.problem
                raise UsageError(f"{option} {folder!r}: {file.relative_to(path)}: {problem}") from None

