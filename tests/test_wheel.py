"""The package works outside the checkout: the wheel holds every module and every YAML of conf/
(as the package ``harness.conf``), Hydra composes the app's config from the installed copy
through ``pkg://harness.conf``, and (slow) an installed ``route-bench`` runs the smoke sweep from
an empty folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.store_schema import TAG_POLICY, TAG_ROLE

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "README.md", "harness", "policies", "conf")


def _env(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI")}
    return {**env, "HARNESS_CACHE_DIR": str(cache)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``pip wheel --no-deps`` builds from a copy of the repository's sources."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (built,) = out.glob("rag_route_bench-*.whl")
    return built


def test_wheel_holds_every_module_and_every_yaml(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    yamls = sorted((REPO / "conf").rglob("*.yaml"))
    assert len(yamls) > 50 and (REPO / "conf" / "policy" / "ridge.yaml") in yamls  # the glob is not empty
    missing = [str(p.relative_to(REPO)) for p in yamls if f"harness/{p.relative_to(REPO).as_posix()}" not in names]
    assert missing == [], f"YAML of conf/ missing from the wheel (as harness/conf/...): {missing}"
    modules = [p.relative_to(REPO).as_posix() for pkg in ("harness", "policies")
               for p in (REPO / pkg).rglob("*.py") if "__pycache__" not in p.parts]
    assert "harness/runner/job.py" in modules
    assert [m for m in modules if m not in names] == [], "modules missing from the wheel (setup.py packages)"
    assert "harness/conf/__init__.py" in names  # Hydra reads a config package only with one


def test_config_composes_from_the_installed_copy(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # installing a pure wheel is unpacking it
    empty = tmp_path / "empty"
    empty.mkdir()
    code = (
        "import harness, json\n"
        "from harness.config import CONF_DIR, CONF_SOURCE\n"
        "from harness.config.compose import compose_config\n"
        "cfg = compose_config(['experiment=smoke'], return_hydra_config=True)\n"
        "sources = [(s.provider, s.schema, s.path) for s in cfg.hydra.runtime.config_sources]\n"
        "print(json.dumps({'harness': harness.__file__, 'conf_dir': str(CONF_DIR), 'source': CONF_SOURCE,\n"
        "                  'sources': sources, 'dataset': cfg.dataset.name, 'policies': sorted(\n"
        "                  p.stem for p in (CONF_DIR / 'policy').glob('*.yaml'))}))\n"
    )
    env = {**_env(tmp_path / "cache"), "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=empty, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(got["harness"]).parent == site / "harness"
    assert Path(got["conf_dir"]) == site / "harness" / "conf"
    assert got["source"] == "pkg://harness.conf"
    assert ["main", "pkg", "harness.conf"] in got["sources"]  # Hydra read the package
    assert got["dataset"] == "synthetic"  # experiment=smoke overrides the dataset
    assert got["policies"] == sorted(p.stem for p in (REPO / "conf" / "policy").glob("*.yaml"))


@pytest.mark.slow
def test_installed_route_bench_runs_the_smoke_sweep_from_an_empty_folder(wheel, tmp_path):
    """A new virtualenv that reuses this one's dependencies (a .pth line) gets the wheel alone."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    (site / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--no-deps", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = subprocess.run([str(venv / "bin" / "route-bench"), "-m", "experiment=smoke"], cwd=empty,
                          env=_env(tmp_path / "cache"), capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{empty / 'mlruns' / 'mlflow.db'}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    jobs = [r for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    parents = [r for r in runs if r.data.tags.get(TAG_ROLE) == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(jobs) == 4 and all(r.info.status == "FINISHED" for r in jobs)  # policy x cost.c: 2 x 2
    assert {r.data.tags[TAG_POLICY] for r in jobs} == {"always_keep", "ridge"}
