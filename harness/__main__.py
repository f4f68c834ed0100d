"""``python -m harness`` / ``route-bench``: subcommands, else the Hydra app.

``data ...``, ``features ...``, ``plugins``, ``policies ...``, ``report ...`` and ``table ...`` are dispatched to their modules
(imported lazily, so ``python -m harness policies`` does not pay for MLflow or torch); any other
argument list (``-m``, overrides, ``--cfg job``) goes to the Hydra app unchanged; ``--help``
first prints ``usage()`` (the subcommands and the preset sweep), then Hydra's config help.

Bad input, in every entry point, ends in ONE line on stderr, ``error: <Kind>: <message>`` naming
the config key, file, field or option (with "did you mean" hints for names), and exit code 2;
no traceback (``run_guarded``). Hydra's composition errors (an unknown config group option, a
typo'd key, bad override syntax) are caught around the Hydra app and said the same way, and a
sweep (``-m``) validates all its jobs before it opens anything
(``harness.runner.sweep_check.validate_sweep_jobs``). ``--debug`` as the
first argument, or ``HYDRA_FULL_ERROR=1``, prints the traceback too. An unexpected failure (a
bug) is one line and exit code 1.
"""

from __future__ import annotations

import sys
from typing import Sequence


def interrupted_line(name: str) -> str:
    """The one line of a command ended by a signal (``name``: "SIGINT (Ctrl-C)", "SIGTERM")."""
    return f"error: Interrupted: {name}; finished work is kept (a table build resumes from its shards)"


INTERRUPTED = interrupted_line("SIGINT (Ctrl-C)")
SUBCOMMANDS = ("data", "features", "plugins", "policies", "report", "results", "table")

USAGE = """\
usage: python -m harness SUBCOMMAND ...        (route-bench: the same command)
       python -m harness [key=value ...]        one job, all three protocols; prints its summary
       python -m harness -m [key=value ...]     a sweep (Hydra multirun), one line per job

subcommands:
  data NAME [key=value ...]      dataset statistics: qasper_yesno, squad_pooled, boolq, qasper path=..., hotpotqa path=...,
                                 beir path=DIR, jsonl questions=F corpus=F, or an installed plugin's name
  data export NAME OUT [k=v ...]  write a dataset in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/)
  data power NAME [NAME ...]     per dataset: each arm's Hit@10, rescues/harms, MDD, questions for 80% power
  table build [key=value ...]    build or reuse the outcome table; per-arm outcome, rescues/harms
                                 (arms=noret_rag: answers from memory vs RAG, by the packaged LLM)
  table export [k=v ...] --out DIR  the table as an outcome-table file (dataset=outcomes reads it),
                                 each ranked arm as a TREC run file, the qrels (docs/own_arms.md)
  features TABLE | key=value ...  an outcome table's feature columns, one line each: name and what it measures
                                 (TABLE: a .parquet / .csv outcome table; overrides: the job's table, built or reused)
  plugins [--kind K]             every dataset, arm block, policy and protocol, and where each comes from
                                 (built-in, or the installed package whose entry point registers it)
  policies                       every policy: built-ins and installed plugins
  report --latest --out DIR      Markdown + HTML comparison of a sweep (or --sweep ID), frontier plots
  results [--out docs/results.md]  the results page of the named experiments (experiment=seed000_keep_hybrid,
                                 seed003_budget_triggers, seed002_rag_gain), the papers' figures beside ours

preset sweep (python -m harness -m; experiment=none switches it off, experiment=smoke is tiny):
{sweep}

errors:
  --debug (first argument)       an error shows its traceback (also HYDRA_FULL_ERROR=1); without it,
                                 bad input is one line "error: <Kind>: <message>" and exit code 2

options (key=value):
  verbose=true                   a sweep prints every job's full summaries (default: one line per job;
                                 the full text is in each Hydra job folder's app.log, next to result.json)
  seed=0,1,2  budget=default,fine  cost.c=...  policy.features=...   sweep any key with -m
  arms=noret_rag protocol=answers   no-retrieval vs RAG, with the cost by router family
  device=cpu|cuda|mps|auto       where the encoder, reranker and in-process generator run (default cpu)
  tracking.uri=...               MLflow store (default sqlite:///mlruns/mlflow.db)

then: mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db
"""


