"""Remaining-time lines for long builds, from the throughput measured on this machine.

Why: a constant rate ("expect roughly 5m00s") was off by 8x on a loaded 2-core machine. The
estimate here comes from the work this build has done so far: items computed per second of
computing, applied to the items still to do. Items found finished on disk (reused shards or
chunks) count as done but not towards the rate, so a resumed build does not look faster than
it is. Until something was computed there is no estimate, and the line says so.

Before the first item is computed, a short warm-up on this machine (``warm_up_rate``: a small
piece of the same work, timed on its second run so that loading models is not counted) gives the
up-front estimate and the rate of the first lines, named as such; the measured rate replaces it
as soon as items are computed.

A line is printed at most every ``interval_s`` seconds, after each part when asked
(``force``), and at the end; where it goes is the caller's choice (``emit``), e.g. only when
stdout is not a terminal (a terminal has tqdm's bars).
"""

from __future__ import annotations

import math
import time
from typing import Callable

INTERVAL_S = 30.0  # at most one line per interval, besides the forced ones


def duration(seconds: float) -> str:
    """``42s``, ``3m07s``, ``1h05m``; ``?`` for a negative or non-finite value."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Progress of ``total`` items of one build (``label``): done, elapsed, rate, time left."""

    def __init__(self, label: str, total: int, unit: str, *, emit: bool = True, interval_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter, out: Callable[[str], None] | None = None,
                 warm_up_rate: float | None = None):
        self.label, self.total, self.unit, self.emit = label, int(total), unit, bool(emit)
        self.warm_up_rate = warm_up_rate if warm_up_rate and math.isfinite(warm_up_rate) else None
        self.interval_s = INTERVAL_S if interval_s is None else float(interval_s)
        self.clock = clock
        self.out = out or (lambda line: print(line, flush=True))
        self.start = self.last = clock()
        self.done = self.reused = self.computed = 0
        self.compute_s = 0.0  # seconds spent on computed items (reused ones are not timed)
        self._mark = self.start

    def skip(self, n: int) -> None:
        """``n`` items found finished on disk."""
        self.done += int(n)
        self.reused += int(n)
        self._mark = self.clock()

    def advance(self, n: int) -> None:
        """``n`` items computed since the last call."""
        now = self.clock()
        self.compute_s += now - self._mark
        self._mark = now
        self.done += int(n)
        self.computed += int(n)

    @property
    def measured(self) -> bool:
        return bool(self.computed and self.compute_s > 0)

    @property
    def rate(self) -> float | None:
        """Items computed per second of computing; before any was, the warm-up's rate (or None)."""
        return self.computed / self.compute_s if self.measured else self.warm_up_rate

    def remaining_s(self) -> float | None:
        rate = self.rate
        return None if rate is None else max(0, self.total - self.done) / rate

    def line(self) -> str:
        now = self.clock()
        pct = 100.0 * self.done / self.total if self.total else 100.0
        head = (f"[route-bench] {self.label}: {self.done:,}/{self.total:,} {self.unit} ({pct:.0f}%), "
                f"{duration(now - self.start)} elapsed")
        if self.done >= self.total:
            return f"{head}, done"
        left = self.remaining_s()
        if left is None:
            return f"{head}; time left: measured once the first {self.unit} are computed"
        how = "measured here" if self.measured else "in a warm-up here"
        return f"{head}, about {duration(left)} left ({self.rate:.3g} {self.unit}/s {how})"

    def report(self, force: bool = False) -> str | None:
        """Print the line when ``force``, at the end, or ``interval_s`` after the last one."""
        now = self.clock()
        if not self.emit or not (force or self.done >= self.total or now - self.last >= self.interval_s):
            return None
        self.last = now
        text = self.line()
        self.out(text)
        return text


def warm_up_rate(work: Callable[[], object], units: int, *,
                 clock: Callable[[], float] = time.perf_counter) -> float | None:
    """``units`` per second of ``work`` on this machine now: run once untimed (what loads lazily,
    models and their first-call setup, is not the rate), then once timed. None when ``units`` is
    0 or the run took no measurable time."""
    if units <= 0:
        return None
    work()
    t0 = clock()
    work()
    seconds = clock() - t0
    return units / seconds if seconds > 0 else None


def expect_text(total: int, unit: str, rate: float | None) -> str:
    """The up-front estimate: "expect about 4m10s (2.0 units/s in a warm-up here)", or what
    there is instead of one."""
    if rate is None or not math.isfinite(rate) or rate <= 0:
        return "the time left is measured as the work is done"
    return f"expect about {duration(total / rate)} ({rate:.3g} {unit}/s in a warm-up here)"
