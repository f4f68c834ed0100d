"""Frontier plot of protocol B (SPEC 6): mean outcome against usage, one line per frontier.

Why a PNG per run: the MLflow UI shows it next to the metrics, so a reader sees at a glance
whether the deployable frontier follows the exact one. Matplotlib's Agg backend: no display.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FRONTIER_STYLES = {"exact": "-o", "deployable": "-s", "conservative": "--^"}


def frontier_points(frontiers: pd.DataFrame) -> pd.DataFrame:
    """Mean over splits per (frontier, budget): x = realized usage, y = outcome."""
    return (
        frontiers.groupby(["frontier", "budget"], sort=True)[["realized_usage", "outcome", "random_matched", "oracle_matched"]]
        .mean()
        .reset_index()
    )


def plot_frontiers(frontiers: pd.DataFrame, path: str | Path, *, metric: str = "hit@10", title: str = "") -> Path:
    """Write the frontier PNG to ``path``; exact/deployable/conservative plus random and oracle
    at the exact frontier's usage (matched usage, SPEC 6)."""
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
        ax.set_xlabel("extra-arm usage (share of questions)")
        ax.set_ylabel(f"mean {metric}")
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
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
