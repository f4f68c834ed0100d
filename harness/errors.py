"""Error types that name what was wrong and where (file, field, config key)."""

from __future__ import annotations


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


class ConfigError(HarnessError):
    """Bad configuration. The message names the config key."""

    def __init__(self, key: str, problem: str):
        self.key = key
        self.problem = problem
        super().__init__(f"config key {key!r}: {problem}")


class FeatureError(HarnessError):
    """A policy asked for a feature the outcome table does not have."""
