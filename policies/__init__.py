"""Routing policies: small classes that score questions; the harness decides with the scores.

The names below are imported on first use (PEP 562), so ``python -m policies.signals`` runs its
module once, and ``import policies`` costs nothing until a policy is needed.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Policy": "policies.base",
    "ScoreContext": "policies.base",
    "check_json_state": "policies.base",
    "AlwaysBase": "policies.builtin",
    "AlwaysExtra": "policies.builtin",
    "RandomPolicy": "policies.builtin",
    "OraclePolicy": "policies.builtin",
    "RidgePolicy": "policies.learned",
    "QPPRouter": "policies.learned",
    "LogisticPolicy": "policies.learned",
    "GBMPolicy": "policies.learned",
    "SingleSignalPolicy": "policies.signals",
    "FeatureDifferencePolicy": "policies.signals",
    "SIGNAL_SIGNS": "policies.signals",
    "check_policy": "policies.checks",
    "PolicyCheckError": "policies.checks",
    "CheckReport": "policies.checks",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'policies' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
