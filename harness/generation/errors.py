"""The generation package's error types, in a module that imports nothing of the package, so
every backend and helper can raise them without importing a backend."""

from __future__ import annotations

from harness.errors import HarnessError


class GenerationError(HarnessError):
    """A generator could not be built or did not return a usable answer."""


class BackendUnavailable(GenerationError):
    """The backend's package is not installed (the message says what to install)."""


class ServerAnswerError(GenerationError):
    """An answer that cannot be cached as it is: a field missing or out of its range (the
    message names the source and the field)."""
