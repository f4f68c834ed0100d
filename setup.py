"""Package discovery that pyproject.toml cannot express.

The repository keeps its YAML config in the top-level ``conf/`` folder (``ls conf/policy``); the
wheel ships that same folder inside the package as ``harness.conf``, where Hydra finds it as
``pkg://harness.conf`` (harness/conf_files.py). One copy of each YAML, mapped with ``package_dir``.
"""

from setuptools import find_namespace_packages, find_packages, setup

CONF = ["harness.conf"] + [f"harness.conf.{name}" for name in find_namespace_packages(where="conf")]

setup(
    packages=find_packages(include=["harness", "harness.*", "policies", "policies.*"]) + CONF,
    package_dir={"harness.conf": "conf"},
    package_data={name: ["*.yaml"] for name in CONF},
)
