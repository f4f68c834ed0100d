"""``python -m harness data power NAME [NAME ...] [key=value ...] [--json]``: what a dataset can decide.

(A module above the app, not in ``harness.data``: it builds outcome tables.)

Why: a routing comparison is only as good as its discordant questions (those where the two arms
of the pair differ). Before a sweep, this prints for each dataset, on its outcome table with the
default arms and reranker (``conf/config.yaml``; built once, or read from the cache):
Hit@10 (the pair's metric) of every arm, the extra arm's rescues (extra hits, base misses) and
harms (the reverse), the minimum detectable difference of extra - base on the whole table
(``harness.stats.min_detectable_difference``, documents as the units) and the questions the exact
sign test needs for 80% power at the observed discordance (``harness.paired.sample_size_plan``).
A held-out split of a share s sees about s times the discordant questions: it needs 1/s times
the questions of the plan.

``key=value`` are Hydra overrides of the composed config (``arms.extra=bm25``,
``dataset.n_questions=200``), applied to every dataset named.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from typing import Any

import numpy as np

from harness.errors import ConfigError, HarnessError, argument_parser, debugging, one_line

ALPHA, POWER = 0.05, 0.8


def power_facts(frame, base: str, extra: str, metric: str) -> dict[str, Any]:
    """The facts above from an outcome table: one row per question, ``doc_id`` its group."""
    from harness.paired import min_reachable_p, sample_size_plan
    from harness.stats import min_detectable_difference

    col_b, col_e = f"{base}.{metric}", f"{extra}.{metric}"
    for col in (col_b, col_e):
        if col not in frame.columns:
            raise ConfigError("arms.metric", f"the outcome table has no column {col!r}")
    b, e = frame[col_b].to_numpy(float), frame[col_e].to_numpy(float)
    diffs, groups = e - b, frame["doc_id"].astype(str).to_numpy()
    arms = sorted({c.split(".", 1)[0] for c in frame.columns if c.endswith(f".{metric}")},
                  key=lambda a: (a not in (base, extra), a != base, a))
    plan = sample_size_plan(diffs, groups, ALPHA, POWER)
    rescues, harms = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    return {
        "questions": int(len(frame)),
        "groups": int(len(set(groups))),
        "metric": metric,
        "base": base,
        "extra": extra,
        "arms": {a: float(frame[f"{a}.{metric}"].mean()) for a in arms},
        "rescues": rescues,
        "harms": harms,
        "difference": float(diffs.mean()),
        "mdd": min_detectable_difference(diffs, groups, ALPHA, POWER),
        "min_reachable_p": min_reachable_p(rescues + harms),
        "questions_for_power": plan["questions"],
        "plan_capped": bool(plan["capped"]),
        "plan_why": plan["why"],
    }


def dataset_power(name: str, overrides: list[str]) -> dict[str, Any]:
    """``power_facts`` of dataset config ``name`` with the default arms, building its table if needed."""
    from omegaconf import OmegaConf

    from harness.app import build_table
    from harness.config.bad_input import as_bad_input
    from harness.config.compose import compose_config

    args = [f"dataset={name}", "experiment=none", *overrides]
    try:
        cfg = OmegaConf.to_container(compose_config(args), resolve=True)
    except Exception as exc:  # noqa: BLE001 - a Hydra error is a bad override or config name
        bad = as_bad_input(exc, args)
        if bad is None:
            raise
        raise bad from None
    t0 = time.perf_counter()
    handle = build_table(cfg)
    arms = cfg.get("arms") or {}
    facts = power_facts(handle.frame, str(arms.get("base", "keep")), str(arms.get("extra", "hybrid")),
                        str(arms.get("metric", "hit@10")))
    facts["dataset"] = name
    facts["table"] = handle.key[:12]
    facts["build_seconds"] = handle.info.get("build_seconds")  # of the cold build, cached or not
    facts["seconds"] = time.perf_counter() - t0
    return facts


def _num(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def format_rows(rows: list[dict[str, Any]]) -> str:
    """One line per dataset, aligned (the README's table is this output)."""
    arms = list(dict.fromkeys(a for r in rows for a in r["arms"]))
    metric = rows[0]["metric"] if rows else "hit@10"
    head = ["dataset", "questions", "groups", *[f"{a} {metric}" for a in arms], "rescues", "harms",
            "extra-base", "MDD", "questions for 80%", "cold build s"]
    body = []
    for r in rows:
        need = r["questions_for_power"]
        need_s = ("-" if math.isnan(need) else (">" if r["plan_capped"] else "") + f"{int(need):,}")
        body.append([r["dataset"], f"{r['questions']:,}", f"{r['groups']:,}",
                     *[_num(r["arms"].get(a, math.nan)) for a in arms], str(r["rescues"]), str(r["harms"]),
                     f"{r['difference']:+.4f}", _num(r["mdd"], 4), need_s,
                     _num(r["build_seconds"], 0) if r["build_seconds"] is not None else "-"])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [head, *body]]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argument_parser(prog="python -m harness data power",
                             description="Per dataset: each arm's metric, the pair's rescues and harms, the minimum "
                                         "detectable difference and the questions needed for 80%% power.")
    parser.add_argument("names", nargs="+", help="dataset config names, then key=value Hydra overrides")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    try:
        try:
            args = parser.parse_intermixed_args(argv)
        except SystemExit as e:
            return int(e.code or 0)
        names = [a for a in args.names if "=" not in a]
        overrides = [a for a in args.names if "=" in a]
        if not names:
            raise ConfigError("dataset", "name at least one dataset config (e.g. qasper_yesno boolq)")
        # a table being built prints its progress; with --json that goes to stderr, so stdout stays JSON
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            rows = [dataset_power(n, overrides) for n in names]
    except HarnessError as e:
        if debugging():
            raise
        print(one_line(e), file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=2) if args.json else "\n".join([format_rows(rows), *plan_notes(rows)]))
    return 0


def plan_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What the "questions for 80%" column sizes, once per pair and metric: the comparison and
    the unit of the plan (a number without them reads as any comparison's)."""
    pairs = dict.fromkeys((r["extra"], r["base"], r["metric"]) for r in rows)
    return [f"questions for 80%: questions (of the whole table; a held-out share s needs 1/s times as many) the exact "
            f"sign test on discordant groups needs for {POWER:.0%} power at alpha {ALPHA:g}, {extra} vs {base} on "
            f"{metric}" for extra, base, metric in pairs]
