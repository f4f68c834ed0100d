"""Error types that name what was wrong and where (file, field, config key).

Every entry point (``python -m harness ...``, see ``harness.__main__``) ends a bad input in ONE
line on stderr, ``error: <Kind>: <message>``, and exit code 2; ``--debug`` (first argument) or
``HYDRA_FULL_ERROR=1`` shows the traceback instead. ``one_line`` writes that line.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class HarnessError(Exception):
    """Base class: every error the harness raises on bad input derives from it."""


class DataError(HarnessError):
    """Bad dataset input. The message names the file and the field."""

    def __init__(self, source: str, field: str | None, problem: str):
        self.source = str(source)
        self.field = field
        self.problem = problem
        where = f"{self.source}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")


class DataSizeError(DataError):
    """The data are well-formed but too small for what was asked (counts in the message)."""


class ConfigError(HarnessError):
    """Bad configuration. The message names the config key."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"config key {key!r}: {problem}")


class NotApplicable(ConfigError):
    """The job's policy reads what its outcome table does not have (features, the question
    text): in a sweep the job is reported as not applicable to the table, not as a failure
    (``harness.preflight.not_applicable``); in a single run it is the config error it says."""


class UsageError(HarnessError):
    """Bad command line (unknown option, missing argument): names the option."""


class StoreError(HarnessError):
    """A file or store the command must read or write cannot be used (names the path or URI)."""


class FeatureError(HarnessError):
    """A policy asked for a feature the outcome table does not have."""


def did_you_mean(name: object, choices: Iterable[object], n: int = 3) -> str:
    """``"; did you mean 'x'?"`` (closest choices by spelling) or ``""`` when none is close."""
    options = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), options, n=n, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def os_error_message(exc: OSError, what: str = "file") -> str:
    """A one-line description of an OSError naming the path (no errno noise)."""
    import errno

    path = exc.filename
    reasons = {
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on the device",
        errno.ENOENT: "not found",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "a parent is not a directory",
        errno.EEXIST: "already exists",
    }
    reason = reasons.get(exc.errno) or (exc.strerror or type(exc).__name__).lower()
    if path is None:  # never "file '?'": say what is known
        return f"{reason} (the operating system named no {what}; rerun with --debug first for where)"
    return f"{what} {str(path)!r}: {reason}"


def one_line(exc: BaseException) -> str:
    """``error: <Kind>: <first line of the message>`` for the console."""
    if isinstance(exc, OSError) and not isinstance(exc, HarnessError):
        kind, text = "StoreError", os_error_message(exc)
    else:
        kind, text = type(exc).__name__, str(exc)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return f"error: {kind}: {lines[0] if lines else kind}"


def argument_parser(**kwargs):
    """An ``argparse.ArgumentParser`` whose usage errors raise UsageError (one line naming the
    option, exit 2 through the entry point) instead of printing the usage block."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):  # type: ignore[override]
            raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    return _Parser(**kwargs)


DEBUG_ENV = "ROUTE_BENCH_DEBUG"  # set by ``python -m harness --debug ...`` while the command runs


def debugging() -> bool:
    """True when the command runs with ``--debug`` (or ``HYDRA_FULL_ERROR=1``): re-raise errors so
    the entry point shows the traceback."""
    import os

    return os.environ.get(DEBUG_ENV) == "1"
