"""Where policies come from: the built-in Hydra configs and installed entry points.

A policy config is a mapping with ``name`` (the display name, becomes ``Policy.name``),
``_target_`` (a Policy class or factory) and the constructor's parameters. Third-party
packages register a Policy class (or a factory returning one) in the entry-point group
``rag_route_bench.policies``; ``conf/policy/plugin.yaml`` builds one by name:

    _target_: policies.registry.load_entry_point
    plugin: ???            # the entry-point name:  policy=plugin policy.plugin=<name>
    name: ${oc.select:.plugin,plugin}  # display name, defaults to the entry-point name

Any further key is passed to the plugin's constructor (``+policy.<param>=...`` in a sweep).

Installed entry points are also ordinary options of the Hydra group ``policy``:
:func:`register_policy_configs` (called when the harness registers its configs) stores one
ConfigStore node per entry point, ``{name, _target_: load_entry_point, plugin, <constructor
defaults>}``, so ``policy=<entry point name>`` works like a built-in (``-m policy=ridge,<name>``
in one sweep; ``policy.<param>=...`` without ``+`` for a parameter with a default). A YAML file
``conf/policy/<name>.yaml`` wins over an entry point of the same name; such a clash is reported
(a warning, and in ``python -m harness policies``) and the plugin stays reachable as
``policy=plugin policy.plugin=<name>``.
"""

from __future__ import annotations

import logging

import inspect
import sys
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness.errors import ConfigError, HarnessError
from harness.plugin_guard import PluginError, plugin_call
from harness.registry import Kind, entry_points, lookup
from policies.base import Policy
from policies.plugin_calls import constructed, name_plugin_errors

ENTRY_POINT_GROUP = "rag_route_bench.policies"
LOADER_TARGET = "policies.registry.load_entry_point"
# the built-in policies are the YAML files of conf/policy (a config names a class and its
# parameters); installed policies are entry points, found like every plugin (harness.registry)
POLICIES = Kind("policy", ENTRY_POINT_GROUP, Policy, key="policy.plugin", factories=True)


def default_conf_dir() -> Path:
    """The app's ``conf`` folder (the repository's, or the installed package's copy of it)."""
    from harness.conf_files import CONF_DIR

    return CONF_DIR


def _policy_dir(conf_dir: str | Path | None) -> Path:
    base = Path(conf_dir) if conf_dir is not None else default_conf_dir()
    return base / "policy" if (base / "policy").is_dir() else base


