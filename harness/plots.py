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
# the fixed decisions: a marker and a colour each, so keep-everywhere and extra-everywhere are
# told apart at a glance (and in greyscale); a plugin's fixed decision takes the next free style
FIXED_STYLES = {"always_keep": ("s", "tab:green"), "always_extra": ("D", "tab:red")}
OTHER_FIXED_STYLES = (("^", "tab:purple"), ("v", "tab:brown"), ("P", "tab:olive"), ("X", "tab:cyan"))


def fixed_style(name: str, i: int = 0) -> tuple[str, str]:
    """(marker, colour) of a fixed decision: its own for always_keep / always_extra, else the
    ``i``-th of ``OTHER_FIXED_STYLES``."""
    return FIXED_STYLES.get(name, OTHER_FIXED_STYLES[i % len(OTHER_FIXED_STYLES)])


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
            marker, color = fixed_style("always_extra" if which == "extra" else "always_keep")
            ax.plot([usage], [float(row["outcome"])], marker=marker, color=color, markersize=9, linestyle="none",
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


# ---------------------------------------------------------------- a sweep's frontiers, small multiples

Curve = list[tuple[float, float, float]]  # (realized usage, outcome, sd over splits; NaN: none)
HIGHLIGHT = "tab:blue"
OTHERS = "0.78"  # light grey: the other policies behind each panel
PANEL_COLUMNS = 4


def panel_grid(n: int, columns: int = PANEL_COLUMNS) -> tuple[int, int]:
    """(rows, columns) of ``n`` small panels."""
    cols = max(1, min(columns, n))
    return -(-max(n, 1) // cols), cols


def draw_policy_panels(axes, panels: list[tuple[str, dict[str, Curve]]], *, main: str, second: str | None,
                       references: dict[str, tuple[list[tuple[float, float]], str, str]],
                       fixed: list[tuple[str, float, float]], ylabel: str) -> list[float]:
    """One panel per policy (``panels``: label -> {frontier: curve}), in the order given: the
    policy's ``main`` frontier in colour with its band (+- sd over splits), its ``second``
    frontier dashed, every other policy's ``main`` frontier in light grey behind it, the
    ``references`` (label -> (points, line style, colour)) and the ``fixed`` decisions (name,
    usage, outcome), each with its own marker. Ten curves on one axis merge into one mass; a
    panel each keeps every policy readable against the rest. Unused axes are hidden. Returns
    every y drawn (for shared limits)."""
    y_all: list[float] = []
    flat = list(np.ravel(axes))
    for ax, (label, curves) in zip(flat, panels):
        for other, others in panels:
            pts = others.get(main)
            if other != label and pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=OTHERS, lw=0.9, zorder=1,
                        label="other policies")
        pts = curves.get(main)
        if pts:
            xs, ys, sds = (list(v) for v in zip(*pts))
            if any(not np.isnan(v) for v in sds):
                sd = [0.0 if np.isnan(v) else v for v in sds]
                lo, hi = [y - d for y, d in zip(ys, sd)], [y + d for y, d in zip(ys, sd)]
                ax.fill_between(xs, lo, hi, color=HIGHLIGHT, alpha=0.18, linewidth=0, zorder=2,
                                label=f"{main} +- sd over splits")
                y_all += lo + hi
            ax.plot(xs, ys, marker="o", ms=3, color=HIGHLIGHT, lw=1.8, zorder=4, label=f"{main} frontier")
            y_all += ys
        pts = curves.get(second) if second else None
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", color=HIGHLIGHT, lw=1.0, zorder=3,
                    label=f"{second} frontier")
            y_all += [p[1] for p in pts]
        for name, (ref, ls, color) in references.items():
            if ref:
                ax.plot([p[0] for p in ref], [p[1] for p in ref], linestyle=ls, color=color, lw=1.2, zorder=3,
                        label=name)
                y_all += [p[1] for p in ref]
        for i, (name, x, y) in enumerate(fixed):
            marker, color = fixed_style(name, i)
            ax.plot([x], [y], marker=marker, ms=8, linestyle="none", color=color, clip_on=False, zorder=5,
                    markeredgecolor="black", markeredgewidth=0.6, label=f"{name} (fixed, usage {x:g})")
            y_all.append(y)
        ax.set_title(label, fontsize=9)
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    rows, cols = np.shape(np.atleast_2d(axes)) if np.ndim(axes) == 2 else (1, len(flat))
    for k, ax in enumerate(flat[: len(panels)]):
        if k % cols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        if k + cols >= len(panels):
            ax.set_xlabel("extra-arm usage", fontsize=9)
    return y_all


def legend_handles(axes) -> dict:
    """label -> one artist, over every panel, in first-drawn order (one legend for the figure)."""
    handles: dict = {}
    for ax in np.ravel(axes):
        for artist in [*ax.get_lines(), *ax.collections]:
            label = artist.get_label()
            if label and not label.startswith("_"):
                handles.setdefault(label, artist)
    return handles
