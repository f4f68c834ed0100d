"""Frontier plot of protocol B (docs/metrics.md §6): mean outcome against usage, one line per frontier.

Why a PNG per run: the MLflow UI shows it next to the metrics, so a reader sees at a glance
whether the deployable frontier follows the exact one. Matplotlib's Agg backend: no display.

What is drawn, so that the picture does not mislead:
- each frontier as its mean over splits (x = mean realized usage, y = mean outcome) with a band
  of +- one sd over splits of the outcome at each budget (the split-to-split spread);
- references: random at matched usage (its exact expectation, a straight line in usage: per
  split, ``random_matched`` = mean(base) + usage * mean(delta), so the line is drawn from usage
  0 (always-base) to 1 (always-extra)) and the oracle at the exact frontier's usages;
- a fixed-decision policy (always-keep / always-extra) has no frontier: its rows in the
  frontiers table (``frontier == "fixed"``, budget NaN) are drawn as one point, at usage 0 or 1;
- x from 0 to 1 (the whole range of usage) and a y-range that holds the references, so a band
  a few points wide is not magnified as if it were the whole scale.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

FRONTIER_STYLES = {"exact": "-o", "deployable": "-s", "conservative": "--^"}
FIXED = "fixed"
POINT_COLUMNS = ["realized_usage", "outcome", "random_matched", "oracle_matched"]
RANDOM_LABEL = "random (expectation)"
ORACLE_LABEL = "oracle (matched usage)"


def frontier_points(frontiers: pd.DataFrame) -> pd.DataFrame:
    """Mean over splits per (frontier, budget): x = realized usage, y = outcome, plus
    ``outcome_std`` (sd over splits, ddof 0, as the logged ``_std`` metrics). A fixed
    decision's rows give one row with frontier "fixed" and budget NaN."""
    cols = [c for c in POINT_COLUMNS if c in frontiers.columns]
    if frontiers.empty:
        return pd.DataFrame(columns=["frontier", "budget", *cols, "outcome_std"])
    frame = frontiers.assign(**{c: frontiers[c].astype(float) for c in cols})
    grouped = frame.groupby(["frontier", "budget"], sort=True, dropna=False)
    out = grouped[cols].mean().reset_index()
    if "outcome" in cols:
        out["outcome_std"] = grouped["outcome"].std(ddof=0).fillna(0.0).to_numpy()
    return out


def random_line(frontiers: pd.DataFrame) -> tuple[float, float] | None:
    """(intercept, slope) of random's expected outcome against usage, mean over splits: per split
    ``random_matched`` is linear in usage (mean(base) + usage * mean(delta)), fitted on that
    split's non-fixed rows; None when no split has two distinct usages."""
    need = {"realized_usage", "random_matched"}
    if frontiers.empty or not need <= set(frontiers.columns):
        return None
    frame = frontiers[frontiers["frontier"] != FIXED] if "frontier" in frontiers.columns else frontiers
    groups = frame.groupby("split") if "split" in frame.columns else [(0, frame)]
    fits = []
    for _, g in groups:
        x = g["realized_usage"].astype(float).to_numpy()
        y = g["random_matched"].astype(float).to_numpy()
        ok = np.isfinite(x) & np.isfinite(y)
        if len(np.unique(x[ok])) >= 2:
            slope, intercept = np.polyfit(x[ok], y[ok], 1)
            fits.append((intercept, slope))
    if not fits:
        return None
    a, b = np.mean(fits, axis=0)
    return float(a), float(b)


def padded_limits(values, pad: float = 0.05) -> tuple[float, float] | None:
    """(low, high) holding every finite value, with ``pad`` of the span (at least 0.01) each side."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    margin = max(hi - lo, 0.02) * pad + 0.005
    return lo - margin, hi + margin


def plot_frontiers(frontiers: pd.DataFrame, path: str | Path, *, metric: str = "hit@10", title: str = "",
                   ax=None) -> Path | None:
    """Draw the frontier plot (see the module doc) and write it to ``path`` as PNG; with ``ax``
    given, draw into that Axes and write nothing (for tests and callers composing figures)."""
    import matplotlib

    if ax is None:
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    pts = frontier_points(frontiers)
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(5.5, 4.0), dpi=100)
    else:
        fig = ax.figure
    cmap = plt.get_cmap("tab10")
    y_all: list[float] = []
    try:
        for i, (frontier, style) in enumerate(FRONTIER_STYLES.items()):
            sub = pts[pts["frontier"] == frontier].sort_values("realized_usage")
            if not len(sub):
                continue
            color = cmap(i)
            x, y = sub["realized_usage"].to_numpy(float), sub["outcome"].to_numpy(float)
            sd = sub["outcome_std"].to_numpy(float) if "outcome_std" in sub else np.zeros_like(y)
            ax.fill_between(x, y - sd, y + sd, color=color, alpha=0.18, linewidth=0,
                            label=f"{frontier} +- sd over splits")
            ax.plot(x, y, style, color=color, label=frontier)
            y_all += list(y - sd) + list(y + sd)
        line = random_line(frontiers)
        if line is not None:
            a, b = line
            ax.plot([0.0, 1.0], [a, a + b], ":", color="grey", label=RANDOM_LABEL)
            y_all += [a, a + b]
        ref = pts[pts["frontier"] == "exact"]
        if not len(ref):
            ref = pts[(pts["frontier"] != FIXED)]
            ref = ref[ref["frontier"] == ref["frontier"].iloc[0]] if len(ref) else ref
        if len(ref) and "oracle_matched" in ref:
            ref = ref.sort_values("realized_usage")
            if line is None and "random_matched" in ref:
                ax.plot(ref["realized_usage"], ref["random_matched"], ":", color="grey", label=RANDOM_LABEL)
                y_all += list(ref["random_matched"].astype(float))
            ax.plot(ref["realized_usage"], ref["oracle_matched"], "-.", color="black", label=ORACLE_LABEL)
            y_all += list(ref["oracle_matched"].astype(float))
        for _, row in pts[pts["frontier"] == FIXED].iterrows():
            usage = float(row["realized_usage"])
            which = "extra" if usage >= 0.5 else "base"
            ax.plot([usage], [float(row["outcome"])], "*", color="tab:red", markersize=12, linestyle="none",
                    clip_on=False, label=f"fixed decision (always {which})")
            y_all.append(float(row["outcome"]))
        ax.set_xlabel("extra-arm usage (share of questions)")
        ax.set_ylabel(f"mean {metric}")
        ax.set_xlim(0.0, 1.0)
        lim = padded_limits(y_all)
        if lim is not None:
            ax.set_ylim(*lim)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=7)
        if title:
            ax.set_title(title, fontsize=9)
        if not own:
            return None
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        if own:
            plt.close(fig)
    return path
