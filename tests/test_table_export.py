"""``table export`` (docs/own_arms.md): the exported outcome table loads back (``dataset=outcomes``)
as the same table, exactly; the exported run files scored by pytrec_eval (trec_eval's C code)
against the exported qrels give the table's own hit@k / recall / mrr / ndcg per question; the
folder is refused when it holds something, unless --force. And ``table build``'s per-arm table
and rescued/lost list, checked by hand and against pytrec_eval on the exported files."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness import app
from harness.__main__ import main
from harness.config.compose import compose_config
from harness.data.arm_summary import format_per_arm, per_arm_means, rescued_lost
from harness.data.outcome_table import read_outcome_table
from harness.data.table_export import outcome_frame, trec_scores
from harness.data.trec_run import read_run
from harness.io import verify_file
from tests.helpers.run_files import gold, run_lines, write_beir, write_run


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A tiny BEIR folder, two run files (one leaves q3 out; both with ties in score) with costs,
    the table built once by ``table build``: (overrides, the table, build's stdout, folder)."""
    root = tmp_path_factory.mktemp("export")
    folder = write_beir(root / "beir")
    a, b = write_run(root / "a.run", run_lines(1, "a", skip=("q3",))), write_run(root / "b.run", run_lines(2, "b"))
    (root / "b_cost.tsv").write_text("".join(f"q{i} {i * 0.75}\n" for i in range(1, 9)), encoding="utf-8")
    overrides = ["dataset=beir", f"dataset.path={folder}", "arms.base=a", "arms.extra=b",
                 f"arms.runs={{a: {{path: '{a}', cost: 1.5, unit: tokens}}, "
                 f"b: {{path: '{b}', cost: '{root / 'b_cost.tsv'}', unit: tokens}}}}"]
    code, out, err = _cli(["table", "build", *overrides])
    assert code == 0, err
    plain = app.to_plain(compose_config(overrides))
    return overrides, app.build_table(plain), out, root


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_then_load_gives_the_same_table(built, fmt):
    overrides, table, _, root = built
    out = root / f"out-{fmt}"
    code, text, err = _cli(["table", "export", *overrides, "--out", str(out), "--format", fmt])
    assert code == 0, err
    path = out / f"outcomes.{fmt}"
    assert f"outcomes.{fmt}: 7 questions" in text and sorted(p.name for p in out.iterdir()) == sorted(
        [path.name, "a.run", "b.run", "keep.run", "hybrid.run", "bm25.run", "dense.run", "qrels.txt"])
    loaded, _ = read_outcome_table(path)
    frame = table.frame.sort_values("qid").reset_index(drop=True)
    assert list(loaded["qid"]) == list(frame["qid"]) and list(loaded["doc_id"]) == list(frame["doc_id"])
    expected, left, _ = outcome_frame(table.frame)
    wanted = {"a.hit@1", "a.ndcg@10", "b.mrr@10", "b.recall@3", "keep.hit@10", "keep.recall@10", "keep.cost.total_ms",
              "a.cost.tokens", "b.cost.tokens", "feat.run_a_qpp_wig", "feat.dense_top1", "feat.q_len_words"}
    assert wanted <= set(loaded.columns) and "keep.top10" in left and "keep.marginal.total_ms" in left
    for c in expected.columns:
        if c in ("qid", "group"):
            continue
        assert np.array_equal(loaded[c].to_numpy(float), frame[c].to_numpy(float), equal_nan=True), c  # exact
    assert set(loaded.columns) - {"qid", "doc_id"} == set(expected.columns) - {"qid", "group"}
    # the routing task of the loaded file equals the built table's: questions, groups, outcomes, costs, features
    reloaded = app.build_table(app.to_plain(compose_config(
        ["dataset=outcomes", f"dataset.path={path}", "arms.base=a", "arms.extra=b", "arms.metric=ndcg@10"])))
    for metric in ("hit@10", "ndcg@10"):
        cfg_built = app.to_plain(compose_config([*overrides, f"arms.metric={metric}"]))
        cfg_file = app.to_plain(compose_config(["dataset=outcomes", f"dataset.path={path}", "arms.base=a",
                                                "arms.extra=b", f"arms.metric={metric}"]))
        t1, t2 = app.make_task(cfg_built, table), app.make_task(cfg_file, reloaded)
        for field in ("qids", "groups", "base", "extra", "base_cost", "extra_cost"):
            assert np.array_equal(getattr(t1, field), getattr(t2, field)), (metric, field)
        assert t1.cost_unit == t2.cost_unit == "tokens" and t1.continuous == t2.continuous
        pd.testing.assert_frame_equal(t1.features, t2.features[t1.features.columns])


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        q, _, d, r = line.split()
        out.setdefault(q, {})[d] = int(r)
    return out


