"""The per-job frontier plot, checked through matplotlib's Axes (not pixels)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from harness.plots import ORACLE_LABEL, RANDOM_LABEL, frontier_points, plot_frontiers  # noqa: E402

BASE = (0.70, 0.74)  # per split: mean(base); mean(delta) below
DELTA = (0.10, 0.06)


def _frontiers() -> pd.DataFrame:
    """Two splits, exact + deployable at three budgets; outcomes in a narrow 0.73-0.76 band."""
    rows = []
    for split, (b, d) in enumerate(zip(BASE, DELTA)):
        for rho in (0.25, 0.50, 0.75):
            for fr, shift in (("exact", 0.0), ("deployable", 0.01)):
                u = rho + shift
                rows.append(dict(split=split, budget=rho, frontier=fr, realized_usage=u,
                                 outcome=0.735 + 0.02 * rho + 0.004 * split - shift,
                                 random_matched=b + u * d, oracle_matched=min(1.0, b + 2.5 * u * d)))
    return pd.DataFrame(rows)


def _by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_frontier_plot_bands_references_and_limits():
    f = _frontiers()
    fig, ax = plt.subplots()
    try:
        assert plot_frontiers(f, "unused.png", ax=ax) is None
        lines = _by_label(ax)
        pts = frontier_points(f)
        # bands: one PolyCollection per frontier spanning mean +- sd over splits
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 2
        exact = pts[pts.frontier == "exact"].sort_values("realized_usage")
        assert np.allclose(exact.outcome_std, 0.002)  # two splits 0.004 apart: sd 0.002
        verts = np.concatenate([p.vertices for p in bands[0].get_paths()])
        assert verts[:, 1].min() == pytest.approx((exact.outcome - exact.outcome_std).min())
        assert verts[:, 1].max() == pytest.approx((exact.outcome + exact.outcome_std).max())
        # frontier lines: mean over splits at the mean realized usage
        assert np.allclose(lines["exact"].get_xdata(), exact.realized_usage)
        assert np.allclose(lines["exact"].get_ydata(), exact.outcome)
        # random: its exact expectation, a line from usage 0 (always-base) to 1 (always-extra)
        rnd = lines[RANDOM_LABEL]
        assert list(rnd.get_xdata()) == [0.0, 1.0]
        assert np.allclose(rnd.get_ydata(), [np.mean(BASE), np.mean(BASE) + np.mean(DELTA)])
        # oracle at the exact frontier's usage
        orc = lines[ORACLE_LABEL]
        assert np.allclose(orc.get_xdata(), exact.realized_usage)
        assert np.allclose(orc.get_ydata(), exact.oracle_matched)
        # axes: usage 0..1; y holds the references, not only the 0.73-0.76 band
        assert ax.get_xlim() == (0.0, 1.0)
        lo, hi = ax.get_ylim()
        refs = np.concatenate([rnd.get_ydata(), orc.get_ydata()])
        assert lo <= refs.min() and hi >= refs.max()
        assert hi - lo > 0.1
    finally:
        plt.close(fig)


@pytest.mark.parametrize("usage", [0.0, 1.0])
def test_fixed_decision_is_one_point(usage, tmp_path):
    f = pd.DataFrame([dict(split=s, budget=np.nan, frontier="fixed", realized_usage=usage,
                           outcome=0.7 + 0.01 * s, random_matched=0.7, oracle_matched=0.7)
                      for s in range(3)])
    fig, ax = plt.subplots()
    try:
        plot_frontiers(f, "unused.png", ax=ax)
        fixed = [ln for ln in ax.get_lines() if ln.get_label().startswith("fixed decision")]
        assert len(fixed) == 1
        assert list(fixed[0].get_xdata()) == [usage]
        assert fixed[0].get_ydata()[0] == pytest.approx(0.71)
        assert fixed[0].get_linestyle() == "None"
        assert ax.get_xlim() == (0.0, 1.0)
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    finally:
        plt.close(fig)
    assert plot_frontiers(_frontiers(), tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
