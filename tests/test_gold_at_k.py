"""all@k / recall@k from the base table's rankings and the dataset's gold units (the built-in
``gold_at_k`` block), the per-dataset default metric (all@2 on HotpotQA, hit@10 elsewhere), and
the summary's warning when the base arm is at ceiling."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import app
from harness.arm_blocks import ArmBlock, blocks_for
from harness.arm_blocks.build import add_blocks
from harness.config.compose import compose_config
from harness.config.validation import validate
from harness.data.schema import Dataset, Question, Unit
from harness.errors import ConfigError, HarnessError
from harness.gold_metrics import gold_metric, needs_gold_block
from harness.metric_blocks import GoldAtK
from harness.retrieval.arms import ARMS
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask

POOL = 14  # units per document: some gold units fall outside every top 10
WARNING = "warning: the base arm is at ceiling"


# ---- a hand-made dataset and outcome table --------------------------------------------------
def _units(doc: str) -> list[Unit]:
    return [Unit(f"{doc}#{i}", doc, i, "paragraph", f"text {doc} {i}") for i in range(POOL)]


def _handmade(seed: int = 0, n_random: int = 20) -> tuple[Dataset, pd.DataFrame]:
    """Questions with 1, 2 and 3 gold units, one whose gold unit no arm ranks in its top 10, one
    without evidence, and ``n_random`` more with random gold sets; each arm a random top 10."""
    rng = np.random.default_rng(seed)
    fixed = {  # qid -> gold unit positions
        "q_one": [3], "q_two": [0, 5], "q_three": [1, 2, 7], "q_outside": [13], "q_none": [],
    }
    specs = list(fixed.items()) + [
        (f"q_r{i:02d}", sorted(rng.choice(POOL, size=int(rng.integers(1, 5)), replace=False).tolist()))
        for i in range(n_random)
    ]
    documents, questions, pools, rows = {}, [], {}, []
    for i, (qid, gold_pos) in enumerate(specs):
        doc = f"doc{i % 6}"  # several questions per document
        documents.setdefault(doc, _units(doc))
        pools[doc] = [u.unit_id for u in documents[doc]]
        gold = tuple(f"{doc}#{p}" for p in gold_pos)
        questions.append(Question(qid, doc, doc, f"question {qid}", gold_unit_ids=gold))
        row = {"qid": qid, "doc_id": doc, "pool_id": doc, "has_evidence": bool(gold), "n_gold": len(gold)}
        for arm in ARMS:
            order = rng.permutation(POOL - 1)[:10]  # never unit 13: q_outside's gold is in no top 10
            if qid == "q_two" and arm == "keep":
                order = np.array([0, 5, 1, 2, 3, 4, 6, 7, 8, 9])  # both gold units at ranks 1 and 2
            top = [f"{doc}#{p}" for p in order]
            row[f"{arm}.top10"] = top
            found = len(set(gold) & set(top))
            row[f"{arm}.hit@10"] = int(found > 0)
            row[f"{arm}.recall@10"] = found / len(gold) if gold else float("nan")
        rows.append(row)
    return Dataset("handmade", documents, questions, pools), pd.DataFrame(rows)


def _brute(table: pd.DataFrame, dataset: Dataset) -> dict[str, list[float]]:
    gold = {q.qid: list(q.gold_unit_ids) for q in dataset.questions}
    out: dict[str, list[float]] = {}
    for arm in ARMS:
        for k in range(1, 11):
            all_k, rec_k = [], []
            for qid, top in zip(table["qid"], table[f"{arm}.top10"]):
                g = gold[qid]
                if not g:
                    all_k.append(float("nan"))
                    rec_k.append(float("nan"))
                    continue
                inside = 0
                for unit in g:
                    if unit in list(top)[:k]:
                        inside += 1
                all_k.append(1.0 if inside == len(g) else 0.0)
                rec_k.append(inside / len(g))
            out[f"{arm}.all@{k}"] = all_k
            out[f"{arm}.recall@{k}"] = rec_k
    return out


@pytest.fixture
def handmade(tmp_path):
    dataset, table = _handmade()
    joined, builds = add_blocks(table, [GoldAtK()], dataset, base_key="handmade-base", cache_dir=tmp_path / "blocks")
    return dataset, table, joined, builds


def test_all_and_recall_at_k_equal_a_brute_force_loop(handmade):
    dataset, table, joined, builds = handmade
    expected = _brute(table, dataset)
    for col, values in expected.items():
        got = joined[col].astype(float).to_numpy()
        np.testing.assert_array_equal(got, np.array(values, dtype=float), err_msg=col)
    # the base table's recall@10 is left as it was: the block does not write it
    assert "keep.recall@10" not in builds[0].columns
    pd.testing.assert_series_equal(joined["keep.recall@10"], table["keep.recall@10"])
    assert len(builds[0].columns) == len(ARMS) * (10 + 9)


def test_the_hand_made_cases(handmade):
    _, _, joined, _ = handmade
    row = joined.set_index("qid")
    # one gold unit: all@k is hit@k; two: both needed; three: never all in the top 2
    for arm in ARMS:
        assert row.loc["q_one", f"{arm}.all@10"] == row.loc["q_one", f"{arm}.hit@10"]
        assert row.loc["q_three", f"{arm}.all@2"] == 0.0
        assert row.loc["q_outside", f"{arm}.all@10"] == 0.0 and row.loc["q_outside", f"{arm}.recall@9"] == 0.0
        assert math.isnan(row.loc["q_none", f"{arm}.all@2"]) and math.isnan(row.loc["q_none", f"{arm}.recall@2"])
    assert row.loc["q_two", "keep.all@2"] == 1.0 and row.loc["q_two", "keep.recall@2"] == 1.0
    assert row.loc["q_two", "keep.all@1"] == 0.0 and row.loc["q_two", "keep.recall@1"] == 0.5


def test_the_block_is_cached_and_reused(handmade, tmp_path):
    dataset, table, joined, builds = handmade
    again, builds2 = add_blocks(table, [GoldAtK()], dataset, base_key="handmade-base", cache_dir=tmp_path / "blocks")
    assert builds2[0].key == builds[0].key and builds2[0].chunks_computed == 0
    pd.testing.assert_frame_equal(again, joined)
    other, builds3 = add_blocks(table, [GoldAtK()], dataset, base_key="another-base", cache_dir=tmp_path / "blocks")
    assert builds3[0].key != builds[0].key  # keyed by the base table's key


def test_routing_task_on_all_and_recall(handmade):
    _, table, joined, _ = handmade
    task = RoutingTask.from_table(joined, metric="all@2", cost_column=None)
    assert task.n == len(table) - 1 and "q_none" not in set(task.qids)  # only questions with evidence
    assert not task.continuous and set(np.unique(task.delta)) <= {-1.0, 0.0, 1.0}
    rec = RoutingTask.from_table(joined, metric="recall@2", cost_column=None)
    assert rec.continuous and rec.n == task.n
    # without the block the error says where all@k comes from
    with pytest.raises(HarnessError, match="gold_at_k"):
        RoutingTask.from_table(table, metric="all@2", cost_column=None)


# ---- the join rules a metric block relies on -------------------------------------------------
class _WritesCost(ArmBlock):
    name, metrics_for = "writes_cost", ("keep",)

    def compute(self, rows, dataset):
        return pd.DataFrame({"qid": rows["qid"], "keep.cost.extra_ms": 1.0})


class _NoMetricsFor(ArmBlock):
    name = "no_metrics_for"

    def compute(self, rows, dataset):
        return pd.DataFrame({"qid": rows["qid"], "keep.all@2": 1.0})


class _Overwrites(ArmBlock):
    name, metrics_for = "overwrites", ("keep",)

    def compute(self, rows, dataset):
        return pd.DataFrame({"qid": rows["qid"], "keep.hit@10": 0})


@pytest.mark.parametrize("block, problem", [(_WritesCost(), "outside its arms"), (_NoMetricsFor(), "outside its arms"),
                                            (_Overwrites(), "already come from another block")])
def test_metrics_for_writes_outcomes_only_and_never_overwrites(tmp_path, block, problem):
    dataset, table = _handmade(n_random=0)
    with pytest.raises(HarnessError, match=problem):
        add_blocks(table, [block], dataset, base_key="b", cache_dir=tmp_path)


def test_gold_block_without_gold_units_or_rankings_fails_in_one_line(tmp_path):
    table = synthetic_outcome_table(n_docs=4, questions_per_doc=2)
    with pytest.raises(HarnessError, match="synthetic table has neither"):
        add_blocks(table, [GoldAtK()], None, base_key="syn", cache_dir=tmp_path)


@pytest.mark.parametrize("metric, k, needed", [
    ("all@2", 10, True), ("all@10", 10, True), ("recall@2", 10, True), ("recall@10", 10, False),
    ("recall@5", 5, False), ("recall@5", 10, True), ("hit@10", 10, False), ("mrr@10", 10, False),
    ("correct", 10, False),
])
def test_the_block_is_added_when_the_metric_needs_it(metric, k, needed):
    cfg = {"base": "keep", "extra": "hybrid", "metric": metric, "k": k}
    assert needs_gold_block(cfg) is needed
    names = [b.name for b in blocks_for(cfg, list(ARMS))]
    assert names == (["gold_at_k"] if needed else [])
    # listed explicitly: still once
    assert [b.name for b in blocks_for({**cfg, "blocks": ["gold_at_k"]}, list(ARMS))] == ["gold_at_k"]
    assert gold_metric("all@2") == ("all", 2) and gold_metric("hit@2") is None and gold_metric("all@0") is None


# ---- the per-dataset default metric -----------------------------------------------------------
HOTPOT = ["dataset=hotpotqa", "dataset.path=hotpot.json"]


@pytest.mark.parametrize("overrides, metric", [
    ([], "hit@10"),
    (["dataset=synthetic"], "hit@10"),
    (["dataset=squad_pooled"], "hit@10"),
    (HOTPOT, "all@2"),
    ([*HOTPOT, "arms=keep_bm25"], "all@2"),
    ([*HOTPOT, "arms=keep_dense"], "all@2"),
    ([*HOTPOT, "arms.metric=hit@10"], "hit@10"),  # an explicit metric wins
    ([*HOTPOT, "arms.metric=recall@2"], "recall@2"),
    ([*HOTPOT, "arms=noret_rag"], "correct"),  # answer pairs keep their own metric
])
def test_default_metric_per_dataset(overrides, metric):
    cfg = compose_config(overrides)
    validate(cfg)
    assert app.to_plain(cfg)["arms"]["metric"] == metric


def test_the_default_config_resolves_as_with_the_literal_metric():
    from harness.tracking.naming import config_hash

    for overrides in ([], ["dataset=synthetic"], ["arms=keep_bm25"], ["arms=keep_dense"]):
        plain = app.to_plain(compose_config(overrides))
        literal = app.to_plain(compose_config([*overrides, "arms.metric=hit@10"]))
        assert plain == literal and config_hash(plain) == config_hash(literal)


@pytest.mark.parametrize("overrides, problem", [
    (["dataset=synthetic", "arms.metric=all@2"], "need a real dataset"),
    ([*HOTPOT, "arms.metric=all@11"], "all@1..all@10"),
    ([*HOTPOT, "arms.metric=recall@0"], "unknown metric"),
])
def test_metric_validation(overrides, problem):
    with pytest.raises(ConfigError, match=problem) as err:
        validate(compose_config(overrides))
    assert err.value.key == "arms.metric"


def test_all_at_k_up_to_the_tables_k_validates():
    for k in (1, 2, 10):
        validate(compose_config([*HOTPOT, f"arms.metric=all@{k}"]))
    validate(compose_config(["arms.metric=recall@3"]))
    validate(compose_config(["arms.k=5", "arms.candidates=30", "arms.metric=all@5"]))
    with pytest.raises(ConfigError):
        validate(compose_config(["arms.k=5", "arms.metric=all@6"]))


# ---- the ceiling warning ----------------------------------------------------------------------
def _job_summary(tmp_path: Path, frame: pd.DataFrame, *overrides: str) -> str:
    cfg = app.to_plain(compose_config(["dataset=synthetic", "policy=always_keep", *overrides]))
    task = app.make_task(cfg, app.TableHandle(frame, key="synthetic-test"))
    out = app.compute_job(cfg, task, app.policy_factory(cfg["policy"]), tmp_path)
    return out.summary()


@pytest.fixture
def ceiling_table():
    frame = synthetic_outcome_table(n_docs=40, questions_per_doc=3)
    frame["keep.hit@10"] = np.int8(1)  # the base arm finds gold for every question
    return frame


def test_ceiling_warning_in_the_job_summary(tmp_path, ceiling_table):
    text = _job_summary(tmp_path, ceiling_table)
    lines = [ln for ln in text.splitlines() if ln.startswith(WARNING)]
    assert lines == [
        "warning: the base arm is at ceiling (hit@10 = 1.000 on held-out): no question can be rescued; choose a "
        "metric that can tell the arms apart (e.g. arms.metric=all@2 on HotpotQA)"
    ]
    assert text.splitlines()[1] == lines[0]  # right under protocol A's title


@pytest.mark.parametrize("run, where", [("[budget,gain]", "the test halves"), ("[gain]", "the test half")])
def test_ceiling_warning_without_protocol_a(tmp_path, ceiling_table, run, where):
    text = _job_summary(tmp_path, ceiling_table, f"protocol.run={run}")
    lines = [ln for ln in text.splitlines() if ln.startswith(WARNING)]
    assert len(lines) == 1 and f"(hit@10 = 1.000 on {where})" in lines[0]


def test_no_ceiling_warning_otherwise(tmp_path):
    frame = synthetic_outcome_table(n_docs=40, questions_per_doc=3)
    assert frame["keep.hit@10"].mean() < 0.999
    assert WARNING not in _job_summary(tmp_path, frame)


def test_ceiling_warning_function():
    from harness.protocols.ceiling import ceiling_warning

    assert ceiling_warning("all@2", 0.998) is None and ceiling_warning("all@2", float("nan")) is None
    assert "almost no question" in ceiling_warning("hit@10", 0.9995)
    assert ceiling_warning("hit@10", 1.0).startswith("warning: the base arm is at ceiling (hit@10 = 1.000 on held-out)")


# ---- a real HotpotQA sample, when the developer points at one (never committed) --------------
SAMPLE = os.environ.get("HARNESS_HOTPOTQA_SAMPLE", "")


@pytest.mark.skipif(not (SAMPLE and Path(SAMPLE).is_file()), reason="set HARNESS_HOTPOTQA_SAMPLE to a real sample")
def test_real_hotpotqa_sample_routes_on_all_at_2():
    """Hit@10 cannot tell the arms apart there; all@2 can (builds or reuses the cached table)."""
    from harness.data import load_dataset

    cfg = app.to_plain(compose_config(["dataset=hotpotqa", f"dataset.path={SAMPLE}"]))
    assert cfg["arms"]["metric"] == "all@2"
    table = app.build_table(cfg)
    frame = table.frame
    for arm in ARMS:
        assert frame[f"{arm}.hit@10"].astype(float).mean() == 1.0
    expected = _brute(frame, load_dataset(cfg["dataset"]))
    for col, values in expected.items():
        np.testing.assert_array_equal(frame[col].astype(float).to_numpy(), np.array(values, dtype=float), err_msg=col)
    task = app.make_task(cfg, table)
    assert not task.continuous and 0.0 < task.base.mean() < 1.0
    means = {arm: frame[f"{arm}.all@2"].mean() for arm in ARMS}
    assert len({round(v, 6) for v in means.values()}) > 1  # the arms differ on all@2