def _pytrec(run_path: Path, qrels) -> dict:
    import pytrec_eval

    run: dict[str, dict[str, float]] = {}
    for line in run_path.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    measures = {"success.1,3,5,10", "recall.1,3,10", "ndcg_cut.10", "recip_rank"}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def test_the_exported_runs_scored_by_trec_eval_equal_the_table(built):
    overrides, table, _, root = built
    out = root / "out-trec"
    code, text, err = _cli(["table", "export", *overrides, "--out", str(out)])
    assert code == 0, err
    qrels = _qrels(out / "qrels.txt")
    assert qrels == {q: {d: 1 for d in g} for q, g in gold().items()}  # q2's graded 2 as the binary 1 it was scored as
    assert "tied score(s) raised 1 ulp" in text  # bm25 ranks ties: the case is met
    frame = table.frame.set_index("qid")
    compared = 0
    for arm in ("keep", "hybrid", "bm25", "dense", "a", "b"):
        te = _pytrec(out / f"{arm}.run", qrels)
        ranked = read_run(out / f"{arm}.run").rankings  # trec_eval's order of the written file
        for q in frame.index:
            row = frame.loc[q]
            if q not in te:  # absent from the run: the table scores 0, as trec_eval -c does
                assert arm == "a" and q == "q3" and row[f"{arm}.hit@10"] == 0 and row[f"{arm}.mrr@10"] == 0
                continue
            assert [d for d, _ in ranked[q]] == list(row[f"{arm}.top10"])
            for j in (1, 3, 5, 10):
                assert row[f"{arm}.hit@{j}"] == te[q][f"success_{j}"]
            assert row[f"{arm}.recall@10"] == te[q]["recall_10"] and row[f"{arm}.mrr@10"] == te[q]["recip_rank"]
            if f"{arm}.ndcg@10" in frame.columns:
                assert row[f"{arm}.ndcg@10"] == te[q]["ndcg_cut_10"]
                compared += 1
    assert compared == 13  # a: 6 questions in its run, b: 7


def test_an_existing_folder_is_refused_unless_force(built):
    overrides, _, _, root = built
    out = root / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    code, text, err = _cli(["table", "export", *overrides, "--out", str(out)])
    assert code == 2 and err.strip().splitlines() == [
        f"error: HarnessError: {out}: exists and is not empty; choose another --out, or --force to replace it"]
    assert [p.name for p in out.iterdir()] == ["mine.txt"] and text == ""
    code, _, err = _cli(["table", "export", *overrides, "--out", str(out), "--force"])
    assert code == 0, err
    assert not (out / "mine.txt").exists() and (out / "outcomes.csv").is_file()
    assert not [p for p in root.iterdir() if p.name.startswith(".taken")]  # no temporary folder left
    code, _, err = _cli(["table", "export", *overrides])
    assert code == 2 and "--out DIR is required" in err


def test_trec_scores_keep_the_table_order_by_the_least_change():
    assert trec_scores(["b", "a"], [1.0, 1.0]) == ([1.0, 1.0], 0)  # trec_eval's tie order already
    scores, nudged = trec_scores(["a", "b", "c"], [2.0, 1.0, 1.0])  # c above b in trec_eval: b raised
    assert scores == [2.0, math.nextafter(1.0, 2.0), 1.0] and nudged == 1
    scores, nudged = trec_scores(["a", "b", "c"], [0.0, 0.0, 0.0])
    assert scores == [math.nextafter(math.nextafter(0.0, 1), 1), math.nextafter(0.0, 1), 0.0] and nudged == 2
    assert trec_scores(["a", "b"], [1.0, 2.0]) is None  # no score order to keep


