"""Install a plugin package for a test without pip: a module plus a ``.dist-info`` folder with
its entry points, in a temporary folder put on ``sys.path`` (and on ``PYTHONPATH`` for
subprocesses). ``importlib.metadata`` finds such distributions like installed ones."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def write_plugin(root: Path, package: str, source: str | dict[str, str], entry_points: dict[str, dict[str, str]]) -> Path:
    """``root/<package>/__init__.py`` = ``source`` (or one file per ``{file name: source}``) and
    its entry points (``{group: {name: target}}``)."""
    root = Path(root)
    (root / package).mkdir(parents=True, exist_ok=True)
    files = {"__init__.py": source} if isinstance(source, str) else {"__init__.py": "", **source}
    for name, text in files.items():
        (root / package / name).write_text(text, encoding="utf-8")
    dist = root / f"{package}-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n", encoding="utf-8")
    lines = []
    for group, names in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in names.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def activate(monkeypatch, root: Path) -> dict[str, str]:
    """Put ``root`` on sys.path and PYTHONPATH; returns the environment for subprocesses."""
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    for name in [m for m in sys.modules if m.startswith(Path(root).name)]:
        sys.modules.pop(name, None)
    return env
