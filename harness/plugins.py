"""Finding plugin classes: by entry point or by an import path, checked against a base class.

Why one place: arm blocks, protocols (and policies, through their own registry) are all found
the same way, and a broken or wrong plugin must be said the same way, in one line naming the
config key, never as a traceback.
"""

from __future__ import annotations

import importlib
from importlib import metadata

from harness.errors import ConfigError, did_you_mean


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """{name: entry point} of an entry-point group (installed distributions, sys.path)."""
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def import_class(target: str, base: type, key: str, what: str) -> type:
    """The class at ``"pkg.module:Class"`` or ``"pkg.module.Class"``, a subclass of ``base``."""
    if ":" in target:
        module, attr = target.split(":", 1)
    else:
        module, _, attr = target.rpartition(".")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(key, f"cannot import {what} {target!r}: {exc}") from None
    return check_class(obj, base, key, f"{what} {target!r}")


def check_class(obj: object, base: type, key: str, label: str) -> type:
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ConfigError(key, f"{label} is not a {base.__module__}.{base.__qualname__} subclass")
    return obj


def plugin_class(group: str, name: str, base: type, key: str, what: str, known: list[str]) -> type:
    """The class registered as ``name`` in ``group``; an unknown name is a ConfigError with a
    "did you mean" hint over ``known``, a plugin that fails to load names its entry point."""
    eps = entry_points(group)
    if name not in eps:
        listed = ", ".join(known) or "none installed"
        raise ConfigError(key, f"unknown {what} {name!r}{did_you_mean(name, known)} (known: {listed})")
    try:
        obj = eps[name].load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is named, not a traceback
        raise ConfigError(key, f"{what} {name!r} (entry point {eps[name].value}) failed to load: {exc}") from None
    return check_class(obj, base, key, f"{what} {name!r} (entry point {eps[name].value})")
