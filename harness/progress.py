"""Progress lines with a time left measured on this machine, for every long stage of a build.

Why: a constant rate ("expect roughly 5m00s") was off by 8x on a loaded 2-core machine, and a
global pool is one shard: a 6,180-passage build printed nothing for 5 minutes when lines came
only after whole shards. One reporter (``Progress``) serves every long stage: a build (the
outcome table's shards, an arm block's chunks) is the root, and the stages inside a shard
(encoding passages, encoding questions, the BM25 index, searching, reranking) are its children.

The estimate: time left = work left / work done per second of computing, over the whole of the
current stage so far. Why not a moving average: batches differ in size and length, so a recent
rate jumps with them. On the lines of a SciFact global build (5,183 passages, 2 cores shared
with other jobs whose load rose during the run), from the first minute on, the whole-stage rate
gave between 42% too short and 11% too long, exponentially weighted rates (60 s, 120 s) between
52% too short and 68% too long, and 46% and 62% (docs/large_corpora.md). A change of load moves
the whole-stage rate only as the work after it accumulates. Only work
measured in this process, in the stage being reported, gives a rate: nothing is carried over
from another stage, a warm-up or an earlier run, and before the first measured batch there is no
estimate (no line, or one saying so). Items found finished (reused shards or chunks, cached
embeddings) count as done, not towards the rate, so a resumed build does not look faster than
it is.

Work: an item (a text, a question, a unit) is one unit of work unless the stage declares other
work as it learns it (``expect``: the reranking stage declares each block's pairs, which a
cross-encoder counts batch by batch) and counts it as done (``tick(n, work=...)``); items not
declared yet count at the mean work of those declared. The encoder counts texts, not tokens
(on a loaded machine a forward pass cost far more than its tokens, 0.6 s a pass besides 0.4 ms
a token, and token weights said up to 59% too short), and runs its batches of one length in an
order that spreads the lengths over every prefix (``encoder.spread_order``), so the texts
measured so far are a sample of those left.

Printing: one line per interval (``INTERVAL_S``, 30 s, or the ``HARNESS_PROGRESS_INTERVAL_S``
environment variable, seconds) across a root and its stages, besides the root's forced ones
(after a part when asked, and at the end); the first line comes right after the first measured
batch. The work prints when it counts, at the last batch predicted to end within the interval
(the stage's mean time per batch); when no line came for nine tenths of an interval (a batch
longer than predicted, an HNSW index built in one call, a shard computed elsewhere, a model
loading), a heartbeat thread of the root prints the line of what is at work, at its last count.
So lines come at most an interval apart, unless the work holds the GIL for longer than a tenth
of one. A stage that printed a line prints one when it is done.

Deep code takes no reporter as an argument: ``root.active()`` makes a reporter current in this
context (``contextvars``: a worker of an executor sees none), ``stage()`` opens a child of the
current one, and ``current(unit)`` is what the encoder, the reranker or an answer loop tick (a
silent stand-in when no stage counting ``unit`` is current). Progress never changes a number,
a cache key or a file.
"""

from __future__ import annotations

import math
import os
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

from harness.errors import HarnessError

INTERVAL_S = 30.0  # one line per interval, besides the forced ones
INTERVAL_ENV = "HARNESS_PROGRESS_INTERVAL_S"
_CURRENT: ContextVar["Progress | None"] = ContextVar("harness_progress", default=None)


def duration(seconds: float) -> str:
    """``42s``, ``3m07s``, ``1h05m``; ``?`` for a negative or non-finite value."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{(s % 3600) // 60:02d}m"


def line_interval_s() -> float:
    """Seconds between lines: ``HARNESS_PROGRESS_INTERVAL_S`` when set (a number >= 0), else 30."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 0):
        raise HarnessError(f"environment variable {INTERVAL_ENV}: must be a number of seconds >= 0, got {raw!r}")
    return value


def _rate_text(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 1000 else f"{rate:.3g}"


class _Lines:
    """What a root and its stages share: the clock, where lines go, when the last one went, and
    which of them is at work now (``showing``: what a heartbeat line reports)."""

    def __init__(self, clock: Callable[[], float], out: Callable[[str], None], interval: float, stages: bool):
        self.clock, self.out, self.interval, self.stages = clock, out, interval, stages
        self.last = clock()
        self.printed = False
        self.showing: "Progress | None" = None
        self.lock = threading.Lock()  # a heartbeat and the work never print the same interval twice

    def put(self, reporter: "Progress") -> str:
        """Print ``reporter``'s line now (the caller holds the lock)."""
        self.last = self.clock()
        self.printed = True
        reporter.lines_put += 1
        text = reporter.line()
        self.out(text)
        return text


class _Heartbeat:
    """A line from a timer thread when none came for an interval: the work prints only when it
    counts, and a batch, an HNSW index or a shard computed elsewhere can take longer than one.
    It reports what is at work (``_Lines.showing``, or the reporter holding it once its stage is
    done: writing the stage's results), at its last count; it changes nothing."""

    def __init__(self, lines: _Lines):
        self.lines = lines
        self.step = min(1.0, lines.interval / 10.0)
        # due a tenth of the interval early: a write that holds the GIL for seconds (the embedding
        # cache's parts of a 6,183-passage build: 3 s) delays the thread, not past the interval
        self.due = lines.interval - max(self.step, lines.interval / 10.0)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="route-bench-progress", daemon=True)

    def _run(self) -> None:
        lines = self.lines
        while not self.stopped.wait(self.step):
            with lines.lock:
                showing = lines.showing
                while showing is not None and showing.done >= showing.total:  # its stage ended: what holds it
                    showing = showing.parent
                if showing is not None and showing.shows_lines and lines.clock() - lines.last >= self.due:
                    lines.put(showing)

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5.0)  # it holds the lock only to print one line


