"""Example plugin: route long questions to the extra arm (long = specific = harder to match)."""

import numpy as np

from policies.base import Policy


class LongQuestionPolicy(Policy):
    """score = question length in words minus ``min_words``; larger = more worth the extra arm."""

    name = "long_question"

    def __init__(self, min_words: int = 0):
        self.min_words = int(min_words)
        self.features = ("q_len_words",)

    def score(self, X, ctx):
        return X["q_len_words"].to_numpy(dtype=float) - self.min_words
