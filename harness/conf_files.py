"""Where the app's YAML config lives, in a checkout and once installed.

Why: the repository keeps the one copy of each YAML in its top-level ``conf/`` folder (users run
``ls conf/policy``); a wheel ships that folder inside the package as ``harness.conf`` (setup.py),
which Hydra reads as ``pkg://harness.conf``. Everything that reads a YAML of ``conf/`` asks here,
so a checkout, an editable install and a plain ``pip install`` all find the same files.
"""

from __future__ import annotations

from pathlib import Path

CONF_PACKAGE = "harness.conf"
_PACKAGED = Path(__file__).resolve().parent / "conf"

if _PACKAGED.is_dir():  # installed from a wheel: the package harness.conf
    CONF_DIR = _PACKAGED
    CONF_SOURCE = f"pkg://{CONF_PACKAGE}"
else:  # a checkout (or an editable install): the repository's conf/ folder
    CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
    CONF_SOURCE = str(CONF_DIR)


def initialize_conf():
    """Hydra's compose API over the app's config, from the same source as its ``hydra.main``."""
    from hydra import initialize_config_dir, initialize_config_module

    if CONF_SOURCE.startswith("pkg://"):
        return initialize_config_module(config_module=CONF_PACKAGE, version_base="1.3")
    return initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3")
