"""Headless Chromium for the MLflow UI tests: where it is, how to install it, the flags it runs
with, and the folder its screenshots are kept in (``test-artifacts/``, gitignored).

Why here: the MLflow UI and decision-table sweep tests render pages with the same browser; the
``chromium`` fixture (tests/helpers/fixtures.py) installs it once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1000",
]


def _install_chromium() -> str | None:
    """Path of a working chromium, installing the Debian package if allowed; else None."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "chromium"], env=env,
                       capture_output=True, timeout=900)
    return CHROMIUM if Path(CHROMIUM).exists() else None
