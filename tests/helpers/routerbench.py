"""A RouterBench-shaped table (``<model>`` score, ``<model>|total_cost``, ``sample_id``, ``prompt``,
``eval_name``) of three models, deterministic: the outcome-table tests read it as a file of
logged answers (docs/own_arms.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

MODELS = (("gpt-4-1106-preview", 1.5, 0.01), ("mistralai/mixtral-8x7b-chat", 0.5, 0.0006),
          ("meta/llama-2-70b-chat", 0.0, 0.0009))


def routerbench(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """RouterBench's column convention: ``<model>`` score, ``<model>|total_cost``, sample_id, prompt."""
    rng = np.random.default_rng(seed)
    hard = rng.normal(size=n)
    rows = {"sample_id": [f"mmlu.{i}" for i in range(n)], "prompt": [f"q {i}" for i in range(n)],
            "eval_name": [f"task{i % 10}" for i in range(n)]}
    for model, skill, price in MODELS:
        rows[model] = (rng.random(n) < 1 / (1 + np.exp(hard - skill))).astype(int)
        rows[f"{model}|total_cost"] = price * (1 + rng.random(n))
    return pd.DataFrame(rows)
