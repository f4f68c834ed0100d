"""A policy may read the question text (``needs_text = True`` -> ``ScoreContext.texts``, from the
outcome table's ``question`` column), never as a feature; tested with a plugin that routes the
questions holding a digit."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from harness.errors import FeatureError
from harness.protocols.common import score_task
from harness.task import RoutingTask
from tests.helpers.plugin_tools import activate, write_plugin

DIGITS = '''
import numpy as np
from policies.base import Policy


class DigitQuestion(Policy):
    """Route the questions that hold a digit (numbers are hard for dense retrieval)."""

    name = "digit_question"
    needs_text = True

    def score(self, X, ctx):
        return np.array([1.0 if any(ch.isdigit() for ch in text) else 0.0 for text in ctx.texts])
'''


def _table(n: int = 120, with_text: bool = True) -> pd.DataFrame:
    """Questions of which every third holds a digit; the extra arm b is right exactly there."""
    rows = []
    for i in range(n):
        digit = i % 3 == 0
        text = f"what happened in {1900 + i}" if digit else f"what happened in the {'ab'[i % 2]} era"
        rows.append({"qid": f"q{i:03d}", "doc_id": f"d{i:03d}", **({"question": text} if with_text else {}),
                     "a.correct": 0.0 if digit else 1.0, "b.correct": 1.0, "feat.x": float(i % 5)})
    return pd.DataFrame(rows)


@pytest.fixture
def digit_policy(tmp_path, monkeypatch):
    activate(monkeypatch, write_plugin(tmp_path / "site", "digit_ext", DIGITS,
                                       {"rag_route_bench.policies": {"digit_question": "digit_ext:DigitQuestion"}}))
    from policies.registry import make_policy, register_policy_configs

    register_policy_configs()  # policy=digit_question for the in-process CLI, whenever harness.config was imported
    yield make_policy({"_target_": "policies.registry.load_entry_point", "plugin": "digit_question"})
    from hydra.core.config_store import ConfigStore

    # the plugin leaves with the test: so does its config node (a later policy=glob(*) in this
    # process must not meet a policy whose entry point is gone)
    ConfigStore.instance().repo.get("policy", {}).pop("digit_question.yaml", None)


def test_the_policy_reads_the_text_and_routes_the_digit_questions(digit_policy):
    table = _table()
    task = RoutingTask.from_table(table, "a", "b", metric="correct", cost_column=None)
    scores = score_task(digit_policy, task, seed=0)
    by_qid = dict(zip(table["qid"], table["question"]))
    expected = [1.0 if re.search(r"\d", by_qid[q]) else 0.0 for q in task.qids]  # the rule, written again
    np.testing.assert_array_equal(scores, expected)
    np.testing.assert_array_equal(scores, task.delta)  # the extra arm is right exactly where it routes
    assert "question" not in task.features.columns  # the text is never a feature
    part = task.take(np.array([5, 0, 3]))  # a split keeps each question's text
    assert list(part.texts) == [by_qid[q] for q in part.qids]


def test_only_a_policy_that_asks_gets_the_text():
    from policies.base import Policy

    seen = []

    class Records(Policy):
        name = "records"

        def score(self, X, ctx):
            seen.append(ctx.texts)
            return np.zeros(len(ctx.qids))

    score_task(Records(), RoutingTask.from_table(_table(), "a", "b", metric="correct", cost_column=None), 0)
    assert seen == [None]


def test_a_table_without_text_is_refused_naming_policy_and_column(digit_policy):
    task = RoutingTask.from_table(_table(with_text=False), "a", "b", metric="correct", cost_column=None)
    with pytest.raises(FeatureError, match=r"policy digit_question .*needs_text = True.*no 'question' column"):
        score_task(digit_policy, task, seed=0)


def test_check_policy_passes_on_a_text_policy(digit_policy):
    from policies import check_policy

    check_policy(digit_policy)  # the synthetic table: stand-in texts
    check_policy(digit_policy, table=_table().rename(columns={"a.correct": "keep.hit@10", "b.correct": "hybrid.hit@10"}))


def test_a_job_routes_on_the_text(digit_policy, cli, tmp_path):
    frame = _table(240).rename(columns={"doc_id": "group"})
    frame["a.cost.tokens"], frame["b.cost.tokens"] = 10.0, 50.0
    frame.to_csv(tmp_path / "o.csv", index=False)
    code, out, err = cli(["dataset=outcomes", "dataset.path=o.csv", "arms.base=a", "arms.extra=b", "arms.metric=correct",
                          "policy=digit_question", "protocol=threshold", "cost.c=0.1"])
    assert code == 0, err
    # on the held-out questions the rule calls the extra arm exactly on the rescues: every answer right
    rescues = int(re.search(r"held-out: n=\d+\s+rescues=(\d+)\s+harms=0", out).group(1))
    assert re.search(rf"^policy\s+1\.0000\s+\S+\s+{rescues}\s", out, flags=re.M), out
