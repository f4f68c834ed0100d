"""Configs composed outside the Hydra app (``table build``, power, the sweep check)."""

from __future__ import annotations

from typing import Sequence

from hydra import compose

from harness.conf_files import initialize_conf


def compose_config(overrides: Sequence[str], return_hydra_config: bool = False):
    """The job config conf/ composes for ``overrides``, as the app would (``table build`` and
    the sweep check need it outside a Hydra app)."""
    with initialize_conf():
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)
