"""The job config: importing this package registers the structured schema (``schema``) in Hydra's
ConfigStore and the resolvers conf/ uses (``resolvers``), so conf/ composes.

Its modules, one concern each: ``schema`` (the dataclasses Hydra types the config with),
``limits`` (bounds of counts), ``values`` (range checks), ``arm_checks`` and ``cost`` (checks of
those groups), ``store`` (the tracking store a job names), ``validation`` (``validate``: every
check, in order, before any work), ``compose`` (configs composed outside the app),
``bad_input`` (a Hydra / OmegaConf error as the bad input it is), ``config_dir`` (a
``--config-dir`` before Hydra reads it).
"""

from __future__ import annotations

from harness.conf_files import CONF_DIR, CONF_SOURCE  # noqa: F401 - the app's config
from harness.config.resolvers import register_env_resolver, register_metric_resolver
from harness.config.schema import register_configs

register_metric_resolver()
register_env_resolver()
register_configs()
