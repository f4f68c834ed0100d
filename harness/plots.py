"""Frontier plot of protocol B (SPEC 6): mean outcome against usage, one line per frontier.

Why a PNG per run: the MLflow UI shows it next to the metrics, so a reader sees at a glance
whether the deployable frontier follows the exact one. Matplotlib's Agg backend: no display.

A fixed-decision policy (always-keep / always-extra) has no frontier: its rows in the frontiers
table (``frontier == "fixed"``, budget NaN) are drawn as one point, at its usage 0 or 1.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FRONTIER_STYLES = {"exact": "-o", "deployable": "-s", "conservative": "--^"}
FIXED = "fixed"
POINT_COLUMNS = ["realized_usage", "outcome", "random_matched", "oracle_matched"]


def frontier_points(frontiers: pd.DataFrame) -> pd.DataFrame:
    """Mean over splits per (frontier, budget): x = realized usage, y = outcome. A fixed
    decision's rows give one row with frontier "fixed" and budget NaN."""
    cols = [c for c in POINT_COLUMNS if c in frontiers.columns]
    if frontiers.empty:
        return pd.DataFrame(columns=["frontier", "budget", *cols])
    frame = frontiers.assign(**{c: frontiers[c].astype(float) for c in cols})
    return frame.groupby(["frontier", "budget"], sort=True, dropna=False)[cols].mean().reset_index()


def plot_frontiers(frontiers: pd.DataFrame, path: str | Path, *, metric: str = "hit@10", title: str = "") -> Path:
    """Write the frontier PNG to ``path``; exact/deployable/conservative plus random and oracle
    at the exact frontier's usage (matched usage, SPEC 6); a fixed decision as a single point."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    pts = frontier_points(frontiers)
    fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=100)
    try:
        for frontier, style in FRONTIER_STYLES.items():
            sub = pts[pts["frontier"] == frontier]
            if len(sub):
                ax.plot(sub["realized_usage"], sub["outcome"], style, label=frontier)
        exact = pts[pts["frontier"] == "exact"]
        if len(exact):
            ax.plot(exact["realized_usage"], exact["random_matched"], ":", color="grey", label="random (matched)")
            ax.plot(exact["realized_usage"], exact["oracle_matched"], ":", color="black", label="oracle (matched)")
        for _, row in pts[pts["frontier"] == FIXED].iterrows():
            usage = float(row["realized_usage"])
            which = "extra" if usage >= 0.5 else "base"
            ax.plot([usage], [float(row["outcome"])], "*", color="tab:red", markersize=12,
                    label=f"fixed decision (always {which})")
        ax.set_xlabel("extra-arm usage (share of questions)")
        ax.set_ylabel(f"mean {metric}")
        ax.set_xlim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=8)
        if title:
            ax.set_title(title, fontsize=9)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
