"""Around every call into a plugin's code: the plugin may fail, never take the process over.

Why: a plugin (a policy, a protocol, an arm block, a dataset loader) runs inside a job whose run
must end FINISHED, FAILED or KILLED (``harness.runner.lifecycle``). An ``Exception`` already
ends it FAILED; what a plugin can do besides raising one is what this module covers, so that the
job's own guard sees one of the two kinds of end it knows:

- ``sys.exit(...)`` (SystemExit) or another ``BaseException`` that is neither an interrupt nor a
  stop signal becomes a :class:`PluginError` (an ``Exception``) naming the plugin and the method:
  the run ends FAILED, with one line, and the command exits non-zero whatever code it gave;
- Ctrl-C (KeyboardInterrupt) and a stop signal (SIGTERM, SIGHUP; SIGUSR1 / SIGUSR2 too, while a
  plugin runs) keep propagating as the job's interrupts do, marked with the call they hit
  (:func:`stopped_in`), so the run ends KILLED and the closing line names the plugin;
- a time limit (``limits.fit_s`` / ``limits.score_s`` for a policy's fit and score,
  ``harness.config.limits``): past it the call is interrupted (SIGALRM, in the main thread) and
  is a PluginError naming the plugin, the method and the limit. A call that swallows the
  interruption, or runs outside the main thread (where no timer can interrupt it), is refused
  when it returns if it took longer than the limit;
- the signal handlers the harness installed are put back if the plugin changed them.

- ``os._exit`` called by the plugin's own thread is an error like ``sys.exit`` (``os._exit`` is
  replaced, while any plugin call runs, by a function that raises in a thread running plugin
  code and exits as before in every other thread: the harness's own watchers still end the
  process).

What no guard can catch: SIGKILL, and an exit made in C code (a C extension's ``exit()``), end
the process at once; the run is then ended by the next sweep of the experiment
(``Tracker.end_orphans``), or stays RUNNING.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from harness.errors import HarnessError

# the stop signals the harness handles (harness.runner.process) and those only a plugin would
# send: while a plugin runs, the latter are handled like SIGTERM instead of killing the process
HANDLED_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)
PLUGIN_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGUSR1", "SIGUSR2")) if s is not None)


class PluginError(HarnessError):
    """A plugin raised in, or tried to take over the process from, one of its methods: names the
    plugin, the method and what happened (the traceback is in the run's error.txt)."""


class _TimeUp(BaseException):
    """Raised by the timer inside the plugin's call: not an ``Exception``, so the plugin's own
    ``except Exception`` does not swallow it."""


_LIMITS: dict[str, float] = {}


@contextmanager
def limits_in_force(limits: dict | None) -> Iterator[None]:
    """Within: the time limits of a job's plugin calls, by method (``{"fit": 60.0}``; a method
    not named has no limit). The previous limits are restored afterwards."""
    global _LIMITS
    saved = _LIMITS
    _LIMITS = {str(k): float(v) for k, v in (limits or {}).items() if v is not None}
    try:
        yield
    finally:
        _LIMITS = saved


def limit_of(method: str) -> float | None:
    """The time limit in force for ``method`` (seconds), None when there is none."""
    return _LIMITS.get(method)


def stopped_in(exc: BaseException) -> str:
    """The plugin call an interrupt or stop signal hit (``policy plugin 'x' (...): fit()``), or ""."""
    return str(getattr(exc, "plugin_call", "") or "")


def first_line(exc: BaseException, limit: int = 200) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _is_stop(exc: BaseException) -> bool:
    """Ctrl-C or a stop signal turned into an exception (``harness.runner.process.Terminated``
    carries the signal's number): the job ends KILLED."""
    return isinstance(exc, KeyboardInterrupt) or isinstance(getattr(exc, "signum", None), int)


def call_name(method: str) -> str:
    """``fit()`` for a method's name; a phrase (``its import``) as it is."""
    return method if " " in method else f"{method}()"


def _limit_line(label: str, method: str, limit_s: float, key: str | None) -> str:
    where = f" ({key})" if key else ""
    return f"{label}: {call_name(method)} ran past its time limit of {limit_s:g} s{where}"


class _Timer:
    """SIGALRM after ``limit_s`` seconds (main thread only), the previous handler and timer put
    back afterwards (a guard inside another's keeps the outer one's deadline)."""

    def __init__(self, limit_s: float | None):
        self.limit_s = limit_s
        self.armed = False
        self.start = time.monotonic()

    def __enter__(self) -> "_Timer":
        self.start = time.monotonic()
        if (self.limit_s is None or not hasattr(signal, "setitimer")  # Windows: checked when the call returns
                or threading.current_thread() is not threading.main_thread()):
            return self
        self.previous_handler = signal.signal(signal.SIGALRM, self._ring)
        self.previous_timer = signal.setitimer(signal.ITIMER_REAL, max(self.limit_s, 1e-6))
        self.armed = True
        return self

    @staticmethod
    def _ring(signum, frame) -> None:  # noqa: ARG004
        raise _TimeUp()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __exit__(self, *exc) -> None:
        if not self.armed:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous_handler)
        outer_left = self.previous_timer[0] - self.elapsed()
        if self.previous_timer[0] > 0:  # an outer timer: re-armed with what it had left
            signal.setitimer(signal.ITIMER_REAL, max(outer_left, 1e-6), self.previous_timer[1])


