"""Run files as arms (docs/own_arms.md): trec_eval's order with ties, metrics equal to
pytrec_eval's (trec_eval's own C code) and ir_measures' to the last digit, an absent query an
empty ranking, score features from the harness's own functions, and a cache keyed by content."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.arm_blocks import blocks_for
from harness.arm_blocks.build import add_blocks
from harness.arm_blocks.runs import RunFileArm, run_blocks, run_cost_column, run_specs
from harness.data import load_dataset
from harness.data.trec_run import read_run, trec_order
from harness.errors import ConfigError
from harness.retrieval.features import qpp
from harness.retrieval.ranking_metrics import ndcg_at, ranking_outcomes
from tests.helpers.run_files import gold, run_lines, write_beir, write_run

K = 10


@pytest.fixture
def beir(tmp_path):
    folder = write_beir(tmp_path / "beir")
    return folder, load_dataset({"loader": "beir", "path": str(folder)})


def _compute(path, ds, **kw):
    rows = pd.DataFrame({"qid": [q.qid for q in ds.questions]})
    return RunFileArm("sys", str(path), **kw).compute(rows, ds).set_index("qid")


def test_hand_computed_ranking_with_a_tie():
    # x 3.0, a 2.0, y 2.0, b 1.0: the tie a / y goes to the larger docid (y), as trec_eval does
    order = trec_order([("x", 3.0), ("a", 2.0), ("y", 2.0), ("b", 1.0)])
    assert [d for d, _ in order] == ["x", "y", "a", "b"]
    out = ranking_outcomes([d for d, _ in order], {"a", "b"}, 4)
    assert [out[f"hit@{j}"] for j in range(1, 5)] == [0, 0, 1, 1]
    assert [out[f"recall@{j}"] for j in range(1, 5)] == [0.0, 0.0, 0.5, 1.0]
    assert [out[f"all@{j}"] for j in range(1, 5)] == [0.0, 0.0, 0.0, 1.0]
    assert out["mrr@4"] == 1 / 3 and out["first_gold_rank"] == 3.0
    assert out["ndcg@4"] == pytest.approx((1 / math.log2(4) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)), abs=1e-15)
    assert math.isnan(ndcg_at(["x"], set(), 4))
    empty = ranking_outcomes([], {"a"}, 3)  # a query absent from the run: every metric 0
    assert (empty["hit@3"], empty["recall@3"], empty["mrr@3"], empty["ndcg@3"]) == (0, 0.0, 0.0, 0.0)


def _trec_eval(run_path, qrels):
    """Per-query numbers of pytrec_eval (trec_eval's C code) and ir_measures on the same run file."""
    import ir_measures
    import pytrec_eval
    from ir_measures import RR, R, Success, nDCG

    run = {}
    for line in run_path.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    te = pytrec_eval.RelevanceEvaluator(qrels, {"success.1,3,5,10", "recall.1,3,5,10", "ndcg_cut.10"}).evaluate(run)
    top10 = {q: dict(trec_order(list(docs.items()))[:10]) for q, docs in run.items()}  # RR@10: recip_rank at depth 10
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    measures = [Success @ 1, Success @ 3, Success @ 10, R @ 3, R @ 10, RR @ 10, nDCG @ 10]
    im = {(m.query_id, str(m.measure)): m.value
          for m in ir_measures.iter_calc(measures, ir_measures.read_trec_qrels(_qrels_lines(qrels)),
                                         ir_measures.read_trec_run(str(run_path)))}
    return te, rr, im


def _qrels_lines(qrels):
    return "\n".join(f"{q} 0 {d} {r}" for q, docs in qrels.items() for d, r in docs.items())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_metrics_equal_trec_eval_and_ir_measures_to_the_last_digit(beir, tmp_path, seed):
    """Relevance threshold: a qrels score > 0 is relevant (trec_eval's and ir_measures' rel >= 1
    on integer scores); gains are binary (each gold passage 1)."""
    folder, ds = beir
    path = write_run(tmp_path / "r.run", run_lines(seed, "t", skip=("q3",)))
    ours = _compute(path, ds)
    qrels = {q: {d: 1 for d in g} for q, g in gold().items()}
    te, rr, im = _trec_eval(path, qrels)
    assert set(te) == set(gold()) - {"q3"}
    for q in gold():
        row = ours.loc[q]
        if q == "q3":  # absent from the run: an empty ranking, scored 0 (trec_eval -c's zeros)
            assert row["sys.n_retrieved"] == 0 and row["sys.hit@10"] == 0 and row["sys.ndcg@10"] == 0.0
            assert np.isnan(row["feat.run_sys_top1"])
            continue
        for j in (1, 3, 5, 10):
            assert row[f"sys.hit@{j}"] == te[q][f"success_{j}"]
            assert row[f"sys.recall@{j}"] == te[q][f"recall_{j}"]
        assert row["sys.ndcg@10"] == te[q]["ndcg_cut_10"]  # exact, not approx
        assert row["sys.mrr@10"] == rr[q]["recip_rank"]
        assert row["sys.hit@3"] == im[(q, "Success@3")] and row["sys.recall@10"] == im[(q, "R@10")]
        assert row["sys.ndcg@10"] == im[(q, "nDCG@10")]
        # ir_measures computes RR@10 with its MS MARCO provider, which breaks ties by docid
        # ASCENDING (trec_eval: descending): equal to ours on the run ordered that way
        ranked = [d for d, _ in sorted(read_run(path).rankings[q], key=lambda x: (-x[1], x[0]))]
        assert ranking_outcomes(ranked, gold()[q], K)["mrr@10"] == im[(q, "RR@10")]


def test_without_ties_rr_at_10_equals_ir_measures_too(beir, tmp_path):
    folder, ds = beir
    lines = [f"{q} Q0 d{i} {i} {10 - i * 0.25 - n * 0.01} t" for n, q in enumerate(gold()) for i in range(12)]
    path = write_run(tmp_path / "distinct.run", lines)
    ours = _compute(path, ds)
    _, rr, im = _trec_eval(path, {q: {d: 1 for d in g} for q, g in gold().items()})
    for q in gold():
        assert ours.loc[q, "sys.mrr@10"] == im[(q, "RR@10")] == rr[q]["recip_rank"]


def test_ranking_scores_and_features_come_from_the_run(beir, tmp_path):
    folder, ds = beir
    lines = ["q1 Q0 d5 1 0.5 t", "q1 Q0 d0 2 0.5 t", "q1 Q0 d9 3 2.0 t", "q1 Q0 d1 4 -1 t"]
    ours = _compute(write_run(tmp_path / "r.run", lines), ds, qpp_k=2)
    row = ours.loc["q1"]
    assert list(row["sys.top10"]) == ["d9", "d5", "d0", "d1"]  # score desc, tie d5/d0 by docid desc
    assert list(row["sys.scores10"]) == [2.0, 0.5, 0.5, -1.0]
    assert row["sys.first_gold_rank"] == 3.0 and row["sys.mrr@10"] == 1 / 3
    assert row["feat.run_sys_top1"] == 2.0 and row["feat.run_sys_margin12"] == 1.5
    expected = qpp(np.array([2.0, 0.5, 0.5, -1.0]), 2)  # corpus score: the mean of the run's own list
    assert row["feat.run_sys_qpp_wig"] == expected["wig"] == 1.25 - 0.5
    assert row["feat.run_sys_qpp_nqc"] == expected["nqc"] and row["sys.n_retrieved"] == 4


def test_a_gzip_run_equals_the_plain_one_and_the_key_follows_the_content(beir, tmp_path):
    folder, ds = beir
    lines = run_lines(5, "t")
    plain, gz = write_run(tmp_path / "r.run", lines), write_run(tmp_path / "r.run.gz", lines, gz=True)
    pd.testing.assert_frame_equal(_compute(plain, ds), _compute(gz, ds))
    moved = write_run(tmp_path / "elsewhere.run", lines)
    assert RunFileArm("sys", str(plain)).identity() == RunFileArm("sys", str(moved)).identity()
    changed = write_run(tmp_path / "changed.run", lines[:-1])
    assert RunFileArm("sys", str(plain)).identity() != RunFileArm("sys", str(changed)).identity()


def test_runs_join_the_table_beside_other_arms_and_rebuild_when_a_file_changes(beir, tmp_path):
    folder, ds = beir
    base = pd.DataFrame({"qid": [q.qid for q in ds.questions], "doc_id": [q.doc_id for q in ds.questions],
                         "keep.hit@10": 1})
    a, b = write_run(tmp_path / "a.run", run_lines(1, "a")), write_run(tmp_path / "b.run", run_lines(2, "b"))
    cfg = {"runs": {"a": str(a), "b": {"path": str(b), "cost": 2.5, "unit": "tokens"}}, "base": "a", "extra": "b"}
    blocks = blocks_for(cfg, ["keep", "a", "b"]) + run_blocks(cfg)
    assert [x.name for x in blocks] == ["run_a", "run_b"]
    joined, builds = add_blocks(base, blocks, ds, base_key="k", cache_dir=tmp_path / "cache")
    assert {"keep.hit@10", "a.hit@10", "b.ndcg@10", "b.cost.tokens", "feat.run_a_qpp_wig"} <= set(joined.columns)
    assert (joined["b.cost.tokens"] == 2.5).all() and "a.cost.total_ms" not in joined.columns
    assert run_cost_column(cfg, ("a", "b")) == "tokens" and run_cost_column(cfg, ("a", "keep")) is None
    again, builds2 = add_blocks(base, run_blocks(cfg), ds, base_key="k", cache_dir=tmp_path / "cache")
    assert [x.key for x in builds2] == [x.key for x in builds] and builds2[0].chunks_computed == 0  # read back
    write_run(a, run_lines(3, "a"))  # the same path, another content: a new key, computed again
    _, builds3 = add_blocks(base, run_blocks(cfg), ds, base_key="k", cache_dir=tmp_path / "cache")
    assert builds3[0].key != builds[0].key and builds3[0].chunks_computed == 1 and builds3[1].key == builds[1].key


def test_a_cost_sidecar_gives_each_question_its_cost(beir, tmp_path):
    folder, ds = beir
    run = write_run(tmp_path / "r.run", run_lines(0, "t"))
    side = tmp_path / "cost.tsv"
    side.write_text("qid\tms\n" + "".join(f"{q.qid}\t{i * 1.5}\n" for i, q in enumerate(ds.questions)))
    out = _compute(run, ds, cost=str(side), unit="ms")
    assert list(out["sys.cost.total_ms"]) == [i * 1.5 for i in range(len(ds.questions))]


@pytest.mark.parametrize("runs, key, problem", [
    ({"keep": "x.run"}, "arms.runs.keep", "one of the harness's own arms"),
    ({"my.run": "x.run"}, "arms.runs.my.run", "starts with a letter"),
    ({"es": {"path": "x.run", "unit": "usd"}}, "arms.runs.es.unit", "expected one of ms, tokens"),
    ({"es": {"path": "x.run", "cost": -1}}, "arms.runs.es.cost", "finite number >= 0"),
    ({"es": {"file": "x.run"}}, "arms.runs.es.file", "unknown key"),
    (["x.run"], "arms.runs", "expected a mapping"),
])
def test_a_bad_runs_config_names_its_key(runs, key, problem):
    with pytest.raises(ConfigError) as exc:
        run_specs({"runs": runs})
    assert exc.value.key == key and problem in exc.value.problem


def test_read_run_keeps_every_line_and_its_number(tmp_path):
    run = read_run(write_run(tmp_path / "r.run", ["a Q0 x 1 1e-3 t", "", "a Q0 y 7 -2.5 t", "b 0 x 1 3 t"]))
    assert run.rankings == {"a": [("x", 0.001), ("y", -2.5)], "b": [("x", 3.0)]}
    assert run.lines[("a", "y")] == 3 and len(run.sha256) == 64
