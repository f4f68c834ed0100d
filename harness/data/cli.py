"""``python -m harness data <dataset> [--path P] [--json] [key=value ...]``: dataset statistics.

(``data export`` writes a dataset as BEIR, ``harness.data.export``; ``data power`` prints what
a dataset's outcome table can decide, ``harness.power``, dispatched by ``harness.__main__``:
it builds tables, a layer above the data.)

The first argument names a dataset config, ``conf/dataset/<dataset>.yaml``, found in the app's
config folder (harness/conf_files.py: the repository's ``conf`` folder, or the installed package's
copy of it). Where no such file exists, a registered loader of that name (a plugin's, found by
entry point) gives its config node (``harness.data.registry.config_node``: its options at their
defaults), as ``dataset=<name>`` does in the app. ``key=value`` overrides are parsed like Hydra's
(``max_questions=10``); ``--path P`` is short for ``path=P``.

Prints documents, questions (with evidence), units by kind, evidence strings matched exactly /
fuzzily / not at all, fingerprint and licence, as an aligned table or (``--json``) as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from harness.conf_files import CONF_DIR
from harness.data.base import NO_LICENCE
from harness.data.pool_depth import DEFAULT_RERANK_DEPTH, pool_size_range, question_pool_sizes, same_rerank_set
from harness.errors import ConfigError, HarnessError, UsageError, argument_parser, debugging, did_you_mean, one_line

def conf_dir() -> Path:
    return CONF_DIR


def dataset_config(name: str, overrides: list[str] = ()) -> dict:
    """The dataset config ``name`` (its YAML, else its loader's node) with ``key=value`` overrides."""
    from omegaconf import OmegaConf

    from harness.data.registry import config_node, dataset_names, yaml_names
    from harness.data.synthetic import NOT_A_DATASET

    if name == "synthetic":
        raise ConfigError("dataset", NOT_A_DATASET)
    yaml_path = conf_dir() / "dataset" / f"{name}.yaml"
    if yaml_path.is_file():
        base = OmegaConf.load(yaml_path)
    elif name in dataset_names():
        base = OmegaConf.create(config_node(name))
    else:
        known = sorted((yaml_names(conf_dir()) | set(dataset_names())) - {"synthetic"})
        raise ConfigError("dataset", f"unknown dataset config {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}")
    for ov in overrides:
        if "=" not in ov or not ov.split("=", 1)[0]:
            raise ConfigError("dataset", f"override {ov!r} is not key=value")
    # ``key=`` is an empty string, as in the app (Hydra), never null (which would mean the default)
    key_values = [ov.removeprefix("dataset.") + ("''" if ov.endswith("=") else "") for ov in overrides]
    seen: dict[str, str] = {}
    for kv in key_values:  # the last would win silently (``--path P`` is ``path=P``)
        key = kv.split("=", 1)[0].lstrip("+~").strip()
        if key in seen:
            raise ConfigError(f"dataset.{key}", f"given twice on the command line ({seen[key]} then {kv}); give it once")
        seen[key] = kv
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(key_values))
        return OmegaConf.to_container(merged, resolve=True, throw_on_missing=False)  # type: ignore[return-value]
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or ""
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"dataset.{key}" if key else "dataset", first) from None


def stats_rows(ds) -> list[tuple[str, str]]:
    from harness.data.schema import left_out_said

    s = ds.stats()
    rows = [
        ("dataset", s["dataset"]),
        ("documents", str(s["documents"])),
        ("questions", str(s["questions"])),
        ("  with evidence", str(s["questions_with_evidence"])),
        ("units", str(s["units"])),
    ]
    rows += [(f"  {kind}", str(n)) for kind, n in s["units_by_kind"].items()]
    left_out = left_out_said(s)
    if left_out:  # read from the files but not loaded, by reason: the note a user checks before a sweep
        rows.append(("left out", ""))
        rows += [(f"  {reason}", str(n)) for reason, n in left_out]
    rows.append(("pools", str(s["pools"])))
    rows.append(("  units per question's pool", pool_size_range(ds)))
    rows.append(("evidence strings", str(sum(s["evidence_strings"].values()))))
    rows += [(f"  matched {k}" if k != "unmatched" else "  unmatched", str(v)) for k, v in s["evidence_strings"].items()]
    rows += [(f"option {k}", str(v)) for k, v in sorted(ds.options.items())]
    rows.append(("fingerprint", ds.fingerprint()))
    rows.append(("licence", str(ds.meta.get("licence") or NO_LICENCE)))
    return rows


