"""The named experiments on the results page, one spec module each, in page order.

Adding a paper: a spec module here (its ``EXPERIMENT``: name, paper, title, render, claims,
differences) and one line in ``EXPERIMENTS``.
"""

from __future__ import annotations

from harness.results.experiments import boolq_answers, seed000, seed002, seed003
from harness.results.spec import Experiment

EXPERIMENTS: tuple[Experiment, ...] = (
    seed000.EXPERIMENT,
    seed003.EXPERIMENT,
    seed002.EXPERIMENT,
    boolq_answers.EXPERIMENT,
)
