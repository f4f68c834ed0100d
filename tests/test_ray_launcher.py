"""The Ray launcher gives the same numbers as the basic launcher (local Ray, 2 CPUs).

`make setup` installs it; skipped only outside CI when it is missing. See docs/launchers.md.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests.helpers.mlflow_layout import same_metrics

try:
    import hydra_plugins.hydra_ray_launcher.ray_launcher  # noqa: F401
except ImportError as exc:  # `make setup` installs it; on CI a missing launcher is a failure
    if os.environ.get("CI"):
        raise RuntimeError("Ray launcher plugin missing on CI: run `make setup`") from exc
    pytest.skip("Ray launcher not installed (make setup installs it)", allow_module_level=True)


def _sweep(tmp_path, name: str, launcher: str | None) -> dict[str, dict[str, float]]:
    from mlflow.tracking import MlflowClient

    work = tmp_path / name
    work.mkdir()
    uri = f"sqlite:///{work / 'mlflow.db'}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "harness", "-m", "experiment=none", "dataset=synthetic",
           "policy=ridge,random", "protocol=threshold_budget", f"tracking.uri={uri}",
           f"hydra.sweep.dir={work / 'multirun'}"]
    if launcher:
        cmd.append(f"hydra/launcher={launcher}")
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp_ids = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(exp_ids, "tags.`route_bench.role` = 'job'")
    assert all(r.info.status == "FINISHED" for r in runs)
    return {r.data.tags["route_bench.policy"]: dict(r.data.metrics) for r in runs}


@pytest.mark.slow
def test_ray_local_matches_basic_launcher(tmp_path):
    basic = _sweep(tmp_path, "basic", None)
    ray = _sweep(tmp_path, "ray", "ray_local")
    assert sorted(basic) == sorted(ray) == ["random", "ridge"]
    for policy in basic:
        assert "heldout/utility" in basic[policy] and "frontier/exact_auc" in basic[policy]
        assert same_metrics(ray[policy], basic[policy]), policy  # same config + seed: same digits
