"""The app's YAML config; installed, this folder is the package ``harness.conf`` (setup.py).

Hydra reads a config package (``pkg://harness.conf``) only when it holds an ``__init__.py``.
"""
