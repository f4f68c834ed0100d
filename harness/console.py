"""What a person sees of a sweep: one line per job, run names that carry every swept key, the
full per-job text in the Hydra job's log file, and ``result.json`` in the job's folder.

Why: the default sweep has 44 jobs; printing each job's protocol summaries (about 35 lines)
buries the one thing a person watches, how far the sweep is and what each job scored. The
full text is not lost: it goes to the job's log file (``<hydra job folder>/app.log``), to the
run's ``summary.txt`` and to the run's description in MLflow; ``verbose=true`` prints it too.

The sweep callback knows the whole sweep before any job starts: ``sweep_jobs`` expands the
sweeper's params and the command line's overrides the way Hydra's basic sweeper does (the
callback composes and validates each job from it before the sweep opens its parent run), and
``sweep_plan`` gives the number of jobs and the keys whose values differ between jobs. It hands them, with the sweep's
start time, to every job in the sweep's state file (``harness.runner.sweep_state``); the job
passes them to the functions below as arguments.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from harness.protocols.registry import in_display_order

# keys that change what is printed, never a result: not part of a run name or the sweep id
PRESENTATION_KEYS = ("verbose",)
JOB_LOGGER = "route_bench.job"


# ---- the sweep plan (launching process) ------------------------------------------------------
def _key(key: str) -> str:
    """An override's key without its ``+``/``++``/``~`` prefix."""
    return key.lstrip("+~")


def _ignored(key: str) -> bool:
    return key.startswith("hydra") or key in PRESENTATION_KEYS


def sweep_jobs(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None,
               config_loader: Any = None) -> list[list[str]]:
    """Every job's override list, in launch order, as Hydra's basic sweeper expands a multirun:
    the sweeper's params first, then the command line's overrides (a later override of a key
    replaces an earlier one), the cartesian product of the values. ``config_loader`` (Hydra's,
    when the app runs) expands a glob over a group's options (``policy=glob(*)``). A sweep that
    expands to no job is a ConfigError naming the key that sweeps no value."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [f"{k}={v}" for k, v in (sweeper_params or {}).items()] + [str(o) for o in task_overrides]
    overrides = OverridesParser.create(config_loader=config_loader).parse_overrides(args)
    check_sweep_size(overrides)  # before expanding: seed=range(0,10**9) would fill the memory first
    jobs = [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
    if not jobs:
        _refuse_empty_sweep(overrides)
    return jobs


def _refuse_empty_sweep(overrides: Sequence[Any]) -> None:
    """The ConfigError of a sweep with no job: the key whose values expand to none (an empty
    range, a glob that matches no option)."""
    from harness.errors import ConfigError

    for override in overrides:
        if override.is_sweep_override() and not list(override.sweep_string_iterator()):
            given = getattr(override, "input_line", None) or override.get_value_element_as_str()
            raise ConfigError(str(override.key_or_group), f"sweeps no value ({given} expands to none): the sweep has 0 "
                                                          "jobs; give at least one value")
    raise ConfigError("(sweep)", "the sweep has 0 jobs; give each swept key at least one value")


def _n_values(override: Any) -> int:
    """How many values one parsed override sweeps (1 when it sweeps nothing); a glob or an
    interval counts 1 (the basic sweeper expands a glob over a group's few options)."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    if not override.is_sweep_override():
        return 1
    value = override.value()
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep) and value.step:
        return max(0, math.ceil((value.stop - value.start) / value.step))
    return 1


