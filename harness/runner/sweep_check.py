"""Every job of a sweep composed and validated before anything is tracked.

Hydra composes a job only when it launches it, so a mistyped sweep value (``policy=ridge,ridgee``)
would surface after the parent run and the first jobs exist. The sweep callback
(``harness.runner.sweep``) calls ``validate_sweep_jobs`` first: each job's override list (the
basic sweeper's expansion, ``harness.console.sweep_jobs``) is composed by Hydra's own loader as
the launcher will, validated (``harness.config.validation.validate``) and resolved, and the first
bad job ends the sweep in one line naming the key and value (``ConfigError``, exit 2).
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf


def sweeper_params(config: DictConfig) -> dict:
    """``hydra.sweeper.params`` as given (unresolved), {} when there are none."""
    params_node = OmegaConf.select(config, "hydra.sweeper.params")
    return OmegaConf.to_container(params_node, resolve=False) if params_node is not None else {}


def _culprit(job: list[str], exc: BaseException, good: list[list[str]]) -> tuple[str, str] | None:
    """(key, value) of the override that breaks a job: one named in the error, else the one
    whose change turns a composable job into this one; None if it cannot be told."""
    items = [item for item in job if not item.partition("=")[0].lstrip("+~").startswith("hydra")]
    return _named_in_error(items, f"{exc} {exc.__cause__ or ''}") or _changed_from_good(items, job, good)


def _named_in_error(items: list[str], text: str) -> tuple[str, str] | None:
    for item in items:
        key, _, value = item.partition("=")
        key = key.lstrip("+~")
        if item in text or f"{key.replace('.', '/')}/{value}" in text or f"'{key}'" in text:
            return key, value
    return None


def _changed_from_good(items: list[str], job: list[str], good: list[list[str]]) -> tuple[str, str] | None:
    for item in items:
        rest = [o for o in job if o != item]
        key = item.partition("=")[0]
        for other in good:
            if [o for o in other if o.partition("=")[0] != key] == rest and len(other) == len(job):
                k, _, v = item.partition("=")
                return k.lstrip("+~"), v
    return None


class _ValidationProgress:
    """A stdout line while a large sweep is validated (a few ms a job: 3,000 jobs take a minute
    and a half): one at the start, then one every ``every_s`` seconds."""

    MIN_JOBS = 200

    def __init__(self, n_jobs: int, every_s: float = 5.0, clock=None):
        import time

        self.n, self.every_s, self.clock = n_jobs, every_s, clock or time.monotonic
        self.last = self.clock()
        if n_jobs >= self.MIN_JOBS:
            print(f"[route-bench] validating {n_jobs} sweep jobs before any run starts ...", flush=True)

    def tick(self, done: int) -> None:
        """Called before job ``done`` (1-based) is validated."""
        if self.n < self.MIN_JOBS:
            return
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            print(f"[route-bench] validated {done - 1}/{self.n} sweep jobs", flush=True)


def validate_sweep_jobs(config: DictConfig) -> int | None:
    """Compose and validate every job of the sweep before anything is tracked.

    Each job's override list comes from ``harness.console.sweep_jobs`` (the basic sweeper's
    expansion) and is composed by Hydra's own config loader exactly as the launcher will
    (``load_sweep_config``), then checked by ``harness.config.validation.validate`` and resolved.
    Every swept value is tried first, in the first job that holds it (``_first_of_each_value``):
    a bad value (``experiment=smoke,nonexistent``) is refused after a few jobs, not after all of
    them. The first job that fails raises ConfigError naming the key and value
    (``policy=ridgee``); two jobs whose configs are equal (``seed=0,00``) raise one naming the key.
    Returns each distinct job's resolved config by its override list (``check_applicable``
    reads them), or None when the sweep cannot be expanded here (another sweeper's syntax: each
    job then validates itself).
    """
    check_workers(config)
    jobs = _sweep_job_lists(config)
    if jobs is None:
        return None
    first = _first_of_each_value(jobs)
    checked = _JobCheck(config, len(jobs))
    for batch in (first, jobs):  # every value once; then (all of them good) every job
        for job in batch:
            checked.compose(job)
        checked.raise_first_bad(batch)
    return checked.plains


COMPOSITIONS_KEPT = 4096  # job configs kept per sweep (a few hundred kB each)


def keep_compositions(loader) -> None:
    """Hydra's basic sweeper composes each job twice more after this validation composed it
    (its batch check, switched off by ``skip_hydra_revalidation``, then the launcher), at about
    0.1 s each on a 2-core machine: the loader's ``load_sweep_config`` keeps each composition by
    what it reads (the master config, the same object, its config name and Hydra overrides, the
    job's overrides) and hands out deep copies (a few ms; the launcher writes into its copy). In
    one process nothing else changes it: the same files, the same overrides."""
    import copy

    if getattr(loader, "_route_bench_kept", None) is not None:
        return
    compose = loader.load_sweep_config
    kept: dict[tuple, tuple[DictConfig, DictConfig]] = {}

    def load_sweep_config(master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        # all the composition reads: the master's config name and Hydra overrides (the sweep adds
        # the state file's to them), the job's overrides
        key = (id(master_config), str(master_config.hydra.job.config_name),
               tuple(OmegaConf.to_container(master_config.hydra.overrides.hydra)), tuple(sweep_overrides))
        hit = kept.get(key)
        if hit is None or hit[0] is not master_config:
            hit = (master_config, compose(master_config, sweep_overrides))
            if len(kept) >= COMPOSITIONS_KEPT:
                kept.pop(next(iter(kept)))
            kept[key] = hit
        return copy.deepcopy(hit[1])

    loader.load_sweep_config = load_sweep_config
    loader._route_bench_kept = kept


def _first_of_each_value(jobs: list[list[str]]) -> list[list[str]]:
    """The jobs that hold a value no earlier job holds, in launch order (a few per swept key)."""
    seen: set[str] = set()
    first = []
    for job in jobs:
        if any(item not in seen for item in job):
            first.append(job)
            seen.update(job)
    return first


class _JobCheck:
    """Each distinct job composed (Hydra's loader, as the launcher will), validated and
    resolved once: its error or None in ``outcome``; the digest of its config in ``digests``."""

    def __init__(self, config: DictConfig, n_jobs: int):
        from hydra.core.global_hydra import GlobalHydra

        self.config = config
        self.loader = GlobalHydra.instance().config_loader()
        keep_compositions(self.loader)
        self.outcome: dict[tuple[str, ...], BaseException | None] = {}
        self.digests: dict[str, tuple[str, ...]] = {}
        self.plains: dict[tuple[str, ...], dict] = {}  # each good job's resolved config
        self.progress = _ValidationProgress(n_jobs)

    def compose(self, job: list[str]) -> None:
        from harness import app
        from harness.config.validation import validate
        from harness.io import digest_of

        if tuple(job) in self.outcome:
            return
        self.progress.tick(len(self.outcome) + 1)
        try:
            cfg = self.loader.load_sweep_config(self.config, list(job))
            validate(cfg)
            plain = app.to_plain(cfg)  # resolves every interpolation
        except Exception as exc:  # noqa: BLE001 - reported by _bad_job, naming the value
            self.outcome[tuple(job)] = exc
            return
        self.outcome[tuple(job)] = None
        self.plains[tuple(job)] = plain
        twin = self.digests.setdefault(digest_of(plain), tuple(job))
        if twin != tuple(job):
            raise _same_job_twice(list(twin), job)

    def raise_first_bad(self, batch: list[list[str]]) -> None:
        good = [list(j) for j, e in self.outcome.items() if e is None]
        for job in batch:
            exc = self.outcome.get(tuple(job))
            if exc is not None:
                raise _bad_job(list(job), exc, good) from exc


def _same_job_twice(first: list[str], second: list[str]):
    """The ConfigError of two jobs whose configs are equal once parsed (``seed=0,00``,
    ``cost.c=0.02,2e-2``): the key and both values, as a value given twice is refused."""
    from harness.errors import ConfigError

    old = [item for item in first if item not in second]
    new = [item for item in second if item not in first]
    if len(new) == 1 and len(old) == 1 and old[0].partition("=")[0] == new[0].partition("=")[0]:
        key = new[0].partition("=")[0].lstrip("+~")
        a, b = old[0].partition("=")[2], new[0].partition("=")[2]
        return ConfigError(key, f"sweeps the value {b!r} twice ({old[0]} and {new[0]} give the same job config: equal "
                                "once parsed); give each value once")
    return ConfigError("(sweep)", f"two jobs have the same config ({' '.join(old)} and {' '.join(new)}): the same "
                                  "job twice; sweep each value once")


def check_workers(config: DictConfig) -> None:
    """``hydra.launcher.n_jobs``: an integer in [1, MAX_WORKERS], or joblib's negative count."""
    from harness.config.limits import MAX_WORKERS
    from harness.errors import ConfigError

    workers = OmegaConf.select(config, "hydra.launcher.n_jobs", default=None)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers == 0
                                or not -MAX_WORKERS <= workers <= MAX_WORKERS):
        raise ConfigError("hydra.launcher.n_jobs", f"must be an integer in [1, {MAX_WORKERS}] (or joblib's "
                                                   f"negative count from the CPUs), got {workers!r}")


def _sweep_job_lists(config: DictConfig) -> list[list[str]] | None:
    """Every job's override list, None when this process cannot expand or compose them."""
    from hydra.core.global_hydra import GlobalHydra

    from harness.config.limits import MAX_SWEEP_JOBS
    from harness.console import sweep_jobs
    from harness.errors import ConfigError

    try:
        loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
        jobs = sweep_jobs(list(config.hydra.overrides.task), sweeper_params(config), loader)
    except ConfigError:  # too many jobs, counted before expanding them
        raise
    except Exception:  # noqa: BLE001 - not the basic sweeper's syntax
        return None
    if not GlobalHydra.instance().is_initialized():
        return None
    if len(jobs) > MAX_SWEEP_JOBS:
        raise ConfigError("(sweep)", f"{len(jobs)} jobs; at most {MAX_SWEEP_JOBS} in one sweep (split it, e.g. "
                                     "seed=range(0,1000) then seed=range(1000,2000))")
    return jobs


def _bad_job(job: list[str], exc: BaseException, good: list[list[str]]):
    """The ConfigError naming the key and value that break ``job`` (or the job, if none can be told)."""
    from harness.config.bad_input import as_bad_input
    from harness.errors import ConfigError

    explained = as_bad_input(exc, job)  # Hydra's errors said as the key they concern
    if isinstance(explained, ConfigError):
        where = f"{explained.problem}; sweep job {' '.join(job)}"
    else:
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [type(exc).__name__]
        detail = lines[0]
        if exc.__cause__ is not None and str(exc.__cause__).strip():
            detail += f" ({str(exc.__cause__).strip().splitlines()[0]})"
        where = f"{type(exc).__name__}: {detail}; sweep job {' '.join(job)}"
    found = _culprit(job, exc, good)
    if found is not None:
        key, value = found
        return ConfigError(key, f"bad sweep value {value!r}: {where}")
    return ConfigError("(sweep)", f"a job cannot be composed: {where}")


def skip_hydra_revalidation() -> None:
    """Hydra's sweeper composes every job once more before launching it, only to see that it
    composes (``Sweeper.validate_batch_is_legal``). ``validate_sweep_jobs`` has just composed
    them all with the same loader and validated them, so the second pass is switched off for
    this process: it cost a third of a sweep's overhead (about 60 ms a job)."""
    from hydra.plugins.sweeper import Sweeper

    Sweeper.validate_batch_is_legal = lambda self, batch: None  # type: ignore[method-assign]


def _named_on_command_line(config: DictConfig) -> bool:
    """Whether the command line chose or configured the policy (``policy=...``,
    ``policy.features=...``), not only the experiment's preset."""
    keys = [str(o).partition("=")[0].lstrip("+~") for o in config.hydra.overrides.task]
    return any(k == "policy" or k.startswith("policy.") for k in keys)


def check_applicable(config: DictConfig, jobs: dict[tuple[str, ...], dict], plain: dict, task) -> dict[tuple, str]:
    """{job: why it is not applicable} over the sweep's jobs that read its table (``task``, built
    from ``plain``), before anything is tracked (``harness.preflight.not_applicable``).

    The rule (docs/own_arms.md): a job of the preset's policy list (``experiment``) whose policy
    reads what the table lacks is skipped and listed; when the command line names or configures
    the policy (``policy=...``, ``policy.features=...``) such a job is a ConfigError naming
    ``policy`` (the user asked for it), and so is a sweep in which no job applies. Jobs of another table (a swept dataset) check themselves when they run."""
    from harness.app import table_config_digest
    from harness.errors import ConfigError
    from harness.io import digest_of
    from harness.preflight import not_applicable
    from policies.registry import display_name, make_policy

    digest = table_config_digest(plain)
    reasons: dict[str, str | None] = {}  # by the policy config's digest: each policy made once
    out: dict[tuple, str] = {}
    mine = [(job, cfg) for job, cfg in jobs.items() if table_config_digest(cfg) == digest]
    for job, cfg in mine:
        key = digest_of(cfg["policy"])
        if key not in reasons:
            try:
                reasons[key] = not_applicable(make_policy(dict(cfg["policy"])), task, display_name(cfg["policy"]))
            except Exception:  # noqa: BLE001 - a policy that cannot be made says so in its own job
                reasons[key] = None
        if reasons[key] is not None:
            out[job] = str(reasons[key])
    if out and _named_on_command_line(config):
        raise ConfigError("policy", f"{next(iter(out.values()))}; a policy named on the command line must run on the "
                                    "table (only the preset sweep's policies are skipped)")
    if mine and len(out) == len(mine) == len(jobs):
        raise ConfigError("policy", f"no job of the sweep can run on this table: {next(iter(out.values()))}")
    return out
