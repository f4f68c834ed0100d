"""The frontier PNG of a report: small multiples, one panel per policy, the leaders first
(``harness.report.frontier.frontier_panels``), one legend under them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.io import atomic_write
from harness.plots import draw_policy_panels, legend_handles, padded_limits, panel_grid
from harness.report.columns import display_name
from harness.report.frontier import fixed_points, frontier_panels, reference_points
from harness.report.model import SweepReport

PLOT_NAME = "frontier.png"


def draw_frontiers(rep: SweepReport, axes) -> bool:
    """Draw one panel per policy (``frontier_panels``, ``harness.plots.draw_policy_panels``) into
    ``axes`` (at least as many as panels; the rest are hidden): its deployable frontier with a
    band of +- the logged sd over splits (``budget/<rho>/deployable/<outcome>_std``), its exact
    frontier dashed, the other policies in grey, random and the oracle at matched usage, the
    fixed decisions as single points with a marker each; x from 0 to 1 and one y-range that
    holds the references, shared by the panels. False if no data."""
    if rep.outcome_metric is None:
        return False
    panels = frontier_panels(rep)
    fixed = fixed_points(rep)
    if not panels and not fixed:
        return False
    refs = {"random (matched usage)": (reference_points(rep, "random_matched"), ":", "dimgray"),
            "oracle (matched usage)": (reference_points(rep, "oracle_matched"), "-.", "black")}
    y_all = draw_policy_panels(axes, panels or [("fixed decisions", {})], main="deployable", second="exact",
                               references=refs, fixed=fixed, ylabel=display_name(rep.outcome_metric))
    lim = padded_limits(y_all)
    if lim is not None:
        for ax in np.ravel(axes):
            ax.set_ylim(*lim)
    return True


def plot_report_frontiers(rep: SweepReport, path: Path) -> bool:
    """Write the frontier PNG (small multiples, one panel per policy, one legend under them);
    False if no data."""
    if rep.outcome_metric is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = panel_grid(max(1, len(frontier_panels(rep))))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows + 0.6), sharex=True, sharey=True,
                             squeeze=False)
    try:
        if not draw_frontiers(rep, axes):
            return False
        handles = legend_handles(axes)
        fig.suptitle(f"sweep {rep.sweep_id} ({rep.experiment}): {display_name(rep.outcome_metric)} against "
                     f"extra-arm usage, one panel per policy, leaders first", fontsize=10)
        fig.tight_layout()
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(4, len(handles)), fontsize=8, frameon=False)
        atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=100, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return True