def test_per_arm_means_and_rescued_lost_by_hand():
    frame = pd.DataFrame({
        "qid": ["q1", "q2", "q3", "q4"], "has_evidence": [True, True, True, False],
        "question": ["one", "two", "three", "four"],
        "x.hit@1": [1, 0, 0, 0], "x.hit@10": [1, 0, 1, 0], "x.mrr@10": [1.0, 0.0, 0.25, 0.0], "x.ndcg@10": [1.0, 0.0, 0.5, 0.0],
        "y.hit@1": [0, 1, 0, 1], "y.hit@10": [1, 1, 0, 1], "y.mrr@10": [0.5, 1.0, 0.0, 1.0],
        "x.top10": [["d1", "d2", "d3", "d4"], ["d5"], [], ["d6"]], "y.top10": [["e1"], ["e2", "e3"], ["e4"], ["e5"]],
    })
    means = per_arm_means(frame)
    assert means["x"] == {"ndcg@10": 0.5, "recall@10": None, "mrr@10": 1.25 / 3, "hit@1": 1 / 3, "hit@10": 2 / 3}
    assert means["y"] == {"ndcg@10": None, "recall@10": None, "mrr@10": 0.5, "hit@1": 1 / 3, "hit@10": 2 / 3}
    lines = format_per_arm(means, 3)
    assert lines[2].split() == ["x", "0.5000", "-", "0.4167", "0.3333", "0.6667"]
    got = rescued_lost(frame, ["q1", "q2", "q3"], "x", "y", "hit@10")  # q4: no evidence, not the task's
    assert got.to_dict("list") == {"qid": ["q2", "q3"], "question": ["two", "three"], "change": ["rescued", "lost"],
                                   "x.hit@10": [0.0, 1.0], "y.hit@10": [1.0, 0.0], "x.top3": ["d5", ""],
                                   "y.top3": ["e2 e3", "e4"]}


def test_table_build_prints_per_arm_means_and_writes_the_rescued_lost_list(built):
    overrides, table, text, root = built
    out = root / "out-build"
    assert _cli(["table", "export", *overrides, "--out", str(out)])[0] == 0
    qrels = _qrels(out / "qrels.txt")
    ours = {}
    for arm in ("a", "b"):  # pytrec_eval on the exported files, a query absent from the run scoring 0
        te = _pytrec(out / f"{arm}.run", qrels)
        ours[arm] = {m: np.mean([te.get(q, {}).get(m, 0.0) for q in qrels])
                     for m in ("ndcg_cut_10", "recall_10", "recip_rank", "success_1", "success_10")}
        line = next(x for x in text.splitlines() if x.split()[:1] == [arm] and "@" not in x)
        assert line.split()[1:] == [f"{v:.4f}" for v in ours[arm].values()]
    line = next(x for x in text.splitlines() if x.startswith("rescued/lost list (b vs a on hit@10)"))
    path = Path(line.rsplit(" -> ", 1)[1])
    assert path.parent.name == table.key and verify_file(path, key=table.key)
    listed = pd.read_csv(path, dtype={"qid": str}, keep_default_na=False)
    te = {arm: _pytrec(out / f"{arm}.run", qrels) for arm in ("a", "b")}
    hit = {arm: {q: te[arm].get(q, {}).get("success_10", 0.0) for q in qrels} for arm in ("a", "b")}
    differ = sorted(q for q in qrels if hit["a"][q] != hit["b"][q])
    assert list(listed["qid"]) == differ and f"{len(differ)} questions -> " in line
    for _, row in listed.iterrows():
        assert row["change"] == ("rescued" if hit["b"][row["qid"]] > hit["a"][row["qid"]] else "lost")
        assert row["b.top3"] == " ".join(list(table.frame.set_index("qid").loc[row["qid"], "b.top10"])[:3])


def test_an_id_a_trec_file_cannot_hold_is_refused_naming_it():
    from harness.data.table_export import run_text
    from harness.errors import DataError

    rows = pd.DataFrame({"qid": ["q1"], "x.top10": [["d 1", "d2"]], "x.scores10": [[2.0, 1.0]]})
    with pytest.raises(DataError) as exc:
        run_text(rows, "x", 10)
    assert "x.run" in str(exc.value) and "'d 1'" in str(exc.value) and "whitespace" in str(exc.value)
