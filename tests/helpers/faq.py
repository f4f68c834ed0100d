"""The FAQ data file of the dataset-plugin tests: pages of made-up words, each question
repeating words of its gold paragraph (the loader is the worked example of docs/datasets.md).

Why here: the registry tests and the plugin-sweep test load the same file through a plugin.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

N_PAGES, PARAGRAPHS, QUESTIONS = 12, 4, 3


def write_faq(path: Path) -> Path:
    """FAQ pages of made-up words: each question repeats words of its gold paragraph."""
    rng = random.Random(0)
    vocab = [f"w{i:03d}" for i in range(400)]
    pages, questions = {}, []
    for p in range(N_PAGES):
        paragraphs = [" ".join(rng.sample(vocab, 12)) for _ in range(PARAGRAPHS)]
        pages[f"page{p}"] = paragraphs
        for j in range(QUESTIONS):
            gold = rng.randrange(PARAGRAPHS)
            words = paragraphs[gold].split()
            text = "Which Page says " + " ".join(rng.sample(words, 4) + rng.sample(vocab, 2)) + "?"
            questions.append({"id": f"q{p}_{j}", "page": f"page{p}", "text": text, "answer": words[0], "gold": [gold]})
    path.write_text(json.dumps({"pages": pages, "questions": questions}), encoding="utf-8")
    return path
