"""A plugin installed beside the harness (``pip install --target DIR`` + ``PYTHONPATH``, the venv
untouched) is found, and its two selection forms (docs/plugins.md) make the same policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

COMPOSE_BOTH = """
import json, sys
from harness.app import to_plain
from harness.config.compose import compose_config
from policies.registry import make_policy
out = {}
for form, overrides in (("the way", ["policy=long_question", "policy.min_words=3"]),
                        ("the same thing", ["policy=plugin", "policy.plugin=long_question", "+policy.min_words=3"])):
    cfg = compose_config(overrides + ["dataset=synthetic"])
    node = to_plain(cfg)["policy"]
    p = make_policy(node)
    out[form] = {"node": node, "class": type(p).__module__ + ":" + type(p).__qualname__, "params": p.get_params(), "name": p.name}
print(json.dumps(out))
"""


def test_plugin_beside_the_harness_is_found_without_touching_its_venv(installed_plugin):
    dist = metadata.distribution("route-bench-example-plugin")
    where = Path(dist.locate_file("")).resolve()
    assert not where.is_relative_to(Path(sys.prefix).resolve())  # not in the harness's venv
    assert str(where) in os.environ["PYTHONPATH"].split(os.pathsep)  # the --target folder, on PYTHONPATH
    env = {**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"]}
    listed = subprocess.run([sys.executable, "-m", "harness", "policies"], capture_output=True, text=True, env=env,
                            timeout=300, check=True).stdout
    line = next(row for row in listed.splitlines() if row.split()[:1] == [installed_plugin])
    assert "entry-point" in line
    got = subprocess.run([sys.executable, "-c", COMPOSE_BOTH], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, got.stderr
    forms = json.loads(got.stdout)
    # the same job config (so the same config hash), the same class and parameters
    assert forms["the way"] == forms["the same thing"] == {
        "node": {"name": installed_plugin, "_target_": "policies.registry.load_entry_point", "plugin": installed_plugin,
                 "min_words": 3},
        "class": "route_bench_example_plugin:LongQuestionPolicy", "params": {"min_words": 3}, "name": installed_plugin}
