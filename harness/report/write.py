"""The report's files in one folder: ``report.md``, ``report.html`` and, where the sweep logged
frontier data, ``frontier.png``, each written atomically."""

from __future__ import annotations

import os
from pathlib import Path

from harness.io import atomic_write_text
from harness.report.frontier_plot import PLOT_NAME, plot_report_frontiers
from harness.report.html_page import render_html
from harness.report.markdown_page import render_markdown
from harness.report.model import SweepReport


def write_report(rep: SweepReport, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write report.md, report.html and (if there is frontier data) frontier.png atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_path = out / PLOT_NAME
    return write_pages(rep, out, plot_path if plot_report_frontiers(rep, plot_path) else None)


def write_pages(rep: SweepReport, out: Path, plot_path: Path | None) -> dict[str, Path]:
    """report.md (linking the frontier PNG ``plot_path`` by name) and report.html (embedding it);
    without ``plot_path`` both say no frontier was drawn."""
    plot_bytes = plot_path.read_bytes() if plot_path is not None else None
    paths = {
        "markdown": atomic_write_text(
            out / "report.md", render_markdown(rep, plot_path.name if plot_path is not None else None)
        ),
        "html": atomic_write_text(out / "report.html", render_html(rep, plot_bytes)),
    }
    if plot_path is not None:
        paths["plot"] = plot_path
    return paths