def preset_sweep() -> str:
    """The preset sweep's params (``conf/experiment/default.yaml``) and its number of jobs."""
    from omegaconf import OmegaConf

    from harness import app
    from harness.console import sweep_plan

    node = OmegaConf.load(app.CONF_DIR / "experiment" / "default.yaml")
    params = OmegaConf.to_container(OmegaConf.select(node, "hydra.sweeper.params") or OmegaConf.create({}))
    lines = [f"  {k}: {v}" for k, v in params.items()]
    try:
        n_jobs, swept = sweep_plan([], params)
        lines.append(f"  = {n_jobs} jobs; run names carry the swept keys ({', '.join(swept)})")
    except Exception:  # noqa: BLE001 - the params alone still say it
        pass
    return "\n".join(lines)


def usage() -> str:
    return USAGE.format(sweep=preset_sweep())


def refuse_repeated_keys(overrides: Sequence[str]) -> None:
    """A key given twice on the command line (``policy=ridge policy=logistic``): Hydra keeps the
    last silently; a sweep of both values is ``policy=ridge,logistic``."""
    from harness.errors import ConfigError as Refused

    seen: dict[str, str] = {}
    for item in overrides:
        if "=" not in item or item.startswith("-"):
            continue
        key = item.partition("=")[0].lstrip("+~").strip()
        if key in seen:
            raise Refused(key, f"given twice on the command line ({seen[key]} then {item}); give it once "
                               f"(a sweep over both: -m {key}={seen[key].partition('=')[2]},{item.partition('=')[2]})")
        seen[key] = item


def refuse_undecodable(argv: Sequence[str]) -> str | None:
    """The one error line for an argument that is no valid UTF-8 (Python keeps such bytes as lone
    surrogates: no YAML parser, file name or store can take them), else None."""
    from harness.errors import UsageError, one_line

    for i, arg in enumerate(argv, start=1):
        at = next((k for k, ch in enumerate(arg) if "\ud800" <= ch <= "\udfff"), -1)
        if at >= 0:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            key = arg.partition("=")[0] if "=" in arg[:at] else None
            where = f"the value of {key!r}" if key else f"argument {i}"
            return one_line(UsageError(f"{where} is not valid UTF-8 at character {at}: '{shown}'"))
    return None


def table_main(argv: Sequence[str]) -> int:
    """``table [build|show] [overrides...]``: build (or load from cache) the outcome table of the
    composed config (e.g. ``dataset=synthetic``) and print the outcome metric in use
    (``arms.metric``: hit@10, all@2 on HotpotQA), each arm's mean of it and extra-vs-base
    rescues/harms (questions where extra is better / worse, for a continuous metric too)."""
    argv = list(argv)
    command = "build"
    if argv and argv[0] in ("build", "show", "export"):
        command, argv = argv[0], argv[1:]
    if any(a in ("-h", "--help") for a in argv):
        from harness.runner.table_commands import EXPORT_USAGE

        print(EXPORT_USAGE if command == "export" else table_main.__doc__)
        return 0
    from harness.errors import UsageError

    flags: dict = {}
    if command == "export":
        from harness.runner.table_commands import export_flags

        argv, flags = export_flags(argv)
    for a in argv:
        if "=" not in a or a.startswith("-"):
            usage = "table export [key=value ...] --out DIR" if command == "export" else "table build [key=value ...]"
            raise UsageError(f"table: unexpected argument {a!r}; usage: python -m harness {usage}")
    from harness.config.compose import compose_config
    from harness.config.validation import validate

    refuse_repeated_keys(argv)
    cfg = compose_config(argv)
    validate(cfg)  # before any work, like the app
    from harness.runner.job import Terminated, install_signal_handlers, signal_name
    from harness.runner.process import ending_a_stuck_build, name_of

    install_signal_handlers()  # SIGTERM: one line, exit 143; the finished shards stay for the next build
    try:
        with ending_a_stuck_build(lambda signum: interrupted_line(name_of(signum))):
            if command == "export":
                from harness.runner.table_commands import export_table

                return export_table(cfg, **flags)
            return _build_and_show(cfg)
    except Terminated as exc:
        sys.stdout.flush()
        print(interrupted_line(signal_name(exc)), file=sys.stderr, flush=True)
        return 128 + exc.signum