def _canonical(value: Any) -> Any:
    """A swept value as it compares after parsing: numbers by value (``0``, ``0.0`` and ``0e0``
    are one value), booleans apart from numbers, lists and dicts element by element."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _canonical(v)) for k, v in value.items())))
    return ("text", str(value))


def _refuse_value_twice(key: str, values: Sequence[Any]) -> None:
    """``seed=0,1,0`` or ``cost.c=0,0.0``: the same job twice (the second silently skipped), refused."""
    from harness.errors import ConfigError

    texts = [str(v) for v in values]
    seen: dict[Any, str] = {}
    for text, value in zip(texts, values):
        same = seen.setdefault(_canonical(value), text)
        if same == text and texts.count(text) > 1:
            raise ConfigError(key, f"sweeps the value {text!r} twice ({','.join(texts)}); give each value once")
        if same != text:
            raise ConfigError(key, f"sweeps the value {text!r} twice ({same!r} and {text!r} are equal once parsed; "
                                   f"{','.join(texts)}); give each value once")


def check_sweep_size(overrides: Sequence[Any]) -> None:
    """A ConfigError naming the key that sweeps most when the product of the swept values (the
    number of jobs) is above MAX_SWEEP_JOBS, counted without expanding anything; one naming a
    key that sweeps no value (``seed=range(0,0)``: no job) or a value twice."""
    from harness.config.limits import MAX_SWEEP_JOBS
    from harness.errors import ConfigError

    from hydra.core.override_parser.types import ChoiceSweep

    counts: dict[str, int] = {}
    for override in overrides:  # a later override of a key replaces an earlier one
        key = str(override.key_or_group)
        counts[key] = _n_values(override)
        value = override.value() if override.is_sweep_override() else None
        if isinstance(value, ChoiceSweep):  # seed=0,0: the same job twice, the second one silently skipped
            _refuse_value_twice(key, list(value.list))
    for key, n in counts.items():
        if n == 0:
            raise ConfigError(key, "sweeps no value (an empty range): the sweep has 0 jobs; give at least one value")
    total = 1
    for n in counts.values():
        total *= n
    if total > MAX_SWEEP_JOBS:
        key = max(counts, key=lambda k: counts[k])
        swept = sorted((k for k in counts if counts[k] > 1), key=lambda k: -counts[k])
        product = " x ".join(f"{counts[k]} values of {k}" for k in swept) or f"{counts[key]} values of {key}"
        raise ConfigError(key, f"the sweep has {total} jobs ({product}); at most "
                               f"{MAX_SWEEP_JOBS} in one sweep (split it, e.g. seed=range(0,1000) then "
                               "seed=range(1000,2000))")


def sweep_plan(task_overrides: Sequence[str], sweeper_params: Mapping[str, Any] | None,
               config_loader: Any = None) -> tuple[int, list[str]]:
    """(number of jobs, swept keys in order) of a basic-sweeper multirun (``sweep_jobs``).

    A key is *swept* when its value differs between jobs; Hydra's own keys (launcher, ...) and
    ``verbose`` never count.
    """
    jobs = sweep_jobs(task_overrides, sweeper_params, config_loader)
    values: dict[str, set[str]] = {}
    for job in jobs:
        for item in job:
            key, _, value = item.partition("=")
            if key.startswith("~"):
                continue
            values.setdefault(_key(key), set()).add(value)
    swept = [k for k, v in values.items() if len(v) > 1 and not _ignored(k)]
    return len(jobs), swept


# ---- run names ---------------------------------------------------------------------------------
def _number(x: float) -> str:
    """Short, but never two different floats the same text (``0.0`` -> ``0``, ``0.02``)."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def _select(cfg: Mapping, dotted: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def display_value(cfg: Mapping, key: str, given: str | None) -> str:
    """A swept key's value in a run name: the resolved scalar (floats short), else (a config
    group's option, a list) the text of the job's own override."""
    found, value = _select(cfg, key)
    if found and isinstance(value, bool):
        return str(value).lower()
    if found and isinstance(value, float):
        return _number(value)
    if found and value is None:
        return "null"
    if found and isinstance(value, (int, str)):
        return str(value)
    if given is not None:
        return given
    if found and isinstance(value, Mapping) and "name" in value:
        return str(value["name"])
    return json.dumps(value, separators=(",", ":"), default=str) if found else "?"


def _short_key(key: str) -> str:
    return "c" if key == "cost.c" else key


def run_name(cfg: Mapping, swept: Sequence[str] | None = None, job_overrides: Iterable[str] | None = None) -> str:
    """``<policy> c=<cost> seed=<seed>`` for a single run (``swept`` None); in a sweep the policy
    name plus every swept key, policy keys in parentheses: ``ridge c=0.02``,
    ``ridge(features=qpp) seed=1``, ``plugin(weight=2) budget=fine``."""
    from policies.registry import display_name

    policy = display_name(cfg.get("policy") or {})  # the class that runs when _target_ replaced the config's
    if swept is None:
        cost = cfg["cost"]
        c = f"{float(cost['c']):g}" if cost.get("c") is not None else f"{float(cost['price']):g}/{cost.get('unit')}"
        return f"{policy} c={c} seed={cfg['seed']}"
    given: dict[str, str] = {}
    for item in job_overrides or ():
        key, _, value = str(item).partition("=")
        if not key.startswith("~"):
            given[_key(key)] = value
    inner, outer = [], []
    for key in swept:
        if key == "policy" or _ignored(key):
            continue  # the policy's name leads
        text = display_value(cfg, key, given.get(key))
        if key.startswith("policy."):
            if text != policy:  # policy.plugin / policy.name already named it
                inner.append(f"{key[len('policy.'):]}={text}")
        else:
            outer.append(f"{_short_key(key)}={text}")
    return " ".join([policy + (f"({','.join(inner)})" if inner else ""), *outer])


