"""Imports run one way: the import-linter contract in pyproject.toml holds, and the same check
breaks when a lower layer imports a higher one (so it can fail)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _lint(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_layers_contract_is_kept():
    proc = _lint(REPO, REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 kept, 0 broken" in proc.stdout


def test_a_backward_import_breaks_the_contract(tmp_path):
    for pkg in ("harness", "policies"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "harness" / "app.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n\ndef _leak():\n    import harness.tracking.mlflow_tracker\n",
                      encoding="utf-8")
    proc = _lint(tmp_path, tmp_path)
    assert proc.returncode != 0
    assert "0 kept, 1 broken" in proc.stdout
    assert "harness.app -> harness.tracking.mlflow_tracker" in proc.stdout