def _build_and_show(cfg) -> int:
    """The work of ``table build`` once its config is valid."""
    from omegaconf import OmegaConf

    from harness import app

    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    table = app.build_table(plain)
    frame = table.frame
    task = app.make_task(plain, table)
    print(f"outcome table {table.key}" + (f"  ({table.path})" if table.path else ""))
    print(f"questions: {len(frame)} rows, {task.n} with evidence, {len(set(task.groups))} documents")
    metric = task.metric
    kind = "continuous" if task.continuous else "0/1"
    print(f"outcome metric: {metric} ({kind}; arms.metric)")
    arms = sorted({c.split(".", 1)[0] for c in frame.columns if c.endswith("." + metric) and not c.startswith("feat.")})
    rows = frame[frame["has_evidence"].astype(bool)] if "has_evidence" in frame.columns else frame
    for arm in arms:
        print(f"  {arm:<12} {metric} = {rows[f'{arm}.{metric}'].astype(float).mean():.4f}")
    delta = task.delta
    net = f"net {int(delta.sum()):+d}" if not task.continuous else f"mean difference {delta.mean():+.4f}"
    print(
        f"{task.extra_arm} vs {task.base_arm} on {metric}: rescues {int((delta > 0).sum())}, harms "
        f"{int((delta < 0).sum())}, {net} on {task.n} questions"
    )
    from harness.runner.table_commands import show_arms_and_changes

    show_arms_and_changes(table, task, int((plain.get("arms") or {}).get("k", 10)))
    return 0


def _restore_env(name: str, value: str | None) -> None:
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


class _HydraRaises:
    """While active, Hydra's ``run_and_report`` (which prints a long message or a trimmed traceback
    and exits 1 on a composition error) lets the exception through to ``run_guarded``."""

    def __enter__(self):
        try:
            import hydra._internal.utils as hydra_utils
        except ImportError:  # pragma: no cover - other Hydra layouts: Hydra reports as before
            self.module = None
            return self
        self.module, self.saved = hydra_utils, getattr(hydra_utils, "run_and_report", None)
        if self.saved is not None:
            hydra_utils.run_and_report = lambda func: func()
        return self

    def __exit__(self, *exc) -> None:
        if self.module is not None and self.saved is not None:
            self.module.run_and_report = self.saved


def run_guarded(command, argv: Sequence[str], *, debug: bool, overrides: Sequence[str] = ()) -> int:
    """Run one entry point; a bad input ends in ONE stderr line ``error: <Kind>: <message>`` and
    exit 2, an unexpected failure in one line and exit 1. ``debug`` (``--debug``, or
    ``HYDRA_FULL_ERROR=1``) prints the traceback first."""
    import os
    import traceback

    from harness.errors import DEBUG_ENV, one_line

    full = debug or os.environ.get("HYDRA_FULL_ERROR") == "1"
    saved_env, saved_debug, saved_argv = os.environ.get("HYDRA_FULL_ERROR"), os.environ.get(DEBUG_ENV), list(sys.argv)
    if full:  # the app and the subcommands re-raise instead of printing their line
        os.environ["HYDRA_FULL_ERROR"] = "1"
        os.environ[DEBUG_ENV] = "1"
    from harness.config.bad_input import as_bad_input

    try:
        with _HydraRaises():
            return int(command(argv) or 0)
    except SystemExit as exc:
        cause = exc.__cause__
        if exc.code not in (0, None) and cause is not None and as_bad_input(cause, overrides) is not None:
            if full:
                traceback.print_exception(cause)
            return 2  # the sweep callback printed its one line
        if isinstance(exc.code, int) or exc.code is None:
            return int(exc.code or 0)  # the app printed its one line (or argparse --help)
        raise
    except KeyboardInterrupt:  # Ctrl-C in a subcommand (a sweep ends its runs itself): one line
        if full:
            traceback.print_exc()
        sys.stdout.flush()
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line
        bad = as_bad_input(exc, overrides)
        if full:
            traceback.print_exc()
        sys.stdout.flush()
        if bad is not None:
            print(one_line(bad), file=sys.stderr)
            return 2
        print(f"{one_line(exc)} (unexpected; rerun with --debug first for the traceback)", file=sys.stderr)
        return 1
    finally:
        _restore_env("HYDRA_FULL_ERROR", saved_env)
        _restore_env(DEBUG_ENV, saved_debug)
        sys.argv = saved_argv


