"""``python -m harness`` / ``route-bench``: subcommands, else the Hydra app.

``data ...``, ``policies ...``, ``report ...`` and ``table ...`` are dispatched to their modules
(imported lazily, so ``python -m harness policies`` does not pay for MLflow or torch); any other
argument list (``-m``, overrides, ``--cfg job``) goes to the Hydra app unchanged; ``--help``
first prints ``usage()`` (the subcommands and the preset sweep), then Hydra's config help.
"""

from __future__ import annotations

import sys
from typing import Sequence

SUBCOMMANDS = ("data", "policies", "report", "table")

USAGE = """\
usage: python -m harness SUBCOMMAND ...        (route-bench: the same command)
       python -m harness [key=value ...]        one job, all three protocols; prints its summary
       python -m harness -m [key=value ...]     a sweep (Hydra multirun), one line per job

subcommands:
  data NAME [key=value ...]      dataset statistics: qasper_yesno, squad_pooled, qasper path=..., hotpotqa path=...
  table build [key=value ...]    build or reuse the outcome table; per-arm Hit@10, rescues/harms
  policies                       every policy: built-ins and installed plugins
  report --latest --out DIR      Markdown + HTML comparison of a sweep (or --sweep ID), frontier plots

preset sweep (python -m harness -m; experiment=none switches it off, experiment=smoke is tiny):
{sweep}

options (key=value):
  verbose=true                   a sweep prints every job's full summaries (default: one line per job;
                                 the full text is in each Hydra job folder's app.log, next to result.json)
  seed=0,1,2  budget=default,fine  cost.c=...  policy.features=...   sweep any key with -m
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


def table_main(argv: Sequence[str]) -> int:
    """``table [build|show] [overrides...]``: build (or load from cache) the outcome table of the
    composed config (e.g. ``dataset=synthetic``) and print per-arm Hit@10 and extra-vs-base
    rescues/harms."""
    argv = list(argv)
    if argv and argv[0] in ("build", "show"):
        argv = argv[1:]
    if any(a in ("-h", "--help") for a in argv):
        print(table_main.__doc__)
        return 0
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from harness import app

    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=argv)
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra", None)
    table = app.build_table(plain)
    frame = table.frame
    task = app.make_task(plain, table)
    print(f"outcome table {table.key}" + (f"  ({table.path})" if table.path else ""))
    print(f"questions: {len(frame)} rows, {task.n} with evidence, {len(set(task.groups))} documents")
    metric = task.metric
    arms = sorted({c.split(".", 1)[0] for c in frame.columns if c.endswith("." + metric) and not c.startswith("feat.")})
    rows = frame[frame["has_evidence"].astype(bool)] if "has_evidence" in frame.columns else frame
    for arm in arms:
        print(f"  {arm:<12} {metric} = {rows[f'{arm}.{metric}'].astype(float).mean():.4f}")
    delta = task.delta
    print(
        f"{task.extra_arm} vs {task.base_arm}: rescues {int((delta > 0).sum())}, harms {int((delta < 0).sum())}, "
        f"net {int(delta.sum()):+d} on {task.n} questions"
    )
    return 0


def _one_line_errors(command):
    """Bad input ends in one line naming what was wrong and exit code 2, not a traceback
    (``HYDRA_FULL_ERROR=1`` shows the traceback)."""

    def run(argv: Sequence[str]) -> int:
        import os

        from hydra.errors import HydraException

        from harness.errors import HarnessError

        try:
            return command(argv)
        except (HarnessError, HydraException) as exc:
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
            return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        cmd, rest = argv[0], argv[1:]
        if cmd == "data":
            from harness.data.cli import main as sub
        elif cmd == "policies":
            from policies.registry import main as sub
        elif cmd == "report":
            from harness.report import main as sub
        else:
            sub = _one_line_errors(table_main)
        return int(sub(rest) or 0)
    from harness import app

    if any(a in ("-h", "--help") for a in argv):
        print(usage())
        print("== The Hydra app: config groups and the composed config ==")
        sys.stdout.flush()
    sys.argv = [sys.argv[0] if sys.argv else "route-bench", *argv]
    app.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
