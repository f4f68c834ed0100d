"""Outcome tables as a dataset (``dataset=outcomes``, docs/own_arms.md): the documented format
read whole, RouterBench's columns converted, each bad cell one line naming file, row and column,
and the outcome-table sweep run on a RouterBench-shaped CSV with three models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.data.outcome_table import check_pair, from_routerbench, read_outcome_table
from harness.errors import DataError
from tests.helpers.routerbench import routerbench
from tests.helpers.sweeps import run_cli


def test_routerbench_columns_become_arms_with_outcome_and_cost():
    raw = routerbench(20)
    table = from_routerbench(raw)
    assert list(table.columns[:3]) == ["qid", "group", "question"]
    assert list(table["gpt-4-1106-preview.correct"]) == list(raw["gpt-4-1106-preview"])
    assert list(table["mistralai_mixtral-8x7b-chat.cost.usd"]) == list(raw["mistralai/mixtral-8x7b-chat|total_cost"])
    graded = raw.assign(**{"gpt-4-1106-preview": np.linspace(0, 1, 20)})  # MT-Bench-like graded scores
    assert "gpt-4-1106-preview.score" in from_routerbench(graded).columns


def test_an_outcome_table_reads_whole_from_csv_and_parquet(tmp_path):
    table = from_routerbench(routerbench(30)).assign(**{"feat.len": np.r_[np.nan, np.arange(29.0)]})
    table.to_csv(tmp_path / "t.csv", index=False)
    table.to_parquet(tmp_path / "t.parquet", index=False)
    a, sha_a = read_outcome_table(tmp_path / "t.csv")
    b, _ = read_outcome_table(tmp_path / "t.parquet")
    assert list(a["doc_id"]) == list(table["group"]) and len(sha_a) == 64
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert np.isnan(a["feat.len"].iloc[0])  # a feature may be missing (policies impute it)
    solo, _ = read_outcome_table(_csv(tmp_path, "qid,a.correct,b.correct\nx,1,0\ny,0,1\n"))
    assert list(solo["doc_id"]) == ["x", "y"]  # without a group column each question is its own group


def _csv(tmp_path, text: str):
    path = tmp_path / "o.csv"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, where, column, problem", [
    ("qid,a.correct,b.correct\nx,1,0\ny,0.5,1\n", "o.csv: row 2", "a.correct", "a 0/1 metric must be 0 or 1, got 0.5"),
    ("qid,a.correct,a.cost.usd\nx,1,0.1\ny,0,-2\n", "o.csv: row 2", "a.cost.usd", "a cost must be >= 0"),
    ("qid,a.correct,b.correct\nx,1,\ny,0,1\n", "o.csv: row 1", "b.correct", "must be a finite number"),
    ("qid,a.f1,b.f1\nx,1.2,0\n", "o.csv: row 1", "a.f1", "an outcome must lie in [0, 1]"),
    ("qid,a.correct\nx,1\nx,0\n", "o.csv: row 2", "qid", "a question id must be unique"),
    ("id,a.correct\nx,1\n", "o.csv", "qid", "no column 'qid'"),
    ("qid,a.correct,b.correct,extra\nx,1,0,z\n", "o.csv", "extra", "is not a column of an outcome table"),
])
def test_a_bad_cell_names_file_row_and_column(tmp_path, text, where, column, problem):
    with pytest.raises(DataError) as exc:
        read_outcome_table(_csv(tmp_path, text))
    assert (exc.value.source, exc.value.field) == (where, column) and problem in exc.value.problem


def test_a_missing_arm_column_is_named_with_what_the_file_has(tmp_path):
    path = _csv(tmp_path, "qid,a.correct,b.correct,b.cost.usd\nx,1,0,1\n")
    with pytest.raises(DataError) as exc:
        check_pair(path, "a", "c", "correct")
    assert exc.value.field == "c.correct" and "the file has: a (correct), b (correct)" in exc.value.problem


def test_the_cli_refuses_a_bad_table_in_one_line(cli, tmp_path):
    _csv(tmp_path, "qid,a.correct,b.correct\nx,1,0\ny,0,nan\n")
    code, _, err = cli(["table", "build", "dataset=outcomes", "dataset.path=o.csv", "arms.base=a", "arms.extra=b",
                        "arms.metric=correct"])
    assert code == 2 and err.strip().splitlines() == [
        "error: DataError: o.csv: row 2, field 'b.correct': must be a finite number (no NaN, no empty cell), got "
        "nan (1 such row(s))"]
    _csv(tmp_path, "qid,a.correct,b.correct\nx,1,0\ny,0,1\n")
    code, out, err = cli(["table", "build", "dataset=outcomes", "dataset.path=o.csv", "arms.base=a", "arms.extra=c",
                          "arms.metric=correct"])
    assert code == 2 and "field 'c.correct'" in err


@pytest.mark.slow
def test_the_outcome_table_sweep_runs_on_a_routerbench_csv(tmp_path):
    from_routerbench(routerbench(240)).to_csv(tmp_path / "rb.csv", index=False)
    proc = run_cli(["-m", "dataset=outcomes", "dataset.path=rb.csv", "experiment=outcomes", "arms.metric=correct",
                    "arms.base=mistralai_mixtral-8x7b-chat", "arms.extra=gpt-4-1106-preview"], tmp_path, tmp_path / "c")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "16 jobs, 0 failed -> parent run FINISHED" in proc.stdout
    assert "Verdict per cost and budget" in proc.stdout