def app_main(argv: Sequence[str]) -> int:
    """The Hydra app (one job, ``-m`` a sweep); Hydra's own options are checked first."""
    from hydra._internal.utils import get_args_parser

    from harness.runner import job
    from harness.errors import UsageError

    parser = get_args_parser()

    def error(message: str):
        raise UsageError(f"python -m harness: {message} (see python -m harness --help)")

    parser.error = error  # type: ignore[method-assign]
    args = parser.parse_args(list(argv))
    refuse_repeated_keys(args.overrides or [])
    if args.config_dir is not None:  # before Hydra reads a YAML there (a FIFO would block)
        from harness.config.config_dir import check_config_dir

        check_config_dir(args.config_dir)
    if args.help:
        print(usage())
        print("== The Hydra app: config groups and the composed config ==")
        sys.stdout.flush()
    import logging

    # creating a fresh store logs schema migrations at INFO on stderr: noise, not a result
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    sys.argv = [sys.argv[0] if sys.argv else "route-bench", *argv]
    job.main()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``--debug`` (first argument, any entry point) shows the traceback of an error."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = bool(argv) and argv[0] == "--debug"
    if debug:
        argv = argv[1:]
    not_utf8 = refuse_undecodable(argv)
    if not_utf8:
        print(not_utf8, file=sys.stderr)
        return 2
    if argv and argv[0] in SUBCOMMANDS:
        cmd, rest = argv[0], argv[1:]
        if cmd == "data" and rest[:1] == ["power"]:  # builds outcome tables: above the data layer
            from harness.power import main as power_main

            return run_guarded(power_main, rest[1:], debug=debug)
        if cmd == "data":
            from harness.data.cli import main as data_main

            return run_guarded(data_main, rest, debug=debug)
        if cmd == "features":
            from harness.report.features import main as features_main

            return run_guarded(features_main, rest, debug=debug, overrides=[a for a in rest if "=" in a])
        if cmd == "plugins":
            from harness.plugin_list import main as plugins_main

            return run_guarded(plugins_main, rest, debug=debug)
        if cmd == "policies":
            from policies.registry import main as policies_main

            return run_guarded(policies_main, rest, debug=debug)
        if cmd == "report":
            from harness.report.cli import main as report_main

            return run_guarded(report_main, rest, debug=debug)
        if cmd == "results":
            from harness.results.cli import main as results_main

            return run_guarded(results_main, rest, debug=debug)
        return run_guarded(table_main, rest, debug=debug, overrides=[a for a in rest if "=" in a])
    return run_guarded(app_main, argv, debug=debug, overrides=[a for a in argv if "=" in a and not a.startswith("-")])


def entry() -> None:
    """The process's entry point (``python -m harness``, ``route-bench``): ``main()``, then an exit
    whose status no late signal can change (``settle_exit``). SIGTERM and SIGHUP are handled from
    the start (``install_signal_handlers``), so Ctrl-C, SIGTERM or SIGHUP that lands outside a
    command's own guard (while the harness imports, about a second, or between its last line and
    its return) is the same one line and 130 / 143 / 129."""
    from harness.runner.process import Terminated, install_signal_handlers, settle_exit, signal_name

    try:
        install_signal_handlers()
        code = main()
        settle_exit()  # inside the guard: a stop landing as main() returns is said, never a bare death
    except (KeyboardInterrupt, Terminated) as exc:
        settle_exit()  # the line below is the last word, whatever lands next
        sys.stdout.flush()
        print(interrupted_line(signal_name(exc)), file=sys.stderr)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 128 + exc.signum
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
