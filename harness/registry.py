"""One registry for every kind of plugin: policies, arm blocks, protocols and datasets.

Why one place: a kind is declared once, as a :class:`Kind` (its entry-point group, the base class
every class of it subclasses, and its built-ins). The built-ins are entry points written in the
harness, in the format of ``[project.entry-points."<group>"]`` (``name = "module:Class"``), so a
built-in and a plugin are found, imported (only when used), checked and listed the same way; a
plugin never has to edit the harness. A name nobody registered is a ConfigError naming the config
key, with a "did you mean" hint; a plugin that fails to import, or whose class is not a subclass
of the kind's base, is named by its entry point in one line, never a traceback.

``python -m harness plugins`` (``harness.plugin_list``) prints :func:`sources` of every kind.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Mapping, NamedTuple

from harness.errors import ConfigError, did_you_mean
from harness.plugin_guard import PluginError, plugin_call

BUILT_IN = "built-in"


@dataclass(frozen=True)
class Kind:
    """A kind of plugin. ``builtins``: {name: "module:Class"}, the harness's own entry points
    (a built-in wins a name clash with an installed one); ``key``: the config key a bad name is
    blamed on unless the caller names another; ``factories``: a callable that is not a class
    (a factory returning an instance) is accepted too (policies)."""

    what: str  # what messages call one: "arm block", "dataset", ...
    group: str  # the entry-point group, rag_route_bench.<...>
    base: type
    builtins: Mapping[str, str] = field(default_factory=dict)
    key: str = ""
    factories: bool = False


class Source(NamedTuple):
    """Where a name of a kind comes from: ``source`` is ``built-in`` or ``entry point (<dist>)``,
    ``target`` the ``module:Class`` it names."""

    name: str
    source: str
    target: str


_FOUND: dict[tuple, dict[str, metadata.EntryPoint]] = {}


def _path_state() -> tuple:
    """``sys.path`` with each folder's modification time: a distribution installed, removed or
    put on the path changes it."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, None))
    return tuple(state)


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """{name: entry point} of an entry-point group over the installed distributions and
    ``sys.path``; on a name registered twice the first by (name, value) wins, whatever the
    order of ``sys.path``. Kept while the path and its folders are unchanged: scanning every
    distribution costs about 0.1 s, and a sweep validates each of its jobs."""
    key = (group, _path_state())
    if key not in _FOUND:
        out: dict[str, metadata.EntryPoint] = {}
        for ep in sorted(metadata.entry_points(group=group), key=lambda e: (e.name, e.value)):
            out.setdefault(ep.name, ep)
        if len(_FOUND) > 64:
            _FOUND.clear()
        _FOUND[key] = out
    return dict(_FOUND[key])


def builtin_entry_points(kind: Kind) -> dict[str, metadata.EntryPoint]:
    """The kind's built-ins as entry points of its group (loaded exactly like a plugin's)."""
    return {name: metadata.EntryPoint(name, target, kind.group) for name, target in kind.builtins.items()}


def registered(kind: Kind) -> dict[str, metadata.EntryPoint]:
    """{name: entry point} of every name of the kind: built-ins first, then installed plugins
    (sorted) whose name no built-in takes."""
    out = builtin_entry_points(kind)
    for name, ep in entry_points(kind.group).items():
        out.setdefault(name, ep)
    return out


def names(kind: Kind) -> list[str]:
    """Every name a config may give for the kind: built-ins first, then installed plugins."""
    return list(registered(kind))


def origin(ep: metadata.EntryPoint) -> str:
    """``built-in`` or ``entry point (<distribution>)``."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return BUILT_IN
    return f"entry point ({dist.metadata['Name'] or dist.name})"


def sources(kind: Kind) -> list[Source]:
    """Where each name comes from, built-ins first; an installed entry point that a built-in of
    the same name hides is listed too, marked as shadowed."""
    out = [Source(name, origin(ep), ep.value) for name, ep in registered(kind).items()]
    for name, ep in entry_points(kind.group).items():
        if name in kind.builtins:
            out.append(Source(name, f"{origin(ep)}, shadowed by the built-in", ep.value))
    return out


def _label(kind: Kind, name: str, ep: metadata.EntryPoint) -> str:
    where = "built-in" if getattr(ep, "dist", None) is None else "entry point"
    return f"{kind.what} {name!r} ({where} {ep.value})"


def lookup(kind: Kind, name: str, key: str | None = None) -> type:
    """The class (or, for a kind with ``factories``, the callable) registered as ``name``:
    imported now, checked against the kind's base. Every problem is a ConfigError under ``key``
    (default ``kind.key``): an unknown name with a "did you mean" hint over the known names, a
    plugin that fails to load or is not a subclass naming its entry point."""
    key = key or kind.key or kind.group
    eps = registered(kind)
    if not isinstance(name, str) or name not in eps:
        known = list(eps)
        listed = ", ".join(known) or "none installed"
        raise ConfigError(key, f"unknown {kind.what} {name!r}{did_you_mean(name, known)} (known: {listed})")
    ep = eps[name]
    label = _label(kind, name, ep)
    try:
        with plugin_call(label, "its import"):  # sys.exit while imported: a PluginError naming it
            obj = ep.load()
    except PluginError as exc:
        raise ConfigError(key, str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - a broken plugin is named, not a traceback
        raise ConfigError(key, f"{label} failed to load: {exc}") from None
    if kind.factories and callable(obj) and not isinstance(obj, type):
        return obj
    return check_class(obj, kind.base, key, label)


def import_class(target: str, base: type, key: str, what: str) -> type:
    """The class at ``"pkg.module:Class"`` or ``"pkg.module.Class"`` (a Hydra ``_target_``), a
    subclass of ``base``."""
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
