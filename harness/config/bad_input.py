"""A Hydra / OmegaConf error (or an OS or store error) as the bad input it is: one HarnessError
naming the key, file or option, so every entry point ends it in one line."""

from __future__ import annotations

from typing import Sequence

from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from harness.conf_files import CONF_DIR
from harness.config.compose import compose_config
from harness.errors import ConfigError, HarnessError, StoreError, UsageError, did_you_mean, os_error_message


def _hint_keys(overrides: Sequence[str], full_key: str) -> list[str]:
    """The keys next to ``full_key`` in the config composed without the override that named it."""
    parent = full_key.rpartition(".")[0]
    rest = [o for o in overrides if o.lstrip("+~").partition("=")[0] != full_key]
    try:
        cfg = compose_config(rest)
        node = OmegaConf.select(cfg, parent) if parent else cfg
        return [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    except Exception:  # noqa: BLE001 - only a hint
        return []


def _group_options(group: str, options: Sequence[str] | None) -> list[str]:
    found = {p.stem for p in (CONF_DIR / group).glob("*.yaml")}
    return sorted(found | set(options or ()))


def as_bad_input(exc: BaseException, overrides: Sequence[str] = ()) -> Exception | None:
    """The HarnessError a bad input becomes (naming the key, file or option), else None."""
    if isinstance(exc, HarnessError):
        return exc
    if isinstance(exc, MissingConfigException):
        return _unknown_option(exc)
    if isinstance(exc, OverrideParseException):
        first = (str(exc).splitlines() or [""])[0]
        return UsageError(f"cannot parse override {exc.override!r}: {first} (expected key=value; see hydra.cc override grammar)")
    cause = exc.__cause__ if isinstance(exc, HydraException) else exc
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        return _bad_key(cause, overrides)
    if isinstance(exc, (HydraException, OmegaConfBaseException)):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return UsageError(first)
    if isinstance(exc, OSError):
        return StoreError(os_error_message(exc))
    return _readonly_store(exc)


def _unknown_option(exc: MissingConfigException) -> Exception:
    """A group option (``policy=ridgee``) or a config file Hydra did not find."""
    missing = str(exc.missing_cfg_file or "")
    group, _, option = missing.rpartition("/")
    if group:
        options = _group_options(group, exc.options)
        listed = ", ".join(options) if len(options) <= 12 else f"{len(options)} options in conf/{group}/"
        return ConfigError(group, f"unknown option {option!r}{did_you_mean(option, options)}; choose from {listed}")
    return ConfigError("config", (str(exc).splitlines() or ["config not found"])[0])


def _bad_key(cause: OmegaConfBaseException, overrides: Sequence[str]) -> Exception:
    """An OmegaConf error at a key: a ``???`` left unset, an unknown key (with the keys next to
    it), or a bad value, each named by the full key."""
    key = str(cause.full_key)
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    if isinstance(cause, MissingMandatoryValue):
        return ConfigError(key, f"is required but not set (???); set {key}=...")
    if " not in " in first or "is not in struct" in first:
        name = key.rpartition(".")[2]
        known = _hint_keys(overrides, key)
        listed = f"; known keys here: {', '.join(known)}" if known else ""
        return ConfigError(key, f"unknown key{did_you_mean(name, known)}{listed}")
    return ConfigError(key, first)


def _readonly_store(exc: BaseException) -> Exception | None:
    """SQLite's "attempt to write a readonly database" anywhere in the cause chain (behind
    SQLAlchemy's autoflush text): the store is read-only, said in one line."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if "readonly database" in str(exc).lower() or "read-only file system" in str(exc).lower():
            return StoreError("the tracking store is read-only (SQLite: attempt to write a readonly database); make "
                              "it writable or point tracking.uri elsewhere")
        exc = exc.__cause__ or exc.__context__
    return None