def _handlers_now() -> dict:
    return {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS}


def _stop_like_sigterm(saved: dict) -> dict:
    """While a plugin runs, SIGUSR1 / SIGUSR2 (whose default kills the process with no line) are
    handled by the harness's SIGTERM handler when it has one; returns the handlers replaced."""
    term = saved.get(signal.SIGTERM)
    if not callable(term) or term is signal.default_int_handler:
        return {}
    replaced = {}
    for sig in PLUGIN_SIGNALS:
        if signal.getsignal(sig) == signal.SIG_DFL:
            replaced[sig] = signal.signal(sig, term)
    return replaced


class _OsExit(SystemExit):
    """``os._exit(code)`` called from plugin code, raised instead of ending the process."""


_REAL_OS_EXIT = os._exit
_EXIT_GUARDED_THREADS: dict[int, int] = {}  # thread id -> plugin calls running in it (nested calls count)


_EXIT_GUARD_LOCK = threading.Lock()


def _guarded_os_exit(code: int = 0) -> None:
    """``os._exit`` while plugin code runs: raises in a thread running plugin code, exits in the others."""
    if _EXIT_GUARDED_THREADS.get(threading.get_ident()):
        raise _OsExit(code)
    _REAL_OS_EXIT(code)


@contextmanager
def _os_exit_guarded() -> Iterator[None]:
    """``os._exit`` raises in this thread for the block (see the module docstring)."""
    ident = threading.get_ident()
    with _EXIT_GUARD_LOCK:  # another thread's exit from its block must not restore os._exit under this one
        _EXIT_GUARDED_THREADS[ident] = _EXIT_GUARDED_THREADS.get(ident, 0) + 1
        os._exit = _guarded_os_exit
    try:
        yield
    finally:
        with _EXIT_GUARD_LOCK:
            _EXIT_GUARDED_THREADS[ident] -= 1
            if not _EXIT_GUARDED_THREADS[ident]:
                del _EXIT_GUARDED_THREADS[ident]
            if not _EXIT_GUARDED_THREADS:
                os._exit = _REAL_OS_EXIT


