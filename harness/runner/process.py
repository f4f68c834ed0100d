"""Signals and the life of a job's process: why a stopped job still ends its run.

SIGTERM (and SIGHUP) become :class:`Terminated`, like Ctrl-C's KeyboardInterrupt: not an
``Exception``, so a sweep does not take it for one failed job and go on; the running job's run
then ends KILLED (``harness.runner.lifecycle``). A joblib worker watches the sweep process
(``start_parent_watchdog``): when it dies (kill -9) the worker's running job is ended KILLED and
the worker exits, instead of waiting for its next task for up to 300 s.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

WATCHDOG_GRACE_S = 10.0  # a worker whose sweep died: time to end its run KILLED, then exit
REDELIVER_S = 0.05  # a stop lost in a callback is sent again this long after (``_redeliver_lost_stop``)
STUCK_GRACE_S = 20.0  # a signalled build whose main thread is stuck in native code: time before it is ended


class Terminated(BaseException):
    """SIGTERM (or SIGHUP) turned into an exception, like Ctrl-C's KeyboardInterrupt: not an
    ``Exception``, so a sweep does not catch it as one failed job and go on."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal_name(self))


def signal_name(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT (Ctrl-C)"
    signum = getattr(exc, "signum", None)
    try:
        return signal.Signals(signum).name
    except (TypeError, ValueError):
        return type(exc).__name__


_SIGNALED = False
_HANDLED = threading.Event()  # a stop signal reached a Python handler (the main thread runs Python)


def signaled() -> bool:
    """True once this process received SIGTERM / SIGHUP (the sweep's exit hook reads it)."""
    return _SIGNALED


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    global _SIGNALED
    if _SIGNALED:  # a second signal during the cleanup: die the default way
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _SIGNALED = True
    _HANDLED.set()
    raise Terminated(signum)


def _on_interrupt(signum, frame) -> None:  # noqa: ARG001
    """Ctrl-C as Python's own handler (KeyboardInterrupt), noting that the main thread took it."""
    _HANDLED.set()
    raise KeyboardInterrupt


_PREVIOUS_UNRAISABLE = [sys.unraisablehook]  # the hook in place when ours was installed


def _redeliver_lost_stop(info) -> None:
    """``sys.unraisablehook``: a stop signal whose KeyboardInterrupt or :class:`Terminated` was
    raised inside code Python cannot raise from (a weakref or GC callback, a ``__del__``) would
    be printed as "Exception ignored" with a traceback and lost: the command ran on, or ended 0
    with a traceback on its stderr. The signal is raised again in the main thread, where it
    stops the command as any Ctrl-C or SIGTERM does (or is ignored, once the command's outcome
    is settled: ``settle_exit``), ``REDELIVER_S`` later. Anything else goes to Python's own hook."""
    global _SIGNALED
    exc = getattr(info, "exc_value", None)
    if isinstance(exc, (KeyboardInterrupt, Terminated)) and threading.current_thread() is threading.main_thread():
        if isinstance(exc, Terminated):
            _SIGNALED = False  # its handler takes it again as the first signal, not as a second one
        signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else exc.signum
        # from another thread, a moment later: raised here, its handler would run inside this hook
        # and be lost again; the main thread takes it at its next bytecode, out of the callback
        timer = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signum))
        timer.daemon = True  # a process that ends meanwhile is not held for it
        timer.start()
        return
    _PREVIOUS_UNRAISABLE[0](info)


def install_signal_handlers() -> None:
    """SIGTERM (and SIGHUP where it is not ignored) raise :class:`Terminated` in the main
    thread, and a stop lost in a callback is delivered again (``_redeliver_lost_stop``);
    idempotent; a no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    if sys.unraisablehook is not _redeliver_lost_stop:
        _PREVIOUS_UNRAISABLE[0] = sys.unraisablehook
        sys.unraisablehook = _redeliver_lost_stop
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        current = signal.getsignal(sig)
        if current is _on_signal or (sig != signal.SIGTERM and current == signal.SIG_IGN):
            continue
        signal.signal(sig, _on_signal)


def settle_exit() -> None:
    """Once a command's outcome is decided and said, its exit status cannot change: SIGINT,
    SIGTERM and SIGHUP are ignored from here on. The interpreter resets their handlers to the
    default while it finalises (about a second with torch loaded), and a signal landing then
    killed the process with no line: a build that had finished, or one that had printed
    "Interrupted" and chosen 130, ended as killed by SIGINT. The cost: a shutdown that hangs
    (a library's exit hook waiting for good) can then only be ended by kill -9; a Python-level
    handler cannot help, since finalisation resets those to the default. A no-op outside the
    main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)