class Progress:
    """Progress of ``total`` items (``unit``) of one build or stage (``label``): done, elapsed,
    rate and time left. A root is built directly; ``stage`` makes its children."""

    def __init__(self, label: str, total: int, unit: str, *, emit: bool = True, interval_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter, out: Callable[[str], None] | None = None,
                 stages: bool | None = None, work_unit: str | None = None, parent: "Progress | None" = None):
        self.label, self.total, self.unit, self.emit = label, int(total), unit, bool(emit)
        self.work_unit = work_unit or unit
        self.parent = parent
        if parent is None:
            out = out or (lambda line: print(line, flush=True))
            gap = line_interval_s() if interval_s is None else float(interval_s)
            self.lines = _Lines(clock, out, gap, self.emit if stages is None else bool(stages))
        else:
            self.lines = parent.lines
        self.clock = self.lines.clock
        self.where = ""  # what part of the build runs now (``shard 2/5``), shown in its stages' lines
        self.start = self._mark = self.clock()
        self.done = self.reused = self.computed = 0
        self.work_done = self.work_declared = 0.0
        self.items_declared = 0
        self.compute_s = 0.0  # seconds spent on measured work (reused items are not timed)
        self.counts = 0  # calls that counted work (batches, questions, parts): their mean spacing
        self._counted_at = -math.inf  # when the last of them came
        self._ahead = 0  # items ticked inside a part that a later ``advance`` of the whole part includes
        self._timing = False  # a stage's clock starts at its first work (``start_timing``)
        self.lines_put = 0  # lines this reporter printed: a stage that printed any says when it is done
        self._said_done = False

    @property
    def interval_s(self) -> float:
        return self.lines.interval

    # ---- counting --------------------------------------------------------------------------
    def skip(self, n: int) -> None:
        """``n`` items found finished (on disk, in a cache): done, not timed."""
        self.done += int(n)
        self.reused += int(n)
        self._mark = self.clock()
        self._stage_done()

    def advance(self, n: int, work: float | None = None) -> None:
        """``n`` items computed since the last call (``work``: their work, default ``n``). Items
        already ticked inside them are not counted twice (a chunk's answers, then the chunk)."""
        extra = max(0, int(n) - self._ahead)
        self._ahead = max(0, self._ahead - int(n))
        self._count(extra, extra if work is None else work)

    def tick(self, n: int = 0, work: float | None = None) -> None:
        """Finer progress inside a part (a batch, a question), then a line if one is due (not the
        "done" one: the part's owner ends the build)."""
        self._count(int(n), n if work is None else work)
        self._ahead += int(n)
        if self.done < self.total:
            self.report()

    def _count(self, n: int, work: float) -> None:
        now = self.clock()
        self.compute_s += now - self._mark
        self._mark = now
        self.counts += 1
        self._counted_at = now
        self.done += n
        self.computed += n
        self.work_done += float(work)
        self._stage_done()

    def _stage_done(self) -> None:
        """A stage that printed a line prints one when it is done (once): where its time left
        ended, and that what follows is another stage."""
        if self.parent is not None and self.lines_put and self.done >= self.total and not self._said_done:
            with self.lines.lock:
                self._said_done = True
                self.lines.put(self)

    def expect(self, work: float, items: int = 0) -> None:
        """``items`` of the total amount to ``work`` (declared as soon as it is known)."""
        self.work_declared += float(work)
        self.items_declared += int(items)

    def start_timing(self) -> None:
        """The stage's measured time starts now, once: what came before its first work (loading a
        model, tokenising) is not its rate."""
        if not self._timing and not self.measured:
            self._timing = True
            self._mark = self.clock()

    # ---- the estimate ---------------------------------------------------------------------
    @property
    def measured(self) -> bool:
        return bool(self.work_done > 0 and self.compute_s > 0)

    @property
    def rate(self) -> float | None:
        """Work per second of computing in this stage, None before any was measured."""
        return self.work_done / self.compute_s if self.measured else None

    def work_left(self) -> float:
        """Declared work not done, plus the items not declared yet at the declared mean."""
        if not self.items_declared:
            return float(max(0, self.total - self.done))
        undeclared = max(0, self.total - self.reused - self.items_declared)
        return max(0.0, self.work_declared - self.work_done) + undeclared * self.work_declared / self.items_declared

    def remaining_s(self) -> float | None:
        rate = self.rate
        return None if rate is None else self.work_left() / rate

    # ---- lines -----------------------------------------------------------------------------
    def full_label(self) -> str:
        if self.parent is None:
            return self.label
        where = f", {self.parent.where}" if self.parent.where else ""
        return f"{self.parent.full_label()}{where}, {self.label}"

    def line(self) -> str:
        now = self.clock()
        pct = 100.0 * self.done / self.total if self.total else 100.0
        head = (f"[route-bench] {self.full_label()}: {self.done:,}/{self.total:,} {self.unit} ({pct:.0f}%), "
                f"{duration(now - self.start)} elapsed")
        if self.done >= self.total:
            return f"{head}, done"
        left = self.remaining_s()
        if left is None:
            return f"{head}; time left: measured once the first {self.unit} are computed"
        about = "under 1s" if left < 0.5 else f"about {duration(left)}"  # not "0s" while work is left
        if self.parent is None:
            return f"{head}, {about} left ({_rate_text(self.rate)} {self.work_unit}/s measured here)"
        return f"{head}, {about} left in this stage ({_rate_text(self.rate)} {self.work_unit}/s measured in it)"

    def _interval_over(self) -> bool:
        """The interval has passed since the last line, or the next batch would end after it (at
        this stage's mean time per batch): with regular batches, lines at most an interval apart
        (when a batch takes less) and more than half an interval apart."""
        last, interval = self.lines.last, self.lines.interval
        gap = self.compute_s / self.counts if self.counts else math.inf
        ended = self._counted_at  # the next batch would end at ended + gap
        return self.clock() - last >= interval or (ended > last and ended + gap - last > interval)

    def _due(self, force: bool) -> bool:
        lines = self.lines
        if self.parent is not None:  # a stage: only with a measured rate and work left (no "done" line)
            return lines.stages and self.measured and self.done < self.total and (
                not lines.printed or self._interval_over())
        first = not lines.printed and self.measured
        return self.emit and (force or first or self.done >= self.total or self._interval_over())

    @property
    def shows_lines(self) -> bool:
        """Whether this reporter prints at all (a root that emits, a stage of a root whose
        stages do)."""
        return self.lines.stages if self.parent is not None else self.emit

    def report(self, force: bool = False) -> str | None:
        """Print the line when due: forced (a root), at a root's end, the first measured work,
        or ``interval_s`` after the last line of this root or any of its stages."""
        with self.lines.lock:
            return self.lines.put(self) if self._due(force) else None

    # ---- the current reporter --------------------------------------------------------------
    @contextmanager
    def active(self) -> Iterator["Progress"]:
        """This reporter is current inside the block; the time outside it is not its work. A
        root that prints keeps a heartbeat inside it: a line at least every interval."""
        token = _CURRENT.set(self)
        self._mark = self.clock()
        lines = self.lines
        before, lines.showing = lines.showing, self
        beat = _Heartbeat(lines) if self.parent is None and self._beats() else None
        try:
            if beat is not None:
                beat.thread.start()  # inside the block: a stop landing while it starts still stops it
            yield self
        finally:
            if beat is not None:
                beat.stop()
            lines.showing = before
            _CURRENT.reset(token)

    def _beats(self) -> bool:
        """A heartbeat needs lines to print, an interval, and the wall clock (a test's own clock
        drives its lines itself)."""
        lines = self.lines
        return (self.emit or lines.stages) and lines.interval > 0 and lines.clock is time.perf_counter

    def stage(self, label: str, total: int, unit: str, work_unit: str | None = None) -> "Progress":
        """A child counting ``total`` ``unit`` (its work in ``work_unit``), sharing the lines."""
        return Progress(label, total, unit, work_unit=work_unit, parent=self)


