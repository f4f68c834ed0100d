"""Example plugin: route long questions to the extra arm (long = specific = harder to match).

It follows the policy contract (docs/policies.md): the constructor validates and stores its
parameter unchanged, the features it reads are declared and selected by name, the score of a
question depends on its own row only, and ``policies.check_policy`` passes on it.
"""

from harness.errors import ConfigError
from policies.base import Policy


class LongQuestionPolicy(Policy):
    """score = question length in words minus ``min_words``; larger = more worth the extra arm."""

    name = "long_question"
    features = ("q_len_words",)

    def __init__(self, min_words: int = 0):
        if not isinstance(min_words, int) or isinstance(min_words, bool):
            raise ConfigError("policy.min_words", f"expected an integer, got {min_words!r}")
        self.min_words = min_words

    def score(self, X, ctx):
        return X["q_len_words"].to_numpy(dtype=float) - float(self.min_words)