def name_of(signum: int) -> str:
    """The name the error line gives a signal: "SIGINT (Ctrl-C)", "SIGTERM", ..."""
    return signal_name(KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum))


@contextmanager
def ending_a_stuck_build(line: Callable[[int], str], grace_s: float = STUCK_GRACE_S) -> Iterator[None]:
    """Within: a SIGINT, SIGTERM or SIGHUP that the main thread has not acted on within
    ``grace_s`` seconds ends the process from a watcher thread, with the one line ``line(signum)``
    and the status the main thread would give (128 + the signal's number: 130, 143).

    Why: Python runs its signal handlers only in the main thread, between bytecodes, so native
    code that never returns kept a signalled build alive for good (SIGTERM during llama.cpp's
    engine start hung 2 runs in 4). Python's C-level handler writes each signal's number to a
    pipe (``signal.set_wakeup_fd``) whatever thread the signal lands in; the watcher reads it.
    Only for work whose finished parts are already on disk, written whole (a table build's
    shards and chunks), since the exit skips every cleanup. A no-op outside the main thread or
    where a wakeup fd is already set (an event loop's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:
        previous = None
    if previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
        yield
        return
    done = threading.Event()
    stopping = {int(signal.SIGINT), int(signal.SIGTERM), int(getattr(signal, "SIGHUP", signal.SIGTERM))}
    interrupt = signal.getsignal(signal.SIGINT)
    if interrupt is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)
    _HANDLED.clear()

    def watch() -> None:
        while True:
            try:
                data = os.read(read_end, 1)
            except OSError:
                return
            if not data or done.is_set():
                return
            if data[0] not in stopping:
                continue
            # a signal the main thread took (its handler ran) is left to it, however long it
            # then takes to end; only one that no handler could run for ends the process here
            if not done.wait(grace_s) and not _HANDLED.is_set():
                # not print(): the stuck main thread may hold sys.stderr's lock
                os.write(2, (line(data[0]) + "\n").encode("utf-8", "replace"))
                os._exit(128 + data[0])
            return

    watcher = threading.Thread(target=watch, name="route-bench-stuck-signal-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        try:
            signal.set_wakeup_fd(-1)
            if signal.getsignal(signal.SIGINT) is _on_interrupt:
                signal.signal(signal.SIGINT, interrupt)
        finally:
            os.close(write_end)  # the watcher reads the end of the pipe and returns
            watcher.join(timeout=5)
            os.close(read_end)


_JOB_ACTIVE = False  # a job of this process is between its claim and its end
_WATCHDOG: threading.Thread | None = None


def set_job_active(active: bool) -> None:
    """Mark that a job of this process holds a run (the watchdog then ends it first)."""
    global _JOB_ACTIVE
    _JOB_ACTIVE = bool(active)


def start_parent_watchdog(sweep_pid: str | int | None) -> None:
    """In a worker process the sweep started (joblib/loky: its parent is the sweep process),
    a daemon thread that ends the worker when the sweep process dies (kill -9): the running
    job is sent SIGTERM (its run ends KILLED), and after WATCHDOG_GRACE_S the worker exits.
    Without it an orphaned loky worker waits for its next task for up to 300 s. A no-op in the
    sweep process itself and in workers of other launchers (Ray: the parent is a raylet)."""
    global _WATCHDOG
    try:
        pid = int(sweep_pid) if sweep_pid else None
    except ValueError:
        return
    if pid is None or _WATCHDOG is not None or os.getpid() == pid or os.getppid() != pid:
        return

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(0.5)
        if _JOB_ACTIVE:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except OSError:
                pass
            deadline = time.monotonic() + WATCHDOG_GRACE_S
            while _JOB_ACTIVE and time.monotonic() < deadline:
                time.sleep(0.1)
        os._exit(128 + signal.SIGTERM)

    _WATCHDOG = threading.Thread(target=watch, name="route-bench-sweep-watchdog", daemon=True)
    _WATCHDOG.start()
