"""Routing policies: small classes that score questions; the harness decides with the scores."""

from policies.base import Policy, ScoreContext

__all__ = ["Policy", "ScoreContext"]
