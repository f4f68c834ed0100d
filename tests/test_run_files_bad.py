"""Bad run files (docs/own_arms.md): each is one line naming file, line and field, exit 2 through
the CLI, before any table is built (nothing cached); what the documented rule skips is counted."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.arm_blocks.runs import RunFileArm, check_against
from harness.data import load_dataset
from harness.data.trec_run import read_costs, read_run
from harness.errors import DataError
from tests.helpers.run_files import gold, run_lines, write_beir, write_run

GOOD = ["q1 Q0 d0 1 2.5 t", "q2 Q0 d2 1 1.0 t"]


@pytest.mark.parametrize("lines, where, field, problem", [
    (["q1 Q0 d0 1 2.5"], "r.run:1", None, "expected 6 whitespace-separated fields (qid Q0 docid rank score tag), got 5"),
    ([*GOOD, "q3 Q0 d4 1 0.5 t extra"], "r.run:3", None, "got 7"),
    ([*GOOD, "q3 Q0 d4 1 high t"], "r.run:3", "score", "must be a number, got 'high'"),
    ([*GOOD, "q3 Q0 d4 1 nan t"], "r.run:3", "score", "must be a finite number, got 'nan'"),
    ([*GOOD, "q3 Q0 d4 first 0.5 t"], "r.run:3", "rank", "must be an integer, got 'first'"),
    ([*GOOD, "", "q1 Q0 d0 2 0.1 t"], "r.run:4", "docid", "'d0' is ranked twice for query 'q1' (first at line 1)"),
    (["", "  "], "r.run", None, "is empty: no run line"),
])
def test_a_bad_line_names_file_line_and_field(tmp_path, lines, where, field, problem):
    with pytest.raises(DataError) as exc:
        read_run(write_run(tmp_path / "r.run", lines))
    assert (exc.value.source, exc.value.field) == (where, field) and problem in exc.value.problem


def test_a_missing_or_broken_gzip_file_is_named(tmp_path):
    with pytest.raises(DataError, match="run file not found"):
        read_run(tmp_path / "nowhere.run")
    (tmp_path / "bad.run.gz").write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(DataError, match="bad.run.gz: starts like a gzip file but cannot be decompressed"):
        read_run(tmp_path / "bad.run.gz")


@pytest.mark.parametrize("text, where, field, problem", [
    ("q1 1\nq1 2\n", "c.tsv:2", "qid", "'q1' is given twice (first at line 1)"),
    ("qid cost\nq1 -3\n", "c.tsv:2", "cost", "must be >= 0"),
    ("q1 1 2\n", "c.tsv:1", None, "expected 2 whitespace-separated fields"),
    ("q1 1\nq2 x\n", "c.tsv:2", "cost", "must be a number"),
])
def test_a_bad_cost_sidecar_names_file_line_and_field(tmp_path, text, where, field, problem):
    (tmp_path / "c.tsv").write_text(text)
    with pytest.raises(DataError) as exc:
        read_costs(tmp_path / "c.tsv")
    assert (exc.value.source, exc.value.field) == (where, field) and problem in exc.value.problem


@pytest.fixture
def ds(tmp_path):
    return load_dataset({"loader": "beir", "path": str(write_beir(tmp_path / "beir"))})


def test_queries_and_docids_outside_the_dataset_are_counted(ds, tmp_path):
    lines = [*run_lines(0, "t", skip=("q5",)), "q99 Q0 d0 1 1 t", "q99 Q0 d1 2 0.5 t", "q1 Q0 nowhere 99 -5 t"]
    run = read_run(write_run(tmp_path / "r.run", lines))
    corpus = {u.unit_id for units in ds.documents.values() for u in units}
    counts = check_against(run, gold(), corpus)
    # q8 of the run is a query without a relevant passage (not a question), q99 is nowhere
    assert counts == {"file": "r.run", "questions": 7, "questions_in_run": 6, "questions_absent_from_run": 1,
                      "run_queries_not_in_table": 2, "lines_of_queries_not_in_table": 9 + 2,
                      "docids_not_in_corpus": 1}
    rows = pd.DataFrame({"qid": [q.qid for q in ds.questions]})
    out = RunFileArm("s", str(tmp_path / "r.run")).compute(rows, ds).set_index("qid")
    assert out.loc["q1", "s.top10"][-1] == "nowhere" and out.loc["q1", "s.n_retrieved"] == 10  # kept, never relevant


@pytest.mark.parametrize("lines, where, field, problem", [
    (["x1 Q0 d0 1 1 t", "x2 Q0 d1 1 1 t"], "r.run:1", "qid", "'x1' is not a question of the dataset"),
    (["q1 Q0 z0 1 1 t", "q2 Q0 z1 1 1 t"], "r.run:1", "docid", "no docid of the run's 2 line(s)"),
])
def test_a_run_that_belongs_to_no_part_of_the_dataset_is_refused(ds, tmp_path, lines, where, field, problem):
    path = write_run(tmp_path / "r.run", lines)
    rows = pd.DataFrame({"qid": [q.qid for q in ds.questions]})
    with pytest.raises(DataError) as exc:
        RunFileArm("s", str(path)).compute(rows, ds)
    assert (exc.value.source, exc.value.field) == (where, field) and problem in exc.value.problem


def test_a_cost_sidecar_missing_a_question_is_refused(ds, tmp_path):
    path = write_run(tmp_path / "r.run", run_lines(0, "t"))
    (tmp_path / "c.tsv").write_text("q1 3\n")
    rows = pd.DataFrame({"qid": [q.qid for q in ds.questions]})
    with pytest.raises(DataError, match=r"c.tsv, field 'qid': gives no cost for 6 question\(s\) of the table"):
        RunFileArm("s", str(path), cost=str(tmp_path / "c.tsv")).compute(rows, ds)


@pytest.mark.parametrize("lines, line", [
    (["q1 Q0 d0 1 2.5 t", "q1 Q0 d1 1 oops t"], "error: DataError: r.run:2, field 'score': must be a number, got 'oops'"),
    (["q1 Q0 d0 1 2.5 t", "q1 Q0 d0 2 1 t"], "error: DataError: r.run:2, field 'docid': 'd0' is ranked twice"),
    (["q1 Q0 d0 1"], "error: DataError: r.run:1: expected 6 whitespace-separated fields"),
])
def test_the_cli_refuses_a_bad_run_in_one_line_before_any_build(cli, tmp_path, lines, line):
    folder = write_beir(tmp_path / "beir")
    write_run(tmp_path / "r.run", lines)
    code, out, err = cli(["table", "build", "dataset=beir", f"dataset.path={folder}", "arms.runs={s: r.run}",
                          "arms.extra=s"])
    assert code == 2 and err.strip().startswith(line) and len(err.strip().splitlines()) == 1, err
    assert not [p for p in (tmp_path / "cache").rglob("*.parquet")]  # nothing built, nothing cached


def test_the_cli_names_a_missing_run_file_and_a_bad_runs_key(cli, tmp_path):
    folder = write_beir(tmp_path / "beir")
    code, _, err = cli(["table", "build", "dataset=beir", f"dataset.path={folder}", "arms.runs={s: gone.run}"])
    assert code == 2 and "run file not found" in err and "gone.run" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(["table", "build", "dataset=synthetic", "arms.runs={s: gone.run}"])
    assert code == 2 and "config key 'arms.runs'" in err and "synthetic" in err