def format_table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    out = []
    for k, v in rows:
        # right-align numbers so counts line up; left-align text values
        out.append((f"{k:<{width}}  {v:>8}" if v.isdigit() else f"{k:<{width}}  {v}").rstrip())
    return "\n".join(out)


def refuse_unknown_flags(parser, argv: list[str]) -> None:
    """An option the parser does not know is named first (argparse would first complain about a
    missing positional argument, blaming the wrong thing)."""
    known = {s for action in parser._actions for s in action.option_strings}
    for arg in argv:
        if arg == "--":
            return
        if arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit() and arg.split("=", 1)[0] not in known:
            raise UsageError(f"{parser.prog}: unrecognized argument {arg!r} (see {parser.prog} --help)")


def export_main(argv: list[str]) -> int:
    """``python -m harness data export <dataset> --format beir OUT [key=value ...]``."""
    parser = argument_parser(prog="python -m harness data export",
                             description="Write a dataset in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/).")
    parser.add_argument("dataset", help="dataset config name (conf/dataset/<name>.yaml)")
    parser.add_argument("out", help="the folder to write (must not exist)")
    parser.add_argument("--format", choices=["beir"], default="beir", help="output layout (beir)")
    parser.add_argument("--split", default="test", help="the qrels file's split name (default test)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    try:
        refuse_unknown_flags(parser, argv)
        try:
            args = parser.parse_intermixed_args(argv)
        except SystemExit as e:
            return int(e.code or 0)
        from harness.data import load_dataset
        from harness.data.export import export_beir
        from harness.data.qrels import check_split_name

        try:
            check_split_name(args.split, "--split")
        except ConfigError as e:
            raise UsageError(f"{parser.prog}: --split: {e.problem}") from None
        ds = load_dataset(dataset_config(args.dataset, list(args.overrides)), require_evidence=False)
        counts = export_beir(ds, args.out, split=args.split)
    except HarnessError as e:
        if debugging():
            raise
        print(one_line(e), file=sys.stderr)
        return 2
    print(f"{args.out}: {counts['units']} passages, {counts['queries']} queries, {counts['qrels']} qrels "
          f"({counts['left_out']} questions without gold units left out); licence: "
          f"{ds.meta.get('licence') or NO_LICENCE}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["export"]:
        return export_main(argv[1:])
    parser = argument_parser(prog="python -m harness data", description="Dataset statistics.")
    parser.add_argument("dataset", help="dataset config name (conf/dataset/<name>.yaml)")
    parser.add_argument("--path", help="dataset file or folder (same as path=...)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--rerank-depth", type=int, default=DEFAULT_RERANK_DEPTH, metavar="N",
                        help=f"the rerank depth to check the pools against (pipeline.rerank_depth; default "
                             f"{DEFAULT_RERANK_DEPTH}, arms.candidates)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    try:
        refuse_unknown_flags(parser, argv)
        try:
            args = parser.parse_intermixed_args(argv)  # overrides may follow --path
        except SystemExit as e:  # --help: return its code instead
            return int(e.code or 0)
        from harness.data import load_dataset

        if args.rerank_depth < 1:
            raise UsageError(f"{parser.prog}: --rerank-depth must be a positive integer, got {args.rerank_depth}")
        overrides = list(args.overrides) + ([f"path={args.path}"] if args.path else [])
        cfg = dataset_config(args.dataset, overrides)
        # statistics are shown for a dataset without gold evidence too (the app refuses it)
        ds = load_dataset(cfg, require_evidence=False)
    except HarnessError as e:
        if debugging():
            raise
        print(one_line(e), file=sys.stderr)
        return 2
    warning = same_rerank_set(ds, args.rerank_depth)
    if warning:  # before the table is built: the pools alone decide it
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        s = ds.stats()
        sizes = question_pool_sizes(ds)
        s["pool_units"] = {"min": min(sizes, default=0), "max": max(sizes, default=0)}
        s["fingerprint"] = ds.fingerprint()
        s["options"] = dict(ds.options)
        s["licence"] = ds.meta.get("licence")
        s["citation"] = ds.meta.get("citation")
        print(json.dumps(s, indent=2, ensure_ascii=False))
    else:
        print(format_table(stats_rows(ds)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
