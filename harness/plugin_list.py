"""``python -m harness plugins``: every policy, arm block, protocol and dataset, and where each
comes from (built-in, or the installed distribution whose entry point registers it).

Why: a plugin is found by its entry point with no harness edit, so this is where a user checks
that an installed package's plugins are seen, under which names, and which built-in a plugin of
the same name would lose to. Nothing is imported but the kinds' registries: a broken plugin is
listed too (naming it in a config then says why it fails).
"""

from __future__ import annotations

from typing import Sequence

from harness.registry import Kind, Source, sources

COLUMNS = ("kind", "name", "source", "class")


def kinds() -> list[Kind]:
    """The four kinds of plugin, in the order a job uses them."""
    from harness.arm_blocks import ARM_BLOCKS
    from harness.data.registry import DATASETS
    from harness.protocols.registry import PROTOCOLS
    from policies.registry import POLICIES

    return [DATASETS, ARM_BLOCKS, POLICIES, PROTOCOLS]


def _policy_sources() -> list[Source]:
    """Policies: the built-ins are the YAML files of conf/policy (a class and its parameters),
    then the entry points (an entry point named like a YAML file is reached only through
    ``policy=plugin``)."""
    from policies.registry import POLICIES, builtin_policy_configs, shadowed_entry_points

    out = [Source(stem, f"built-in (conf/policy/{stem}.yaml)", str(cfg["_target_"]))
           for stem, cfg in builtin_policy_configs().items()]
    shadowed = shadowed_entry_points()
    for src in sources(POLICIES):
        note = f", shadowed by conf/policy/{src.name}.yaml" if src.name in shadowed else ""
        out.append(src._replace(source=src.source + note))
    return out


def kind_label(kind: Kind) -> str:
    """A kind's one-word label: its entry-point group's last part (datasets, arms, ...)."""
    return kind.group.rsplit(".", 1)[-1]


def rows() -> list[tuple[str, str, str, str]]:
    """(kind, name, source, class) of every registered name, kind by kind."""
    from policies.registry import POLICIES

    out = []
    for kind in kinds():
        found = _policy_sources() if kind is POLICIES else sources(kind)
        out += [(kind_label(kind), s.name, s.source, s.target) for s in found]
    return out


def format_rows(table: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(COLUMNS[:-1])]
    lines = ["  ".join([c.ljust(w) for c, w in zip(COLUMNS[:-1], widths)] + [COLUMNS[-1]])]
    lines += ["  ".join([v.ljust(w) for v, w in zip(r[:-1], widths)] + [r[-1]]) for r in table]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; ``--kind K`` keeps one kind. Bad input raises (UsageError): the entry
    point prints it as one line and exits 2."""
    from harness.errors import UsageError, argument_parser, did_you_mean

    parser = argument_parser(prog="python -m harness plugins",
                             description="List every policy, arm block, protocol and dataset, and where each comes from.")
    parser.add_argument("--kind", default=None, help="only this kind: datasets, arms, policies or protocols")
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    table = rows()
    if args.kind is not None:
        known = [kind_label(k) for k in kinds()]
        if args.kind not in known:
            raise UsageError(f"python -m harness plugins: --kind {args.kind!r} is no kind{did_you_mean(args.kind, known)} "
                             f"(kinds: {', '.join(known)})")
        table = [r for r in table if r[0] == args.kind]
    print(format_rows(table))
    groups = ", ".join(k.group for k in kinds())
    print(f"\na package adds one by an entry point in one of the groups {groups} (docs/datasets.md, "
          "docs/arms.md, docs/policies.md, docs/protocols.md)")
    return 0