def cost_note(cost: Mapping, metrics: Mapping[str, float]) -> str | None:
    """How a derived ``cost.c`` came about (``harness.app.resolve_cost``), the first line of the
    run's summary: ``c = 0.00081 (derived: price 0.0001 per ms x 8.1 ms of the extra arm per
    question)``; None for an abstract c."""
    unit = cost.get("unit")
    if unit is None or "cost/derived_c" not in metrics:
        return None
    per_q = metrics[f"cost/marginal_{unit}_per_question"]
    price = metrics[f"cost/price_per_{unit}"]
    where = ", measured on the machine that built the table" if unit == "ms" else ""
    return (f"c = {metrics['cost/derived_c']:.4g} (derived: price {price:g} per {'token' if unit == 'tokens' else unit}"
            f" x {per_q:.4g} {unit} of the extra arm per question{where})")


# ---- headline ----------------------------------------------------------------------------------
def headline_metrics(planned, metrics: Mapping[str, float], metric: str, grid: Sequence[float]) -> dict[str, float]:
    """``headline/...``: what each protocol of the job declares as its headline numbers
    (``Protocol.headline_metrics``), only those the job computed."""
    out: dict[str, float] = {}
    for pp in in_display_order(planned):
        out.update(pp.protocol.headline_metrics(metrics, metric, grid))
    return out


def headline(planned, metrics: Mapping[str, float], metric: str, grid: Sequence[float]) -> str:
    """A few numbers, each labelled with the protocol it comes from (they differ because the
    protocols score other questions: A its held-out set with a frozen threshold, B its
    calibration / test halves at a budget), one part per protocol (``Protocol.job_line``):
    ``A held-out: U=0.7917 hit@10=0.7917 extra=0.375 | B test halves, rho=0.25: U=0.6061``."""
    parts = [line for pp in in_display_order(planned) if (line := pp.protocol.job_line(metrics, metric, grid))]
    return " | ".join(parts) if parts else "done (see the summary)"


# ---- progress ----------------------------------------------------------------------------------
def fmt_duration(seconds: float) -> str:
    from harness.progress import duration

    return duration(seconds)


def job_position(job: Any, n_jobs: int | None = None) -> tuple[int | None, int | None]:
    """(k, N): this job's number from 1 (``hydra.job.num`` + 1) and the sweep's job count."""
    k = None
    if job is not None:
        try:
            k = int(job.job.num) + 1
        except Exception:  # noqa: BLE001 - not a multirun job
            k = None
    return k, (int(n_jobs) if n_jobs is not None else None)


def eta_text(k: int | None, n: int | None, start: float | None, now: float | None = None) -> str:
    """Remaining time of the sweep (its jobs began at epoch ``start``), assuming the remaining
    jobs take as long as the done ones."""
    if k is None or n is None or start is None:
        return "eta ?"
    elapsed = (time.time() if now is None else now) - float(start)
    if k >= n:
        return f"eta 0s, {fmt_duration(elapsed)} in all"
    return f"eta {fmt_duration(elapsed / max(k, 1) * (n - k))}"


def progress_line(job: Any, name: str, text: str, n_jobs: int | None = None, start: float | None = None) -> str:
    """``[k/N] <run name> -> <text>  (eta <time>)``: ``n_jobs`` and ``start`` (epoch seconds)
    from the sweep's state, None where unknown."""
    k, n = job_position(job, n_jobs)
    return f"[{k if k is not None else '?'}/{n if n is not None else '?'}] {name} -> {text}  ({eta_text(k, n, start)})"


# ---- the job's log file and result.json ---------------------------------------------------------
def job_logger() -> logging.Logger:
    """A logger that writes only to the job's log file (Hydra's ``file`` handler on the root
    logger: ``<job folder>/<job name>.log``), never to the console; without Hydra it drops INFO."""
    log = logging.getLogger(JOB_LOGGER)
    log.propagate = False
    log.setLevel(logging.INFO)
    log.handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    return log


def job_dir(job: Any) -> Path | None:
    """The Hydra job's output folder (None outside a Hydra job)."""
    if job is None:
        return None
    try:
        out = job.runtime.output_dir
    except Exception:  # noqa: BLE001
        return None
    return Path(out) if out and Path(out).is_dir() else None


def write_result(job: Any, body: Mapping[str, Any]) -> Path | None:
    """``result.json`` in the Hydra job folder: which MLflow run holds this job's results."""
    folder = job_dir(job)
    if folder is None:
        return None
    from harness.io import atomic_write_text

    target = folder / "result.json"
    atomic_write_text(target, json.dumps(dict(body), indent=1, sort_keys=True, default=str) + "\n")
    return target