def builtin_policy_configs(conf_dir: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """{config name (file stem): config} for every ``policy/*.yaml`` under ``conf_dir``.

    ``conf_dir`` may be the ``conf`` folder or its ``policy`` subfolder (default: the repo's).
    The plugin loader config (``_target_`` = load_entry_point) is not a policy and is left out.
    """
    from omegaconf import OmegaConf

    folder = _policy_dir(conf_dir)
    if not folder.is_dir():
        raise ConfigError("policy", f"no policy config folder at {folder}")
    out: dict[str, dict[str, Any]] = {}
    from harness.data.validate import check_regular
    from harness.errors import DataError

    for path in sorted(folder.glob("*.yaml")):
        try:
            check_regular(path, "policy config file")  # before open: a FIFO would block
        except DataError as exc:
            raise ConfigError(f"policy ({path.name})", exc.problem) from None
        try:
            cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        except Exception as exc:  # yaml syntax errors: the problem and where, in one line
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(f"policy ({path.name})", f"cannot be read: invalid YAML{where}: {problem}") from exc
        if not isinstance(cfg, dict):
            raise ConfigError(f"policy ({path.name})", "is not a mapping")
        for key in ("name", "_target_"):
            if key not in cfg:
                raise ConfigError(f"policy.{key}", f"missing in {path.name}")
        if cfg["_target_"] == LOADER_TARGET:
            continue
        out[path.stem] = cfg
    return out


def entry_point_policies() -> dict[str, EntryPoint]:
    """{entry-point name: EntryPoint} for installed plugins (first one wins on a name clash)."""
    return entry_points(ENTRY_POINT_GROUP)


def _check_params(target: Callable, params: Mapping[str, Any], what: str) -> None:
    """Unknown or missing constructor parameters -> ConfigError naming ``policy.<key>``."""
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):  # builtins without signature: let the call decide
        return
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    named = {
        n: p
        for n, p in sig.parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    if not accepts_any:
        for key in params:
            if key not in named:
                raise ConfigError(f"policy.{key}", f"unknown parameter for {what}; it accepts {sorted(named)}")
    for n, p in named.items():
        if p.default is inspect.Parameter.empty and n not in params:
            raise ConfigError(f"policy.{n}", f"required by {what} but not set")


def _as_policy(obj: Any, what: str) -> Policy:
    if not isinstance(obj, Policy):
        raise ConfigError("policy._target_", f"{what} returned {type(obj).__name__}, not a Policy")
    return obj


def _check_target_is_policy(target: Any, target_path: str) -> None:
    """A ``_target_`` that is a class must be a Policy subclass (a function may be a factory):
    blamed on ``policy._target_``, before its parameters are matched against the wrong class."""
    if inspect.isclass(target):
        if not issubclass(target, Policy):
            raise ConfigError("policy._target_", f"{target_path} is a class but not a Policy (policies.base.Policy "
                                                 "subclass) nor a factory returning one")
    elif not callable(target):
        raise ConfigError("policy._target_", f"{target_path} is a {type(target).__name__}, not a Policy class or factory")


def display_name(policy_cfg: Mapping[str, Any]) -> str:
    """The name a run of ``policy_cfg`` carries: its ``name``, unless that names a conf/policy
    config whose ``_target_`` the job replaced (``policy=always_keep policy._target_=x.Slow``):
    then the class that runs (``Slow``), not the config's name."""
    name = str(policy_cfg.get("name", "policy"))
    target = policy_cfg.get("_target_")
    if not isinstance(target, str) or target == LOADER_TARGET:
        return name
    path = _policy_dir(None) / f"{name}.yaml"
    try:
        from omegaconf import OmegaConf

        declared = OmegaConf.load(path).get("_target_") if path.is_file() else None
    except Exception:  # noqa: BLE001 - only a name
        return name
    if declared is None or str(declared).replace(":", ".") == target.replace(":", "."):
        return name
    return target.replace(":", ".").rsplit(".", 1)[-1] or name


def load_entry_point(plugin: str, **params: Any) -> Policy:
    """Build the policy registered as entry point ``plugin`` with constructor ``params``."""
    if not isinstance(plugin, str) or not plugin:
        raise ConfigError("policy.plugin", f"expected an entry-point name, got {plugin!r}")
    factory = lookup(POLICIES, plugin)  # a Policy subclass or a factory; else a ConfigError naming it
    what = f"entry point {plugin!r} ({entry_point_policies()[plugin].value})"
    _check_params(factory, params, what)
    try:
        made = constructed(lambda: factory(**params), what)
    except HarnessError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise PluginError(f"policy plugin {what}: its constructor raised {type(exc).__name__}: {first}") from exc
    policy = name_plugin_errors(_as_policy(made, what), what)
    if "name" not in vars(policy):
        policy.name = plugin
    return policy


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve interpolations (``${.plugin}``) and reject ``???`` with the key named."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    node = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    for key in node.keys():
        if OmegaConf.is_missing(node, key):
            raise ConfigError(f"policy.{key}", "is required (???) but not set")
    try:
        out = OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as exc:
        raise ConfigError(f"policy.{getattr(exc, 'full_key', '?')}", "is required but not set") from exc
    except OmegaConfBaseException as exc:
        raise ConfigError(f"policy.{getattr(exc, 'full_key', '?')}", str(exc)) from exc
    return dict(out)


def make_policy(cfg: Mapping[str, Any]) -> Policy:
    """Instantiate a policy config (``name``, ``_target_``, params) with Hydra.

    ``name`` is removed before the call and set as ``Policy.name``. For the plugin loader a
    missing ``plugin`` falls back to ``name``. Bad keys raise ConfigError naming ``policy.<key>``.
    """
    from hydra.errors import InstantiationException
    from hydra.utils import get_object, instantiate

    plain = _plain(cfg)
    name = plain.pop("name", None)
    target_path = plain.get("_target_")
    if not isinstance(target_path, str) or not target_path:
        raise ConfigError("policy._target_", "missing: name the Policy class, e.g. policies.learned.RidgePolicy")
    quiet = logging.getLogger("hydra.utils")  # it logs the failed import in 3 lines; ours is one
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with plugin_call(f"policy _target_ {target_path}", "its import"):  # sys.exit while imported
            target = get_object(target_path)
    except PluginError as exc:
        raise ConfigError("policy._target_", str(exc)) from exc
    except Exception as exc:
        root, seen = exc, set()  # Hydra wraps the import error: its first line names the path only
        while (root.__cause__ or root.__context__) is not None and id(root) not in seen:
            seen.add(id(root))
            root = root.__cause__ or root.__context__
        first = (str(root).strip().splitlines() or [""])[0]
        raise ConfigError("policy._target_", f"cannot import {target_path!r}: {type(root).__name__}"
                                             + (f": {first}" if first else "")) from exc
    finally:
        quiet.setLevel(level)
    params = {k: v for k, v in plain.items() if k != "_target_"}
    for key in params:
        if key.startswith("_"):
            raise ConfigError(f"policy.{key}", "Hydra special keys other than _target_ are not supported here")
    if target is load_entry_point:
        if "plugin" not in params:
            if not name:
                raise ConfigError("policy.plugin", "is required: the entry-point name of the plugin policy")
            params["plugin"] = name
    else:
        _check_target_is_policy(target, target_path)
        _check_params(target, params, target_path)
    try:
        obj = constructed(lambda: instantiate({"_target_": target_path, **params}, _convert_="all"), f"_target_ {target_path}")
    except InstantiationException as exc:
        cause = exc.__cause__
        if isinstance(cause, HarnessError):
            raise cause from None
        first = (str(cause or exc).strip().splitlines() or [""])[0]
        raise PluginError(f"policy plugin _target_ {target_path}: its constructor raised "
                          f"{type(cause or exc).__name__}" + (f": {first}" if first else "")) from exc
    policy = _as_policy(obj, target_path)
    if target is not load_entry_point:
        policy = name_plugin_errors(policy, f"_target_ {target_path}")
    if name:
        policy.name = str(name)
    return policy


class PolicyNameClash(UserWarning):
    """An installed policy entry point has the name of a YAML file in conf/policy (the file wins)."""


def _hydra_default(value: Any) -> tuple[bool, Any]:
    """(usable, value) for a constructor default in a config node: plain scalars and lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True, value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return True, list(value)
    return False, None


def entry_point_config(name: str, ep: EntryPoint | None = None) -> dict[str, Any]:
    """The ``policy`` config node of entry point ``name``: the loader plus the constructor's
    parameters with their defaults (``???`` for a required one), so ``policy.<param>=...``
    overrides them. A plugin that cannot be imported gets the bare node (the job then fails
    with the import error, naming the entry point)."""
    node: dict[str, Any] = {"name": name, "_target_": LOADER_TARGET, "plugin": name}
    try:
        factory = (ep or entry_point_policies()[name]).load()
        sig = inspect.signature(factory)
    except Exception:
        return node
    for key, param in sig.parameters.items():
        if key in node or key.startswith("_") or param.kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            continue
        if param.default is inspect.Parameter.empty:
            node[key] = "???"
            continue
        usable, value = _hydra_default(param.default)
        if usable:
            node[key] = value
    return node


def shadowed_entry_points(conf_dir: str | Path | None = None) -> dict[str, Path]:
    """{entry-point name: the conf/policy YAML file of the same name, which wins}."""
    folder = _policy_dir(conf_dir)
    return {name: folder / f"{name}.yaml" for name in entry_point_policies() if (folder / f"{name}.yaml").is_file()}


def register_policy_configs(conf_dir: str | Path | None = None) -> list[str]:
    """Store a ConfigStore node ``policy/<name>`` for every installed policy entry point.

    Returns the entry points registered. An entry point named like a YAML file of the policy
    folder is not registered (the file wins) and is reported by a :class:`PolicyNameClash`
    warning naming both.
    """
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    shadowed = shadowed_entry_points(conf_dir)
    done: list[str] = []
    for name, ep in entry_point_policies().items():
        if name in shadowed:
            warnings.warn(
                f"policy entry point {name!r} ({ep.value}) has the name of {shadowed[name].name} in the policy "
                f"config folder; policy={name} selects that file. Reach the plugin with policy=plugin policy.plugin={name}",
                PolicyNameClash,
                stacklevel=2,
            )
            continue
        store.store(group="policy", name=name, node=entry_point_config(name, ep))
        done.append(name)
    return done


def _describe(policy_or_factory: Any) -> tuple[str, str]:
    trainable = getattr(policy_or_factory, "trainable", "?")
    features = getattr(policy_or_factory, "features", None)
    feats = "?" if features is None else (",".join(features) if features else "-")
    return str(trainable), feats


def list_policies(conf_dir: str | Path | None = None) -> list[dict[str, str]]:
    """One row per available policy: name, source (builtin / entry-point), target, trainable, features."""
    rows: list[dict[str, str]] = []
    for stem, cfg in builtin_policy_configs(conf_dir).items():
        try:
            policy = make_policy(cfg)
            trainable, feats = _describe(policy)
        except HarnessError as exc:
            trainable, feats = "?", f"(error: {exc})"
        rows.append({"name": stem, "source": "builtin", "target": str(cfg["_target_"]), "trainable": trainable, "features": feats})
    shadowed = shadowed_entry_points(conf_dir)
    for ep_name, ep in entry_point_policies().items():
        try:
            policy = load_entry_point(ep_name)
            trainable, feats = _describe(policy)
        except HarnessError:  # needs parameters, or fails to load: still listed
            trainable, feats = "?", "?"
        # the source says how to select it: policy=<name>, unless a YAML file of that name wins
        source = "entry-point(shadowed)" if ep_name in shadowed else "entry-point"
        rows.append({"name": ep_name, "source": source, "target": ep.value, "trainable": trainable, "features": feats})
    return rows


def format_table(rows: Sequence[Mapping[str, str]]) -> str:
    cols = ("name", "source", "target", "trainable", "features")
    widths = {c: max([len(c)] + [len(str(r[c])) for r in rows]) for c in cols[:-1]}
    lines = ["  ".join([c.ljust(widths[c]) for c in cols[:-1]] + [cols[-1]])]
    for r in rows:
        lines.append("  ".join([str(r[c]).ljust(widths[c]) for c in cols[:-1]] + [str(r["features"])]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness policies``: print every built-in and plugin policy. Bad input raises
    (``UsageError``, ``HarnessError``): the entry point prints it as one line and exits 2."""
    from harness.errors import argument_parser

    parser = argument_parser(prog="python -m harness policies", description="List routing policies.")
    parser.add_argument("--conf-dir", default=None, help="config folder holding policy/*.yaml (default: the repo's conf)")
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    if args.conf_dir is not None:
        from harness.errors import UsageError

        folder = _policy_dir(args.conf_dir)
        if not Path(args.conf_dir).is_dir():
            raise UsageError(f"python -m harness policies: --conf-dir {args.conf_dir}: not a folder")
        if not any(folder.glob("*.yaml")):
            raise UsageError(f"python -m harness policies: --conf-dir {args.conf_dir} holds no policy configs "
                             "(expected policy/*.yaml, or *.yaml, each with name and _target_)")
    rows = list_policies(args.conf_dir)
    print(format_table(rows))
    plugins = [r["name"] for r in rows if r["source"] == "entry-point"]
    if plugins:
        print(f"\nentry points are selected like built-ins: policy={plugins[0]}  (or policy=plugin policy.plugin={plugins[0]})")
    for name, path in shadowed_entry_points(args.conf_dir).items():
        print(f"entry point {name!r} is shadowed by {path.name}: policy={name} selects the file; "
              f"policy=plugin policy.plugin={name} selects the plugin")
    return 0


if __name__ == "__main__":  # pragma: no cover - ``python -m harness policies`` is the documented way
    from harness.errors import HarnessError, one_line

    try:
        raise SystemExit(main())
    except HarnessError as exc:
        print(one_line(exc), file=sys.stderr)
        raise SystemExit(2) from None
