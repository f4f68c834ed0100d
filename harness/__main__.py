"""``python -m harness`` / ``route-bench``: subcommands, else the Hydra app.

``data ...``, ``policies ...``, ``report ...`` and ``table ...`` are dispatched to their modules
(imported lazily, so ``python -m harness policies`` does not pay for MLflow or torch); any other
argument list (``-m``, overrides, ``--cfg job``, ``--help``) goes to the Hydra app unchanged.
"""

from __future__ import annotations

import sys
from typing import Sequence

SUBCOMMANDS = ("data", "policies", "report", "table")


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
            sub = table_main
        return int(sub(rest) or 0)
    from harness import app

    sys.argv = [sys.argv[0] if sys.argv else "route-bench", *argv]
    app.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
