"""A protocol's sweep stage: what it concludes from all the jobs of a sweep.

Why: a job answers one (policy, cost, seed); the question a sweep asks (which policy, at which
cost or budget, can be told apart from the one a team would deploy) needs every job at once.
Each protocol that has such a conclusion says it in ``Protocol.aggregate(jobs, ctx)``, over
store-neutral :class:`SweepJob` records (one per job run: its params, metrics, tags and a way to
open its artifacts; not the comparison "cells", which group jobs), and returns a
:class:`SweepResult`. The sweep's end (``harness.runner.sweep_end``), the ``report`` command and the
console loop over the sweep's protocols and show every result the same way, so a plugin
protocol's sweep-level table reaches the console, the report and the parent run with no
harness edit.

Where a result goes:
- ``text``: printed at the sweep's end and written to the parent run as ``<name>.txt`` for
  every table name ``<name>`` listed in ``text_files`` (default: none);
- ``tables``: ``<name>.csv`` on the parent run (every column, full precision); those named in
  ``ui_tables`` also as an MLflow table ``<name>.json`` (the UI's table view);
- ``files``: further text artifacts (``name -> text``), e.g. a Markdown and an HTML rendering;
- ``metrics``: parent-run metrics (``sweep/<protocol>/<key>`` is the convention);
- ``markdown`` / ``html``: the report's section (defaults: the text in a code block);
- ``conclusion``: the protocol's verdict in a few lines (e.g. that no difference is detectable
  with these questions and how many would be needed): the parent run's description, and the
  sweep's console when no result has a ``headline`` (docs/metrics.md §12);
- ``headline``: a short table (lines of at most 100 characters) that answers the sweep's
  question, e.g. protocol B's verdict per cost and budget (``harness.protocols.verdict``):
  what the sweep's console prints instead of the full ``text`` (``verbose=true`` prints both),
  and the first thing of the parent run's description;
- ``lead_markdown`` / ``lead_html``: the report's opening section, the answer before the tables
  (e.g. protocol B's verdicts as a table); default: the ``headline`` in a code block, or nothing;
- ``params``: parent-run params (short texts, sortable columns of the runs table), e.g.
  ``verdict/c0.02/b0.25``;
- ``job_tags``: tags for the jobs' own runs (``run_id -> {tag: text}``), e.g. protocol B's
  ``verdict`` on each job (a sortable column of the runs table, beside the job's metrics).
A result whose artifact or metric names clash with another protocol's is refused
(:func:`check_sweep_results`), as for jobs.
"""

from __future__ import annotations

import html as html_lib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from harness.errors import HarnessError
from harness.store_schema import TAG_POLICY


@dataclass(frozen=True)
class SweepJob:
    """One job run of a sweep, as a protocol's sweep stage sees it (no tracking store types).

    ``open_artifact(name)`` returns a local path to the run's artifact ``name`` or None when the
    run has none; the store layer decides how (read in place, or downloaded)."""

    run_id: str
    run_name: str
    status: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    tags: Mapping[str, str]
    open_artifact: Callable[[str], Path | None] = field(repr=False, compare=False, default=lambda name: None)

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED"

    @property
    def policy(self) -> str:
        return self.tags.get(TAG_POLICY) or self.params.get("policy.name", "?")

    def table(self, name: str) -> pd.DataFrame | None:
        """The run's Parquet artifact ``name`` as a DataFrame, or None when it has none."""
        path = self.open_artifact(name)
        return None if path is None else pd.read_parquet(path)

    def protocols(self) -> list[str]:
        """The protocols the job ran (its logged ``protocol.run``), [] when not logged."""
        return parse_list_param(self.params.get("protocol.run"))


def parse_list_param(value: str | None) -> list[str]:
    """A list parameter as MLflow holds it (``"['threshold', 'budget']"``) -> its items."""
    if value is None:
        return []
    inner = str(value).strip().strip("[]")
    return [s.strip().strip("'\"") for s in inner.split(",") if s.strip().strip("'\"")]


@dataclass(frozen=True)
class SweepContext:
    """What a sweep stage may read besides the cells: the sweep's test settings (each cell's
    own ``protocol.alpha`` / ``protocol.n_boot`` win where it logged them) and its metric."""

    alpha: float = 0.05
    n_boot: int = 1000
    metric: str = "hit@10"


@dataclass
class SweepResult:
    """A protocol's conclusion over a sweep (module docstring). ``text`` empty and no tables:
    nothing to show (e.g. no job of the sweep ran the protocol)."""

    title: str
    text: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    ui_tables: tuple[str, ...] = ()
    text_files: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    markdown: str | None = None
    html: str | None = None
    raw: Any = None
    conclusion: str = ""
    headline: str = ""
    params: dict[str, str] = field(default_factory=dict)
    lead_markdown: str | None = None
    lead_html: str | None = None
    # the comparisons that could not tell a policy from its reference (``harness.paired.closing_line``)
    open_comparisons: list[dict] = field(default_factory=list)
    job_tags: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.text and not any(len(t) for t in self.tables.values())

    def artifact_names(self) -> list[str]:
        names = [f"{t}.csv" for t in self.tables] + [f"{t}.json" for t in self.ui_tables]
        return names + [f"{t}.txt" for t in self.text_files] + list(self.files)

    def as_markdown(self) -> str:
        if self.markdown is not None:
            return self.markdown
        return f"## {self.title}\n\n```\n{self.text}\n```\n"

    def as_html(self) -> str:
        if self.html is not None:
            return self.html
        return f"<h2>{html_lib.escape(self.title)}</h2>\n<pre>{html_lib.escape(self.text)}</pre>\n"


    def lead_as_markdown(self) -> str:
        if self.lead_markdown is not None:
            return self.lead_markdown
        return f"```\n{self.headline}\n```\n" if self.headline else ""

    def lead_as_html(self) -> str:
        if self.lead_html is not None:
            return self.lead_html
        return f"<pre>{html_lib.escape(self.headline)}</pre>\n" if self.headline else ""


