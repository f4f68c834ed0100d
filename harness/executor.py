"""Where the expensive parts of a build run: in this process (``local``) or as Ray tasks.

Why an executor, and why Ray: the base table's shards and an arm block's chunks are independent
pieces (a piece's numbers depend only on its own inputs), so a cluster can compute them at once.
Ray schedules them with declared resources (``num_cpus``, ``num_gpus``), retries a piece whose
worker died (``max_retries``), and moves the shared inputs (the dataset, the encoder's settings)
to each node once. The driver, this process, keeps every write: each finished piece is written
and verified by the same code as a local build, under the same content-addressed key, so a local
rerun reuses it and the table's numbers do not depend on the executor.

The contract of a piece's function ``fn(*shared, *item)``: a pure function of its arguments (no
global state read, nothing written); it runs in another process, maybe on another machine, so
its arguments and result must pickle. Models inside ``shared`` are loaded where the piece runs,
once per worker process (each worker keeps the shared objects it has unpickled: ``_shared_here``).

Numbers: a model's last float digits depend on how many threads compute it, so a task runs with
as many torch threads as CPUs it declares (``executor.num_cpus``), and Ray schedules no more
declared CPUs on a node than it has (it does not pin cores). The default, ``auto``, declares this
process's torch thread count and gives the worker's BLAS and OpenMP pools this process's sizes:
a Ray build's files then equal a local build's on this machine, timings aside (measured: tasks
left at Ray's one OpenMP thread per CPU moved floats in the 7th digit). With ``num_cpus: N``
every pool runs N threads: the files equal a local build run with ``OMP_NUM_THREADS=N``. A
worker on another kind of CPU computes within the cross-CPU tolerance of docs/reproducibility.md.

``executor=local`` (the default) is the loop the harness always ran, in order.
``executor=ray`` connects to ``executor.address`` (``auto``: the cluster this machine belongs
to, e.g. started with ``ray start --head``; ``local``: a Ray started inside this process) and
yields each finished piece as it arrives. Ray is imported only then: it stays optional.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from harness.errors import ConfigError, HarnessError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutorSettings:
    """``conf/executor/*.yaml``, checked (``settings_of``)."""

    name: str = "local"
    address: str = "auto"
    num_cpus: float | str = "auto"  # auto: this process's torch thread count (``task_threads``)
    num_gpus: float = 0.0
    max_retries: int = 3

    def task_threads(self) -> int:
        """The threads a task runs with (torch, BLAS, OpenMP): the CPUs it declares, at least 1;
        ``auto`` declares as many CPUs as this process runs threads."""
        if self.num_cpus == "auto":
            return local_threads()
        return max(1, int(self.num_cpus))


def local_threads() -> int:
    """The intra-op threads a local build runs here: torch's count (its default: the cores)."""
    import torch

    return int(torch.get_num_threads())


# what one task may declare (Ray's own limits are the cluster's; these catch a typo'd zero too many)
MAX_RESOURCES = {"num_cpus": 1024, "num_gpus": 64, "max_retries": 100}


def settings_of(cfg: Mapping | None) -> ExecutorSettings:
    """The ``executor`` config node, checked: one line naming the key on a bad value."""
    cfg = dict(cfg or {})
    name = str(cfg.get("name", "local"))
    if name not in EXECUTORS:
        raise ConfigError("executor.name", f"must be one of {list(EXECUTORS)}, got {name!r}")
    address = cfg.get("address", "auto")
    if not isinstance(address, str) or not address.strip():
        raise ConfigError("executor.address", f"must be 'auto', 'local' or host:port, got {address!r}")

    def number(key: str, default: float, minimum: float, strict: bool) -> float:
        value = cfg.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ConfigError(f"executor.{key}", f"must be a number, got {value!r}")
        if value < minimum or (strict and value == minimum) or value > MAX_RESOURCES[key]:
            raise ConfigError(f"executor.{key}", f"must be {'>' if strict else '>='} {minimum:g} and at most "
                                                 f"{MAX_RESOURCES[key]:g}, got {value!r}")
        return float(value)

    retries = cfg.get("max_retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RESOURCES["max_retries"]:
        raise ConfigError("executor.max_retries", f"must be an integer in [0, {MAX_RESOURCES['max_retries']}], got {retries!r}")
    cpus = cfg.get("num_cpus", "auto")
    return ExecutorSettings(name=name, address=address.strip(),
                            num_cpus="auto" if cpus == "auto" else number("num_cpus", 1.0, 0.0, True),
                            num_gpus=number("num_gpus", 0.0, 0.0, False), max_retries=retries)


class LocalExecutor:
    """Every piece in this process, in order (the harness's original loop)."""

    name = "local"

    def map(self, fn: Callable, items: Sequence[tuple], shared: tuple = ()) -> Iterator[tuple[int, Any]]:
        for i, item in enumerate(items):
            yield i, fn(*shared, *item)


# ---- Ray ------------------------------------------------------------------------------------
_SHARED_HERE: dict[str, tuple] = {}  # in a Ray worker: the shared objects it has unpickled, by object id


def _shared_here(ref) -> tuple:
    """The shared objects of a build in this worker process, unpickled once: a model they load is
    loaded once per worker, not once per piece."""
    import ray

    key = ref.hex()
    if key not in _SHARED_HERE:
        _SHARED_HERE.clear()  # one build's objects at a time
        _SHARED_HERE[key] = ray.get(ref)
    return _SHARED_HERE[key]


def run_piece(fn: Callable, shared_ref: list, item: tuple, threads: int, pools: Mapping[str, int] | None) -> Any:
    """A piece on a Ray worker (``shared_ref`` is wrapped in a list so that Ray passes the
    reference, not the object: the worker resolves it once, ``_shared_here``), run with
    ``threads`` torch threads and ``pools`` native threads (``use_threads``)."""
    use_threads(threads, pools)
    return fn(*_shared_here(shared_ref[0]), *item)


def use_threads(threads: int, pools: Mapping[str, int] | None = None) -> None:
    """torch's intra-op threads set to ``threads``; the native pools (BLAS, OpenMP) to ``pools``
    (their sizes by kind, as ``pool_threads`` reads them), else to ``threads`` as well."""
    import numpy  # noqa: F401 - its BLAS loaded before the limit is set
    import torch
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=dict(pools) if pools else threads)
    if torch.get_num_threads() != threads:  # after the pools: torch's OpenMP pool is one of them
        torch.set_num_threads(threads)


def pool_threads() -> dict[str, int]:
    """This process's native thread pools by kind (``blas``, ``openmp``): their sizes."""
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_info

    sizes: dict[str, int] = {}
    for pool in threadpool_info():
        sizes.setdefault(str(pool["user_api"]), int(pool["num_threads"]))
    return sizes


class RayExecutor:
    """Each piece a Ray task with the declared resources, retried ``max_retries`` times when its
    worker dies; results yielded as they finish (the caller writes them)."""

    name = "ray"

    def __init__(self, settings: ExecutorSettings):
        self.settings = settings

    def _connect(self):
        try:
            import ray
        except ImportError:
            raise ConfigError("executor.name", "ray needs the ray package (pip install 'ray[default]')") from None
        if not ray.is_initialized():
            address = None if self.settings.address == "local" else self.settings.address
            if address not in (None, "auto"):
                _reachable(address)  # ray.init retries an unreachable address for minutes
            import signal
            import threading

            main = threading.current_thread() is threading.main_thread()
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
            try:
                ray.init(address=address, log_to_driver=False, include_dashboard=False,
                         runtime_env={"env_vars": _worker_env(self.settings.task_threads())}, configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError("executor.address", f"cannot connect to a Ray cluster at "
                                  f"{self.settings.address!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                                  " (start one with `ray start --head`, or give host:port)") from None
            finally:
                # ray.init installs its own SIGTERM handler (SystemExit(15)): the harness's stays,
                # so a stopped build still ends with its one line and 143
                for sig, handler in handlers.items():
                    if handler is not None and signal.getsignal(sig) is not handler:
                        signal.signal(sig, handler)
        return ray

    def map(self, fn: Callable, items: Sequence[tuple], shared: tuple = ()) -> Iterator[tuple[int, Any]]:
        if not items:
            return
        ray = self._connect()
        threads = self.settings.task_threads()
        cpus = threads if self.settings.num_cpus == "auto" else self.settings.num_cpus
        _fits_a_node(ray, cpus, self.settings.num_gpus)
        remote = ray.remote(run_piece).options(
            num_cpus=cpus, num_gpus=self.settings.num_gpus,
            max_retries=self.settings.max_retries, retry_exceptions=False, name=f"route-bench:{fn.__name__}")
        shared_ref = ray.put(tuple(shared))
        # auto: the worker's pools as large as this process's (a local build's), else all N
        pools = pool_threads() if self.settings.num_cpus == "auto" else None
        pending = {remote.remote(fn, [shared_ref], tuple(item), threads, pools): i for i, item in enumerate(items)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                        if isinstance(cause, HarnessError):
                            raise cause from None
                        raise HarnessError(f"a Ray task of {fn.__name__} failed: "
                                           f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}") from None
                    except ray.exceptions.RayError as exc:  # its worker or node died, out of memory, ...
                        raise HarnessError(f"a Ray task of {fn.__name__} failed after {self.settings.max_retries} "
                                           f"retries (executor.max_retries): {type(exc).__name__}: "
                                           f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
                    yield i, result
        finally:
            for ref in pending:  # stopped early (an error, Ctrl-C): nothing is left running
                ray.cancel(ref, force=True)


def _fits_a_node(ray, cpus: float, gpus: float) -> None:
    """One line instead of a build that waits for good: a task asks for more CPUs or GPUs than
    any live node of the cluster has (Ray would keep it pending)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    most_cpus = max((r.get("CPU", 0.0) for r in nodes), default=0.0)
    most_gpus = max((r.get("GPU", 0.0) for r in nodes), default=0.0)
    if cpus > most_cpus:
        raise ConfigError("executor.num_cpus", f"each task asks for {cpus:g} CPUs, and the largest node of the "
                          f"cluster has {most_cpus:g}; set executor.num_cpus={int(most_cpus) or 1} or lower "
                          "(auto asks for this process's torch threads)")
    if gpus > most_gpus:
        raise ConfigError("executor.num_gpus", f"each task asks for {gpus:g} GPUs, and the largest node of the "
                          f"cluster has {most_gpus:g}")


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that accepts a TCP connection, else one line."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("executor.address", f"must be 'auto', 'local' or host:port, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError("executor.address", f"no Ray cluster answers at {address} ({exc.strerror or exc}); "
                          "start one with `ray start --head`, or give its head's host:port") from None


def _worker_env(threads: int) -> dict:
    """What a worker needs to import the harness the driver runs (its source folder on the path,
    for a checkout that is not installed), the cache folder (models), and OpenMP's thread count
    (read when a process starts: Ray would give one thread per declared CPU otherwise)."""
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": root + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": str(threads),
            **forwarded_env()}


FORWARDED_ENV = ("HARNESS_CACHE_DIR", "MLFLOW_TRACKING_URI")


def forwarded_env() -> dict[str, str]:
    """The driver's settings a process on another node must share: the cache folder (tables,
    models) and the tracking URI a job falls back to. Only those set here: an unset one keeps
    each node's own default. A Ray worker inherits its raylet's environment, not the driver's,
    so the builds and the cluster launcher (``${route_bench.forwarded_env:}`` in
    conf/hydra/launcher/ray_cluster.yaml) hand these over explicitly."""
    from pathlib import Path

    env = {var: os.environ[var] for var in FORWARDED_ENV if os.environ.get(var)}
    if "HARNESS_CACHE_DIR" in env:  # a relative folder would mean each worker's own working folder
        env["HARNESS_CACHE_DIR"] = str(Path(env["HARNESS_CACHE_DIR"]).expanduser().resolve())
    return env


def make_executor(cfg: Mapping | None):
    """The executor a config asks for (``executor`` node; None: local)."""
    settings = settings_of(cfg)
    return RayExecutor(settings) if settings.name == "ray" else LocalExecutor()
