"""The base arm at ceiling: one threshold, and the one warning line, for the protocols' summaries,
the sweep's end, the report and the results page.

Why its own module: the summaries (harness.protocols) and the pages above them (harness.report,
harness.results) read the same number; none of them should import a whole protocol for it.
"""

from __future__ import annotations

# the base arm's held-out mean at which the summary warns that nothing can be rescued (the same
# threshold as the report's sweep warning, harness.report.loading.sweep_warnings)
CEILING = 0.999


def ceiling_warning(metric: str, value: float, where: str = "held-out") -> str | None:
    """The summary's one warning line when the base arm's mean ``value`` of ``metric`` on
    ``where`` is at ceiling (>= ``CEILING``), else None (also for nan)."""
    value = float(value)
    if not value >= CEILING:
        return None
    none = "no question" if value >= 1.0 else "almost no question"
    return (f"warning: the base arm is at ceiling ({metric} = {value:.3f} on {where}): {none} can be rescued; "
            "choose a metric that can tell the arms apart (e.g. arms.metric=all@2 on HotpotQA)")