def failed_result(name: str, exc: BaseException) -> SweepResult:
    """The stand-in for a sweep stage that raised: the jobs' results stand without it."""
    return SweepResult(title=f"{name}: sweep stage", text=f"[route-bench] {name} sweep stage not made: "
                                                           f"{type(exc).__name__}: {exc}")


# names the sweep's end writes itself on the parent run (the report's: harness.report.parent_files)
RESERVED_SWEEP_ARTIFACTS = ("comparison.csv", "comparison.txt", "summary.txt", "report.html", "report.md",
                            "frontier.png")


def check_sweep_results(results: Mapping[str, SweepResult]) -> None:
    """Two protocols never write the same parent-run artifact or metric, and artifact names are
    plain file names: a HarnessError names both protocols."""
    seen: dict[tuple[str, str], str] = {}
    for name, result in results.items():
        for f in result.artifact_names():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", f) or f in RESERVED_SWEEP_ARTIFACTS:
                raise HarnessError(f"protocol {name!r}: sweep artifact name {f!r} is not allowed (a plain file "
                                   f"name, not one of {', '.join(RESERVED_SWEEP_ARTIFACTS)})")
        missing = [t for t in (*result.ui_tables, *result.text_files) if t not in result.tables]
        if missing:
            raise HarnessError(f"protocol {name!r}: ui_tables / text_files name tables it did not return: {missing}")
        named = [("artifact", f) for f in result.artifact_names()] + [("metric", m) for m in result.metrics]
        named += [("job tag", t) for t in {t for tags in result.job_tags.values() for t in tags}]
        for kind, item in named + [("param", k) for k in result.params]:
            other = seen.setdefault((kind, item), name)
            if other != name:
                raise HarnessError(f"protocols {other!r} and {name!r} both write the sweep {kind} {item!r}")


def check_job_tags(result: SweepResult, run_ids: set[str]) -> None:
    """Tags go on the sweep's own job runs only, under names of the protocol's own (not MLflow's
    ``mlflow.`` nor the harness's ``route_bench.``)."""
    strays = sorted(set(result.job_tags) - run_ids)
    if strays:
        raise HarnessError(f"job_tags name runs that are not jobs of this sweep: {strays[:3]}")
    names = {t for tags in result.job_tags.values() for t in tags}
    bad = sorted(t for t in names if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-/ ]*", t)
                 or t.startswith(("mlflow.", "route_bench.")))
    if bad:
        raise HarnessError(f"job tag names {bad[:3]}: a plain name, not mlflow.* or route_bench.*")


def sweep_protocols(jobs: list[SweepJob], configured: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The protocols whose sweep stage runs: those configured (the sweep's ``protocol.run``),
    then any other a job logged it ran (a sweep over ``protocol.run``), in first-seen order."""
    names = [str(n) for n in configured]
    for job in jobs:
        names += job.protocols()
    return list(dict.fromkeys(names))


def run_sweep_stages(jobs: list[SweepJob], names: list[str], ctx: SweepContext) -> dict[str, SweepResult]:
    """{protocol: its SweepResult} for every protocol of ``names`` with a sweep-level result.
    A stage that raises, or whose names clash with an earlier protocol's, is replaced by one
    line saying so: the jobs' results stand without it."""
    from harness.protocols.registry import make_protocol

    out: dict[str, SweepResult] = {}
    for name in names:
        try:
            result = make_protocol(name).aggregate(jobs, ctx)
            if result is None or result.empty:
                continue
            if not isinstance(result, SweepResult):
                raise HarnessError(f"aggregate returned {type(result).__name__}, not a SweepResult")
            check_job_tags(result, {j.run_id for j in jobs})
            check_sweep_results({**out, name: result})
        except Exception as exc:  # noqa: BLE001 - a plugin's sweep stage must not lose the sweep
            result = failed_result(name, exc)
        out[name] = result
    return out


def conclusion_lines(results: Mapping[str, SweepResult]) -> list[str]:
    """Every result's ``conclusion`` lines, then one closing line over all their open
    comparisons (``harness.paired.closing_line``): what the sweep's console ends with and the
    report's "Conclusions" section holds. [] when no protocol concluded anything."""
    from harness.paired import closing_line

    lines = [line for r in results.values() if r.conclusion for line in r.conclusion.splitlines()]
    closing = closing_line([o for r in results.values() for o in r.open_comparisons])
    return lines + ([closing] if closing else [])
