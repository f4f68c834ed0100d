"""Sentences and headings shared by the experiments' sections: what an interval allows us to
say, a cost column's heading, and the sweep's provenance lines.

What the intervals allow is said in words from the interval itself: a difference is claimed
only when its 95% interval excludes 0 (protocol A's document bootstrap, the decision table's
Holm-adjusted mark, Williams' Bonferroni-adjusted p); otherwise the page says the questions
cannot tell the two apart.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from harness.markdown import md_code
from harness.results.cite import Page
from harness.results.sweeps import SweepView
from harness.store_schema import TAG_CODE_VERSION, TAG_DATASET_FINGERPRINT, TAG_GIT_COMMIT, TAG_TABLE_SHA256


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


def cost_heading(view: SweepView, cost: str, page: Page) -> str:
    """The column heading of one cost config: the abstract c, or the measured c with the
    marginal cost and price it is derived from (``cost.unit`` / ``cost.price``), cited."""
    run = next((r for r in view.runs if r.data.params.get("cost.name") == cost), None)
    if run is None:
        return cost
    if "cost/derived_c" in run.data.metrics:
        unit = run.data.params.get("cost.unit", "")
        return (f"ours, measured: c = {page.metric(run, 'cost/derived_c', decimals=5)} "
                f"({page.metric(run, f'cost/marginal_{unit}_per_question', decimals=1)} {unit} per call x "
                f"{page.metric(run, f'cost/price_per_{unit}', decimals=6)} per {unit})")
    return f"ours, c = {page.metric(run, 'cost', decimals=4) if 'cost' in run.data.metrics else run.data.params.get('cost.c', '?')}"


def provenance(page: Page, view: SweepView) -> None:
    """Which sweep a dataset's section reads (command, runs, fingerprints, code), and warnings
    when the sweep's runs are fewer than its jobs or span several seeds."""
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
