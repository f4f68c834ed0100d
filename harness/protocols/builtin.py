"""The three built-in protocols (docs/metrics.md §5-7) as ``Protocol`` plugins.

Each adapter reads its settings from the job config (the shared ``protocol`` keys, and protocol
B's ``budget`` group), runs the protocol's function and says what to log: metrics, tables (by
the artifact names the sweep's decision table and the report read), series and plots. The
numbers are those of the functions; nothing is computed here, except the base arm's mean on the
test questions of protocols B and C for the ceiling warning (``_ceiling_summary``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from harness.io import cache_root, digest_of
from harness.markdown import md_code_block, md_escape
from harness.store_schema import TAG_FROZEN_SHA256
from harness.protocols import protocol_sizes as sizes
from harness.protocols.common import shown
from harness.protocols.outputs import Output
from harness.protocols.registry import Protocol, ProtocolContext, ProtocolResult, Table
from harness.protocols.sweep_stage import SweepContext, SweepJob, SweepResult


HEADLINE_BUDGET = 0.25  # the budget of the console's job line and the comparison table's usage column


def headline_budget(grid) -> float | None:
    """The grid's budget nearest 0.25 (the console's deployable number)."""
    grid = [float(g) for g in grid or ()]
    return min(grid, key=lambda g: (abs(g - HEADLINE_BUDGET), g)) if grid else None


class ThresholdProtocol(Protocol):
    """Protocol A: grouped-CV tau on development, frozen, evaluated once on held-out."""

    name = "threshold"
    title = "A held-out"
    outputs = (
        Output("heldout/{metric}", "heldout {metric}", True, "share", headline=True, short="heldout {metric}"),
        Output("heldout/utility", "heldout utility", True, "utility", headline=True, short="utility"),
        Output("heldout/extra_share", "extra share", None, "share", headline=True, short="extra share", digits=3),
        Output("heldout/diff_vs_base/utility", "utility diff vs base [95% CI]", True, "utility", headline=True,
               short="dU vs base", ci=("heldout/diff_vs_base/utility/ci_low", "heldout/diff_vs_base/utility/ci_high")),
        Output("heldout/diff_vs_extra/utility", "utility diff vs extra [95% CI]", True, "utility",
               ci=("heldout/diff_vs_extra/utility/ci_low", "heldout/diff_vs_extra/utility/ci_high")),
        Output("heldout/diff_vs_base/utility/mdd", "MDD vs base", None, "utility",
               unless=("heldout/diff_vs_base/utility/detectable", "none detectable")),
    )

    def min_documents(self, cfg, trainable):
        return sizes.threshold_min_documents(cfg["protocol"], trainable)

    def smallest_test_set(self, task, cfg):
        return sizes.threshold_smallest_heldout(task, cfg["protocol"], int(cfg.get("seed", 0))), "held-out set"

    def job_line(self, metrics, metric, grid):
        """``A held-out: U=0.7917 hit@10=0.7917 extra=0.375``."""
        if "heldout/utility" not in metrics:
            return None
        return (f"A held-out: U={shown(metrics['heldout/utility'], '.4f')} "
                f"{metric}={shown(metrics.get(f'heldout/{metric}', math.nan), '.4f')}"
                f" extra={shown(metrics.get('heldout/extra_share', math.nan), '.3f')}")

    def headline_metrics(self, metrics, metric, grid):
        """``headline/utility``, ``headline/<metric>``, ``headline/extra_share``."""
        pairs = (("utility", "heldout/utility"), (metric, f"heldout/{metric}"), ("extra_share", "heldout/extra_share"))
        return {f"headline/{name}": float(metrics[src]) for name, src in pairs if src in metrics}

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        from harness.protocols.threshold import run_threshold_protocol

        p = ctx.protocol
        res = run_threshold_protocol(
            task, factory, cost=ctx.cost, seed=ctx.seed, dev_frac=float(p["dev_frac"]),
            n_folds=int(p["n_folds"]), n_boot=int(p["n_boot"]), freeze_dir=Path(ctx.artifact_dir) / "frozen",
            repeats=int(p["repeats"]), nested_folds=int(p["nested_folds"]),
            alpha=float(p["alpha"]), power=float(p["power"]),
            equivalence_margin=float(p.get("equivalence_margin", 0.01)),
        )
        if ctx.where:  # the summary names where the run keeps the freeze, not a temporary folder
            res.frozen["shown_as"] = f"artifacts 'frozen/' of {ctx.where}"
        digests = res.frozen.get("sha256", {})
        return ProtocolResult(
            metrics=res.metrics, summary=res.summary(), raw=res,
            tables={"decisions": Table(res.decisions, preview=True, per_question=True)},
            tags={f"{TAG_FROZEN_SHA256}.{k}": v for k, v in digests.items()},
        )

    def aggregate(self, jobs: list[SweepJob], ctx: SweepContext) -> SweepResult | None:
        """Policy vs policy: each cell's policies against the one chosen on development data,
        paired on the held-out questions (``harness.protocols.compare``)."""
        return policy_comparison_result(jobs, ctx)


class BudgetProtocol(Protocol):
    """Protocol B: budgets, exact / deployable / conservative frontiers over seeded halves."""

    name = "budget"
    title = "B test halves"
    outputs = (
        Output("frontier/exact_auc", "exact-frontier AUC", True, "utility x usage", headline=True, short="exact AUC"),
        Output("routing/exact/apgr", "APGR (exact)", True, "share of the gap"),
        Output("routing/deployable/apgr", "APGR (deployable)", True, "share of the gap"),
        Output("routing/deployable/cpt50", "CPT(50%) (deployable)", False, "usage"),
        Output("routing/exact/aiq", "AIQ (exact)", True, "utility"),
        Output("budget/{budget}/deployable/violation_rate", "deployable violation @{budget}", False, "share of splits"),
        Output(f"budget/{HEADLINE_BUDGET:.2f}/deployable/realized_usage", f"deploy@{HEADLINE_BUDGET:g} usage", None,
               "usage", headline=True, report=False, short=f"deploy@{HEADLINE_BUDGET:g} usage"),
    )

    def min_documents(self, cfg, trainable):
        return sizes.budget_min_documents(cfg["budget"], trainable)

    def smallest_test_set(self, task, cfg):
        return sizes.budget_smallest_test_half(task, cfg["budget"], int(cfg.get("seed", 0))), "smallest test half"

    def job_line(self, metrics, metric, grid):
        """``B test halves, rho=0.25: U=0.6061`` (the grid's budget nearest 0.25), or the
        fixed decision's utility."""
        rho = headline_budget(grid)
        key = f"budget/{rho:.2f}/deployable/utility" if rho is not None else None
        if key in metrics:
            return f"B test halves, rho={rho:g}: U={shown(metrics[key], '.4f')}"
        if "budget/fixed/utility" in metrics:
            return f"B test halves: fixed U={shown(metrics['budget/fixed/utility'], '.4f')}"
        return None

    def headline_metrics(self, metrics, metric, grid):
        """``headline/deployable_utility@<budget>`` at every budget of the grid."""
        keys = [f"{float(rho):.2f}" for rho in grid or ()]
        return {f"headline/deployable_utility@{k}": float(metrics[f"budget/{k}/deployable/utility"])
                for k in keys if f"budget/{k}/deployable/utility" in metrics}

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        from harness.protocols.budget import run_budget_protocol

        p, b = ctx.protocol, ctx.cfg["budget"]
        res = run_budget_protocol(
            task, factory, budgets=tuple(float(x) for x in b["grid"]), n_splits=int(b["n_splits"]),
            seed=ctx.seed, cost=ctx.cost, dkw_delta=float(b["dkw_delta"]), tol=float(b["tol"]),
            calibration=str(b["calibration"]), cal_folds=int(b["cal_folds"]),
            min_discordant=int(p["min_discordant"]), alpha=float(p["alpha"]),
            cal_sizes=tuple(b.get("cal_sizes") or ()),
        )
        tables = {"frontiers": Table(res.frontiers)}
        if res.cal_sizes is not None:  # per split, size, budget and frontier (docs/metrics.md §6)
            tables["budget_cal_sizes"] = Table(res.cal_sizes)
        if res.decisions is not None:
            # per test question, split, budget and frontier: run probability, expected utility;
            # the sweep's decision table pairs policies on it
            tables["budget_decisions"] = Table(res.decisions, per_question=True)
        cfg = ctx.cfg
        summary = res.summary()
        if res.decisions is not None and len(res.decisions):  # each test question once per split
            base = res.decisions.drop_duplicates(["split", "qid"])["base"].astype(float).mean()
            summary = _ceiling_summary(summary, ctx, self.name, task.metric, base, "the test halves")
        return ProtocolResult(
            metrics=res.metrics, summary=summary, raw=res, tables=tables,
            series=frontier_series(res.frontiers, task.metric),
            plots={"frontier.png": lambda path: frontier_png(res.frontiers, path, task.metric, cfg)},
        )

    def aggregate(self, jobs: list[SweepJob], ctx: SweepContext) -> SweepResult | None:
        """The decision table: per cell, cost and budget, which policies can be told apart from
        the reference (``harness.protocols.decision_table``)."""
        from harness.protocols.sweep_comparisons import sweep_decision_table

        from harness.protocols.verdict import job_tags

        result = decision_table_result(sweep_decision_table(jobs, n_boot=ctx.n_boot, alpha=ctx.alpha))
        if result is not None and VERDICTS in result.tables:
            result.job_tags = job_tags(result.tables[VERDICTS], [j for j in jobs if self.name in j.protocols()])
        return result


class GainProtocol(Protocol):
    """Protocol C: how well scores predict the gain; selective use and gap closed."""

    name = "gain"
    title = "C test half"
    outputs = (Output("gain/spearman", "gain spearman", True, "rank correlation"),)

    def min_documents(self, cfg, trainable):
        return sizes.gain_min_documents(cfg["protocol"], trainable)

    def smallest_test_set(self, task, cfg):
        return sizes.gain_test_half(task, int(cfg.get("seed", 0))), "test half"

    def job_line(self, metrics, metric, grid):
        """``C test half: selective hit@10=0.8100 spearman=0.312``."""
        if "gain/selective/quality" not in metrics:
            return None
        return (f"C test half: selective {metric}={shown(metrics['gain/selective/quality'], '.4f')}"
                f" spearman={shown(metrics.get('gain/spearman', math.nan), '.3f')}")

    def headline_metrics(self, metrics, metric, grid):
        return {}

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        from harness.protocols.gain import run_gain_protocol

        p = ctx.protocol
        threshold = p.get("gain_threshold")
        res = run_gain_protocol(
            task, factory, seed=ctx.seed, threshold=None if threshold is None else float(threshold),
            n_folds=int(p["n_folds"]), n_boot=int(p["n_boot"]), min_discordant=int(p["min_discordant"]),
            alpha=float(p["alpha"]), power=float(p["power"]),
        )
        tables = {f"gain_{name}": Table(frame, preview=True, per_question=True) for name, frame in res.tables.items()}
        summary = res.summary()
        decisions = res.tables.get("decisions")
        if decisions is not None and len(decisions):
            summary = _ceiling_summary(summary, ctx, self.name, task.metric, decisions["base"].astype(float).mean(),
                                       "the test half")
        return ProtocolResult(metrics=res.metrics, summary=summary, raw=res, tables=tables)

    def aggregate(self, jobs: list[SweepJob], ctx: SweepContext) -> SweepResult | None:
        """Which policy's score predicts the gain better: Williams' test per gain cell, with
        Bonferroni over its pairs (``harness.protocols.sweep_gain.gain_comparisons``)."""
        from harness.protocols.sweep_gain import format_gain_comparisons, gain_comparisons

        gains = gain_comparisons(jobs, alpha=ctx.alpha)
        if not len(gains):
            return None
        text = format_gain_comparisons(gains)
        return SweepResult(title="Gain prediction (protocol C)", text=text, tables={"gain_comparison": gains},
                           text_files=("gain_comparison",), raw=gains,
                           markdown=f"## Gain prediction (protocol C)\n\n```\n{text}\n```\n")


# ---- the built-in sweep stages' results ------------------------------------------------------
def policy_comparison_result(jobs: list[SweepJob], ctx: SweepContext) -> SweepResult | None:
    """Protocol A's sweep stage: ``policy_comparison.csv`` / ``.txt`` and the "Policy vs policy"
    section; None when the sweep has no FINISHED job to compare."""
    import html

    from harness.protocols.sweep_comparisons import comparisons_frame, sweep_comparisons

    cells = sweep_comparisons(jobs, n_boot=ctx.n_boot, alpha=ctx.alpha)
    if not cells:
        return None
    blocks = [c.text(ctx.alpha) for c in cells]
    text = "\n\n".join(blocks)
    conclusion = "\n".join(c.conclusion(ctx.alpha) for c in cells)
    markdown = "\n".join(["## Policy vs policy", "", *[line for b in blocks for line in ("```", b, "```", "")]])
    page = "\n".join(["<h2>Policy vs policy</h2>", *[f'<pre class="comparison">{html.escape(b)}</pre>' for b in blocks]])
    return SweepResult(title="Policy vs policy", text=text, tables={"policy_comparison": comparisons_frame(cells)},
                       text_files=("policy_comparison",), markdown=markdown + "\n", html=page + "\n", raw=cells,
                       conclusion=conclusion, open_comparisons=[o for c in cells for o in c.open_comparisons(ctx.alpha)])


DECISION_TABLE = "decision_table"
VERDICTS = "verdicts"


def decision_table_result(table, filtered: str = "") -> SweepResult | None:
    """Protocol B's sweep stage from its decision table: ``decision_table.csv`` (every column,
    full precision), ``.json`` (the MLflow UI's table view), ``.md`` and ``.html``, the compact
    console text; ``filtered`` (e.g. "budget 0.25") titles a restricted table (the report's
    ``--budget`` / ``--cost``). The report's section: the verdicts as its lead, then one short
    table per budget and every column folded under them. None when no job ran protocol B."""
    import html

    from harness.protocols import verdict as vd
    from harness.protocols import verdict_render as vr
    from harness.protocols.decision_table_render import (
        budget_html, budget_markdown, conclusions, format_console, format_html, format_markdown, legend,
        open_comparisons,
    )

    if table is None or not len(table):
        return None
    e = html.escape
    title = "Decision table" + (f" ({filtered})" if filtered else "")
    verdicts = vd.verdicts(table, table.attrs.get("fixed_comparisons", []))
    files = {f"{DECISION_TABLE}.md": f"# Decision table\n\n{format_markdown(table)}\n",
             f"{DECISION_TABLE}.html": format_html(table, standalone=True)}
    budgets = sorted(set(table["budget"].dropna().astype(float)))
    for budget in budgets:  # one small page per budget
        files[f"{DECISION_TABLE}_rho{budget:g}.md"] = budget_markdown(table, budget)
    tables = {DECISION_TABLE: table}
    headline = vr.format_console(verdicts)
    lead_md = lead_html = None
    if len(verdicts):
        tables[VERDICTS] = verdicts
        words = vr.legend_text(verdicts)
        lead_md = f"{vr.format_markdown(verdicts)}\n\n{words}\n"
        lead_html = f"{vr.format_html(verdicts)}\n<p class=\"legend\">{e(words)}</p>\n"
        # the console text below the table: as typed, never read as Markdown or HTML
        files[f"{VERDICTS}.md"] = f"# Verdicts\n\n{vr.format_markdown(verdicts)}\n\n{md_code_block(headline)}\n"
    per_budget = [f'<h3>Budget {b:g}</h3>\n<div class="scroll">\n{budget_html(table, b)}\n</div>' for b in budgets]
    page = "\n".join([f"<h2>{e(title)}</h2>", *per_budget, f'<p class="legend">{e(legend(table))}</p>',
                      f"<details><summary>Every column ({len(table)} rows, as decision_table.csv)</summary>",
                      f'<div class="scroll">\n{format_html(table)}\n</div>', "</details>", ""])
    return SweepResult(
        title=title, text=format_console(table), tables=tables, ui_tables=(DECISION_TABLE,), files=files,
        markdown=_decision_markdown(table, title, budgets), html=page, raw=table, conclusion=conclusions(table),
        open_comparisons=open_comparisons(table), headline=headline, params=vd.mlflow_params(verdicts),
        metrics=vd.mlflow_metrics(verdicts), lead_markdown=lead_md, lead_html=lead_html,
    )


def _decision_markdown(table, title: str, budgets: list[float]) -> str:
    """The report's decision table in Markdown: one short table per budget (the parent run's
    ``decision_table_rho<budget>.md`` without its title), every column folded under them."""
    from harness.protocols.decision_table_render import budget_markdown, format_markdown, legend

    parts = [f"## {title}", ""]
    for b in budgets:
        body = budget_markdown(table, b).split("\n", 2)[2]  # drop its own "# ..." title
        parts += [f"### Budget {b:g}", "", body.split("\n\n")[0], ""]
    parts += [md_escape(legend(table)), ""] if budgets else []
    parts += [f"<details><summary>Every column ({len(table)} rows, as decision_table.csv)</summary>", "",
              format_markdown(table), "", "</details>", ""]
    return "\n".join(parts)


# protocol A warns on its held-out questions (ThresholdResult.summary); B and C warn on their test
# questions only when no protocol before them in this order runs, so a job's summary carries the
# ceiling warning once
CEILING_ORDER = ("threshold", "budget", "gain")


def _ceiling_summary(summary: str, ctx: ProtocolContext, name: str, metric: str, base_mean: float, where: str) -> str:
    """``summary`` with the ceiling warning (``ceiling.ceiling_warning``) under its title line
    when the base arm's mean on ``where`` is at ceiling and ``name`` is the first protocol of
    ``CEILING_ORDER`` the job runs."""
    from harness.protocols.ceiling import ceiling_warning

    run = [str(r) for r in (ctx.protocol.get("run") or ())]
    if any(other in run for other in CEILING_ORDER[: CEILING_ORDER.index(name)]):
        return summary
    line = ceiling_warning(metric, base_mean, where)
    if not line:
        return summary
    title, _, rest = summary.partition("\n")
    return f"{title}\n{line}" + (f"\n{rest}" if rest else "")


# ---- protocol B's series and plot -------------------------------------------------------------
FRONTIER_COLUMNS = {
    "outcome": None,  # named by the task metric
    "utility": "utility",
    "realized_usage": "realized_usage",
    "usage_error": "usage_error",
    "violated": "violation_rate",
    "overshoot": "tolerance_overshoot_rate",
    "random_matched": "random_matched",
    "oracle_matched": "oracle_matched",
}


def frontier_series(frontiers, metric: str) -> list[tuple[str, float, int]]:
    """``frontier/<frontier>/<column>`` per budget (mean over splits), step = budget in percent.

    A fixed decision's rows (``fixed``: always-keep / always-extra, no budget) are not a
    frontier and log no series; their point is in the scalar metrics ``budget/fixed/...``.
    """
    if "fixed" in frontiers.columns:
        frontiers = frontiers[~frontiers["fixed"].astype(bool)]
    cols = [c for c in FRONTIER_COLUMNS if c in frontiers.columns]
    if frontiers.empty or not cols:
        return []
    frontiers = frontiers.assign(**{c: frontiers[c].astype(float) for c in cols})
    means = frontiers.groupby(["frontier", "budget"], sort=True)[cols].mean()
    series = []
    for (frontier, budget), row in means.iterrows():
        step = int(round(float(budget) * 100))
        for col in cols:
            series.append((f"frontier/{frontier}/{FRONTIER_COLUMNS[col] or metric}", float(row[col]), step))
    return series


def frontier_png(frontiers, target: Path, metric: str, cfg: Mapping[str, Any]) -> Path:
    """Write the frontier plot, reusing a cached PNG keyed by the plotted numbers.

    Why: drawing costs more than the rest of the logging, and the plot (outcome vs usage) does
    not depend on the cost, so the jobs of one policy at several costs draw the same picture.
    The key also names the drawing's version (``plot_style``, bumped when ``harness.plots``
    draws differently, e.g. a fixed decision as one point), so a changed style never reuses an
    old picture.

    The cached PNG is trusted only through its ``.sha256`` sidecar (``harness.io``): a corrupt
    one is reported, moved aside and redrawn, and the copy in the run must match the recorded
    digest. Where the cache cannot be written the plot is drawn straight into ``target``.
    """
    from harness.errors import HarnessError
    from harness.io import CacheCorrupt, atomic_write, atomic_write_bytes, ensure_verified, sha256_bytes, verify_file
    from harness.plots import frontier_points, plot_frontiers

    plot_style = 3  # 3: split-sd bands, random and oracle references, fixed points
    title = f"{cfg['policy'].get('name', 'policy')} seed={cfg['seed']}"
    points = frontier_points(frontiers).to_dict("list")
    # "file": cached PNGs carry a digest sidecar since 2; older unverified ones are not read
    key = digest_of({"points": points, "metric": metric, "title": title, "style": plot_style, "file": 2})

    def draw(path: Path) -> None:
        plot_frontiers(frontiers, path, metric=metric, title=title)

    try:
        cached = cache_root() / "app" / "plots" / f"{key[:24]}.png"
        ensure_verified(cached, draw, key=key, what="redrawn")
        data = cached.read_bytes()
        if sha256_bytes(data) != verify_file(cached, key=key)["sha256"]:  # replaced while read
            raise OSError("cached plot changed while it was read")
    except (OSError, HarnessError, CacheCorrupt):  # read-only or unusable cache: draw for this run only
        atomic_write(target, draw)
        return Path(target)
    atomic_write_bytes(target, data)
    return Path(target)


