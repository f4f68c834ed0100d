"""Routing policies: small classes that score questions; the harness decides with the scores."""

from policies.base import Policy, ScoreContext
from policies.builtin import AlwaysBase, AlwaysExtra, OraclePolicy, RandomPolicy
from policies.learned import GBMPolicy, LogisticPolicy, QPPRouter, RidgePolicy
from policies.signals import SIGNAL_SIGNS, SingleSignalPolicy

__all__ = [
    "Policy",
    "ScoreContext",
    "AlwaysBase",
    "AlwaysExtra",
    "RandomPolicy",
    "OraclePolicy",
    "RidgePolicy",
    "QPPRouter",
    "LogisticPolicy",
    "GBMPolicy",
    "SingleSignalPolicy",
    "SIGNAL_SIGNS",
]