@contextmanager
def plugin_call(label: str, method: str, limit_s: float | None = None, limit_key: str | None = None,
                error: Callable[[str], Exception] = PluginError) -> Iterator[None]:
    """Run the block (a call into the plugin ``label``'s ``method``) under the plugin guard (see
    the module docstring). ``method``: a method's name (``fit``) or a phrase (``its import``);
    ``limit_s``: its time limit (None: none), ``limit_key`` the config key that set it;
    ``error``: what a failure becomes (a HarnessError made from the line). An ``Exception`` of the
    plugin passes unchanged (the caller names it as it always did)."""
    main = threading.current_thread() is threading.main_thread()
    saved = _handlers_now() if main else {}
    replaced = _stop_like_sigterm(saved) if main else {}
    timer = _Timer(limit_s)
    try:
        with timer, _os_exit_guarded():
            yield
    except _TimeUp:
        raise error(_limit_line(label, method, float(limit_s), limit_key)) from None
    except Exception:
        raise
    except BaseException as exc:
        if _is_stop(exc):
            if not stopped_in(exc):
                exc.plugin_call = f"{label}: {call_name(method)}"  # type: ignore[attr-defined]
            raise
        if isinstance(exc, SystemExit):
            how = f"os._exit({exc.code!r})" if isinstance(exc, _OsExit) else f"sys.exit({exc.code!r}) (SystemExit)"
            raise error(f"{label}: {call_name(method)} called {how}; a plugin must "
                        "return or raise an error, never end the process") from exc
        raise error(f"{label}: {call_name(method)} raised {type(exc).__name__}"
                    + (f": {first_line(exc)}" if first_line(exc) else "")) from exc
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)
        for sig, handler in saved.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)  # the plugin changed it: the harness's again
    if limit_s is not None and timer.elapsed() > limit_s:  # it swallowed the timer, or no timer could run
        raise error(_limit_line(label, method, float(limit_s), limit_key))


def _module_of(frame) -> str:
    return str(frame.f_globals.get("__name__", "?"))


def raised_where(exc: BaseException) -> str:
    """Where ``exc`` was raised: the innermost frame of its traceback outside the harness's own
    packages (the plugin's code, when a plugin raised it), as ``module.function (line n)``."""
    import traceback

    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
    foreign = [f for f in frames if _module_of(f).split(".", 1)[0] not in ("harness", "policies", "contextlib")]
    frame = (foreign or frames or [None])[-1]
    if frame is None:
        return "an unknown place"
    return f"{_module_of(frame)}.{frame.f_code.co_name} (line {frame.f_lineno})"


def ended_early(exc: BaseException) -> PluginError:
    """What a job says when code no plugin guard wraps raised SystemExit (or another exception
    that is neither an error nor an interrupt): a PluginError naming where it came from."""
    what = f"sys.exit({exc.code!r}) (SystemExit)" if isinstance(exc, SystemExit) else type(exc).__name__
    return PluginError(f"{what} raised in {raised_where(exc)} while the job ran; code the harness calls (a plugin) "
                       "must return or raise an error, never end the process")


def _guarded_method(method: Callable, name: str, label: str) -> Callable:
    import functools

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with plugin_call(label, name):
            return method(self, *args, **kwargs)

    return call


_GUARDED: dict[tuple[type, str], type] = {}


def guard_methods(obj: object, label: str, methods: tuple[str, ...]) -> object:
    """``obj`` itself (a plugin's instance), whose ``methods`` each run under :func:`plugin_call`
    as ``label`` (its errors unchanged). Done by a subclass of the same name and module, as
    ``policies.plugin_calls`` does for policies; an object whose class cannot be swapped (slots)
    is left as it is: the job's own guard still ends its run (``harness.runner.lifecycle``)."""
    cls = type(obj)
    if getattr(cls, "_plugin_guarded", False):
        return obj
    key = (cls, label)
    if key not in _GUARDED:
        body: dict = {m: _guarded_method(getattr(cls, m), m, label) for m in methods if callable(getattr(cls, m, None))}
        body.update(_plugin_guarded=True, __module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
        _GUARDED[key] = type(cls.__name__, (cls,), body)
    try:
        obj.__class__ = _GUARDED[key]
    except TypeError:
        pass
    return obj