_SILENT: dict[str, Progress] = {}


def _silent(unit: str = "items") -> Progress:
    """The stand-in when no build is current: one per unit, shared (what it counts is never
    read), so an encoder call or a forward pass outside a build allocates nothing."""
    if unit not in _SILENT:
        _SILENT[unit] = Progress("", 0, unit, emit=False, stages=False, interval_s=INTERVAL_S)
    return _SILENT[unit]


@contextmanager
def stage(label: str, total: int, unit: str, work_unit: str | None = None) -> Iterator[Progress]:
    """A stage of the current reporter, current inside the block (silent without one)."""
    parent = _CURRENT.get()
    child = parent.stage(label, total, unit, work_unit) if parent is not None else _silent(unit)
    with child.active():
        yield child


def child_of_current(label: str, total: int, unit: str, work_unit: str | None = None) -> Progress:
    """A stage of the current reporter to activate part by part (``with s.active():``), e.g.
    one per block of questions; silent without a current reporter."""
    parent = _CURRENT.get()
    return parent.stage(label, total, unit, work_unit) if parent is not None else _silent(unit)


def current(unit: str) -> Progress:
    """The current reporter when it counts ``unit`` (its items or its work), else a silent one:
    an encoder ticks "texts", a reranker "pairs", an answer loop "questions"."""
    here = _CURRENT.get()
    return here if here is not None and unit in (here.unit, here.work_unit) else _silent(unit)
