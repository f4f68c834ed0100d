"""Imports run one way: the import-linter contracts in pyproject.toml hold (the layers, and MLflow
only in tracking and above), every module of harness and policies is in a layer, and the same
check breaks on a planted bad import (so it can fail)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _lint(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (found,) = [c for c in config["contracts"] if c.get("id") == contract_id]
    return found


def _modules() -> list[str]:
    """Every module of harness and policies, from the files (the root package ``harness`` aside:
    it holds only its docstring and version, and a layer named ``harness`` would be everything)."""
    names = []
    for pkg in ("harness", "policies"):
        for path in (REPO / pkg).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(set(names) - {"harness"})


def _covered(module: str, listed: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in listed)


def test_contracts_are_kept():
    proc = _lint(REPO, REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout


def test_every_module_is_in_a_layer_and_under_the_mlflow_rule():
    layers = [name.strip() for layer in _contract("layers")["layers"] for name in layer.split("|")]
    modules = _modules()
    assert "harness.runner.job" in modules and "policies.base" in modules  # the walk found the files
    assert [m for m in modules if not _covered(m, layers)] == []
    # the mlflow contract names every layer below tracking; tracking and above may use the store
    allowed = ["harness.__main__", "harness.results", "harness.report", "harness.runner", "harness.tracking"]
    checked = _contract("mlflow")["source_modules"]
    assert [m for m in modules if not _covered(m, checked + allowed)] == []
    assert not any(_covered(m, checked) for m in allowed)
    assert (REPO / "harness" / "__init__.py").read_text(encoding="utf-8").count("import") == 0


PLANTED = [
    # a lower layer importing a higher one: the layers contract breaks, the mlflow one holds
    ("harness/config/__init__.py", "import harness.app", "harness.config -> harness.app"),
    # MLflow below the tracking layer: the mlflow contract breaks, the layers hold
    ("harness/stats.py", "import mlflow", "harness.stats -> mlflow"),
]


@pytest.mark.parametrize("path, line, chain", PLANTED)
def test_a_bad_import_breaks_a_contract(tmp_path, path, line, chain):
    for pkg in ("harness", "policies"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / path
    target.write_text(target.read_text(encoding="utf-8") + f"\n\ndef _leak():\n    {line}\n", encoding="utf-8")
    proc = _lint(tmp_path, tmp_path)
    assert proc.returncode != 0
    assert "1 kept, 1 broken" in proc.stdout
    assert chain in proc.stdout
