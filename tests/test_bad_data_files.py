"""Data files that used to be read wrong without a word: every line of a qrels file is read or
refused (a file without a header is read whole, TREC's 4 columns are recognised, a header alone
is named), an empty split is refused, a line nested too deeply or a JSONL file that is one JSON
list is one line naming file and line, lone strings and padded ids follow the documented rules,
and a server answer without the top-k alternatives the uncertainty features need is refused
before anything is cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.arm_blocks.build import build_block
from harness.data import check_dataset_config, load_dataset
from harness.data.cli import main as data_main
from harness.data.musique import load_musique
from harness.data.validate import parse_json
from harness.errors import ConfigError, DataError, HarnessError
from harness.generation.chat_response import parse_chat_completion
from harness.generation.errors import GenerationError, ServerAnswerError
from harness.generation.arms import NoRetrievalArm
from tests.test_generation_server import FIXTURE, PROMPT, FakeServer, _gen, good_answer

REPO = Path(__file__).resolve().parent.parent
CORPUS = [{"_id": "p1", "title": "Mercury", "text": "the smallest planet"},
          {"_id": "p2", "title": "", "text": "Venus has a thick atmosphere"},
          {"_id": "p3", "title": "Mars", "text": "the red planet"}]
QUERIES = [{"_id": "q1", "text": "which planet is smallest"}, {"_id": "q2", "text": "red planet"},
           {"_id": "q3", "text": "thick atmosphere"}]
DEEP = 200_000


def _folder(root: Path, qrels: str, corpus=CORPUS, queries=QUERIES, split: str = "test") -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return root


def _gold(root: Path) -> dict[str, tuple[str, ...]]:
    ds = load_dataset({"loader": "beir", "path": str(root)})
    return {q.qid: q.gold_unit_ids for q in ds.questions}


def _refused(root: Path, kind=DataError, **cfg) -> str:
    with pytest.raises(kind) as err:
        load_dataset({"loader": "beir", "path": str(root), **cfg})
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    return text


ALL = {"q1": ("p1",), "q2": ("p3",), "q3": ("p2",)}


# ---- a qrels file without its header is read whole -------------------------------------------
@pytest.mark.parametrize("qrels", [
    "q1\tp1\t1\nq2\tp3\t1\nq3\tp2\t2\n",  # no header: the first judgement is kept
    "query-id\tcorpus-id\tscore\nq1\tp1\t1\nq2\tp3\t1\nq3\tp2\t2\n",  # BEIR's header
    "\n\nqid\tdocid\trel\n\nq1\tp1\t1\r\nq2\tp3\t1\r\nq3\tp2\t2\r\n",  # another header, blank lines, CRLF
], ids=["no-header", "beir-header", "other-header"])
def test_a_qrels_file_is_read_whole_with_or_without_its_header(tmp_path, qrels):
    assert _gold(_folder(tmp_path / "b", qrels)) == ALL


def test_a_first_line_with_a_bad_score_that_names_a_passage_is_a_judgement_not_a_header(tmp_path):
    text = _refused(_folder(tmp_path / "b", "q1\tp1\tyes\nq2\tp3\t1\n"))
    assert text.startswith("test.tsv:1, field 'score'") and "must be an integer, got 'yes'" in text


# ---- TREC's 4 columns ---------------------------------------------------------------------------
@pytest.mark.parametrize("qrels", [
    "q1 0 p1 1\nq2 0 p3 1\nq3 0 p2 2\nq1 0 p2 0\n",  # TREC, spaces
    "q1\t0\tp1\t1\nq2\t0\tp3\t1\nq3\tQ0\tp2\t2\n",  # TREC, tabs, Q0 iteration
    "qid iter docno rel\nq1 0 p1 1\nq2 0 p3 1\nq3 0 p2 1\nq2 0 p1 -1\n",  # a header, a negative grade
], ids=["spaces", "tabs-q0", "header-negative"])
def test_trec_qrels_are_recognised_by_their_four_columns(tmp_path, qrels):
    assert _gold(_folder(tmp_path / "b", qrels)) == ALL


@pytest.mark.parametrize("qrels, where, said", [
    ("q1 0 p1 1\nq2\tp3\t1\n", "test.tsv:2", "expected TREC qrels (4 whitespace-separated columns"),
    ("q1\tp1\t1\nq2 0 p3 1\n", "test.tsv:2", "expected BEIR qrels (3 tab-separated columns"),
    ("query-id\tcorpus-id\tscore\nq1 p1 1\n", "test.tsv:2", "or TREC qrels"),
    ("q1 0 p1 high\n", "test.tsv:1, field 'relevance'", "must be an integer, got 'high'"),
    ("q1\tp1\t1\nq2\tp3\n", "test.tsv:2", "got 2 tab-separated column(s)"),
    ("q1\tp1\t1\nq2\tp3\t1\textra\n", "test.tsv:2", "got 4 tab-separated column(s)"),
    ("q1\tp1\t1\n \tp3\t1\n", "test.tsv:2, field 'query-id'", "is empty"),
], ids=["beir-in-trec", "trec-in-beir", "spaces-in-beir", "trec-bad-grade", "two-columns", "four-columns",
        "empty-id"])
def test_a_malformed_qrels_line_is_refused_naming_file_and_line(tmp_path, qrels, where, said):
    text = _refused(_folder(tmp_path / "b", qrels))
    assert text.startswith(where) and said in text, text


# ---- a header alone, an empty file ------------------------------------------------------------
@pytest.mark.parametrize("qrels, said", [
    ("query-id\tcorpus-id\tscore\n", "holds only a header line (line 1) and no judgement"),
    ("\n\nquery-id\tcorpus-id\tscore\n\n  \n", "holds only a header line (line 3) and no judgement"),
    ("\n \n", "is empty"),
], ids=["header", "header-blank-lines", "blank"])
def test_a_qrels_file_without_a_judgement_is_refused_naming_it(tmp_path, qrels, said):
    text = _refused(_folder(tmp_path / "b", qrels))
    assert text.startswith("test.tsv:") and said in text, text


# ---- an empty split -----------------------------------------------------------------------------
@pytest.mark.parametrize("split", ["", "  ", "../test", "."])
def test_an_empty_or_path_like_split_is_refused_naming_the_key(tmp_path, split):
    folder = _folder(tmp_path / "b", "q1\tp1\t1\n")
    with pytest.raises(ConfigError, match=r"dataset\.split"):
        check_dataset_config({"loader": "beir", "path": str(folder), "split": split})


def test_split_given_empty_to_the_data_command_is_refused_not_read_as_test(tmp_path, capsys):
    folder = _folder(tmp_path / "b", "q1\tp1\t1\n")
    assert data_main(["beir", f"path={folder}"]) == 0  # test.tsv is there and readable
    capsys.readouterr()
    assert data_main(["beir", f"path={folder}", "split="]) == 2
    assert data_main(["export", "beir", str(tmp_path / "out"), "--split", "", f"path={folder}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "'dataset.split'" in err[0] and "''" in err[0] and "--split" in err[1], err
    assert not (tmp_path / "out").exists()


def test_the_command_line_refuses_an_empty_split_in_one_line_with_exit_2(tmp_path):
    folder = _folder(tmp_path / "b", "q1\tp1\t1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "beir", f"path={folder}", "split="],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.strip() == ("error: ConfigError: config key 'dataset.split': expected a split name "
                                   "(qrels/<split>.tsv), got ''")


# ---- deep nesting -------------------------------------------------------------------------------
def _deep() -> str:
    return '{"id": "x", "question": ' + "[" * DEEP + "]" * DEEP + "}"


def test_a_line_nested_too_deeply_is_one_line_naming_file_and_line(tmp_path):
    folder = _folder(tmp_path / "b", "q1\tp1\t1\n")
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as f:
        f.write(_deep() + "\n")
    text = _refused(folder)
    assert text.startswith("corpus.jsonl:4: JSON nested too deeply"), text
    (tmp_path / "c.jsonl").write_text('{"id": "p1", "contents": "Mercury"}\n', encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"id": "a", "question": "q"}\n\n' + _deep() + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^q\.jsonl:3: JSON nested too deeply"):
        load_dataset({"loader": "jsonl", "questions": str(tmp_path / "q.jsonl"), "corpus": str(tmp_path / "c.jsonl")})
    (tmp_path / "m.jsonl").write_text(_deep() + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^m\.jsonl:1: JSON nested too deeply"):
        load_musique(tmp_path / "m.jsonl")


def test_a_json_document_nested_too_deeply_names_its_source():
    with pytest.raises(DataError, match=r"^requests\.jsonl\.gz line 7: JSON nested too deeply") as err:
        parse_json("[" * DEEP + "]" * DEEP, "requests.jsonl.gz line 7")
    assert len(str(err.value).splitlines()) == 1


def test_a_server_answer_nested_too_deeply_is_one_line_naming_the_server():
    with FakeServer([(200, b"[" * DEEP + b"]" * DEEP)]) as srv:
        with pytest.raises(GenerationError, match=r"/chat/completions answered JSON nested too deeply") as err:
            _gen(srv, retries=0).generate(PROMPT)
    assert f"127.0.0.1:{srv.port}" in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_json_file_holding_json_lines_is_said_to_be_one(tmp_path):
    with pytest.raises(DataError, match=r"^hotpot\.json: invalid JSON at line 2 column 1: Extra data \(a JSON Lines"):
        parse_json('{"a": 1}\n{"a": 2}\n', "hotpot.json")


# ---- a JSONL file that is one JSON list ---------------------------------------------------------
ITEM = {"id": "m1", "question": "q?", "answer": "a", "paragraphs": [
    {"idx": 0, "title": "t", "paragraph_text": "a b", "is_supporting": True}]}


@pytest.mark.parametrize("text, where", [
    (json.dumps([ITEM, ITEM]) + "\n", "m.jsonl:1"),  # the list on one line
    (json.dumps([ITEM, ITEM], indent=2) + "\n", "m.jsonl:1"),  # pretty-printed
    ("\n\n" + json.dumps([ITEM]) + "\n", "m.jsonl:3"),  # after blank lines
], ids=["one-line", "indented", "after-blank-lines"])
def test_a_jsonl_file_that_is_one_json_list_is_said_to_be_one(tmp_path, text, where):
    (tmp_path / "m.jsonl").write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_musique(tmp_path / "m.jsonl")
    msg = str(err.value)
    assert msg.startswith(where) and "m.jsonl is one JSON list; expected JSON Lines (JSONL)" in msg
    assert len(msg.splitlines()) == 1


def test_a_list_line_or_an_object_over_several_lines_says_jsonl_is_one_object_per_line(tmp_path):
    (tmp_path / "m.jsonl").write_text(json.dumps(ITEM) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^m\.jsonl:2: expected a JSON object, got list \(JSON Lines"):
        load_musique(tmp_path / "m.jsonl")
    (tmp_path / "m.jsonl").write_text(json.dumps(ITEM, indent=2) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"^m\.jsonl:1: .*spread over several lines"):
        load_musique(tmp_path / "m.jsonl")


# ---- lone strings and padded ids ----------------------------------------------------------------
def test_a_lone_string_counts_as_one_item(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"id": "p1", "contents": "Mercury"}\n{"id": "p2", "contents": "Mars"}\n',
                                      encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"id": "a", "question": "small?", "golden_answers": "Mercury", "gold_ids": "p1"}\n',
                                      encoding="utf-8")
    ds = load_dataset({"loader": "jsonl", "questions": str(tmp_path / "q.jsonl"), "corpus": str(tmp_path / "c.jsonl")})
    assert [(q.answers, q.gold_unit_ids) for q in ds.questions] == [(("Mercury",), ("p1",))]
    folder = _folder(tmp_path / "b", "q1\tp1\t1\n", queries=[{"_id": "q1", "text": "small?", "answers": "Mercury"}])
    assert [q.answers for q in load_dataset({"loader": "beir", "path": str(folder)}).questions] == [("Mercury",)]


def test_ids_are_stripped_of_surrounding_whitespace_everywhere(tmp_path):
    corpus = [{**c, "_id": f" {c['_id']}\t"} for c in CORPUS]
    queries = [{**q, "_id": f"{q['_id']} "} for q in QUERIES]
    assert _gold(_folder(tmp_path / "b", "q1 \t p1\t1\nq2\tp3 \t1\nq3\tp2\t1\n", corpus, queries)) == ALL
    twice = _refused(_folder(tmp_path / "c", "q1\tp1\t1\n", [*CORPUS, {"_id": "p1 ", "text": "again"}]))
    assert twice.startswith("corpus.jsonl:4, field '_id'") and "appears twice" in twice
    (tmp_path / "c.jsonl").write_text('{"id": "p1", "contents": "Mercury"}\n', encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"id": " a ", "question": "small?", "gold_ids": [" p1 "]}\n', encoding="utf-8")
    ds = load_dataset({"loader": "jsonl", "questions": str(tmp_path / "q.jsonl"), "corpus": str(tmp_path / "c.jsonl")})
    assert [(q.qid, q.gold_unit_ids) for q in ds.questions] == [("a", ("p1",))]


def test_the_user_docs_state_the_rules():
    docs = (REPO / "docs" / "datasets.md").read_text(encoding="utf-8")
    for rule in ("A lone string where a list is expected counts as a list of one", "stripped of surrounding",
                 "### Qrels files", "TREC's", "one JSON list", "an empty\n  value (`split=`) is refused"):
        assert rule in docs, rule


# ---- server answers without the top-k alternatives ----------------------------------------------
def _parse(**change):
    return parse_chat_completion(good_answer(**change), backend="openai-http", model="m", source="srv", top_k=5,
                                 require_content=True)


@pytest.mark.parametrize("change, token", [
    ({"choices.0.logprobs.content.0.top_logprobs": None}, 0),  # the key left out
    ({"choices.0.logprobs.content.1.top_logprobs": []}, 1),  # an empty list
    ({"choices.0.logprobs.content.0.top_logprobs": None, "choices.0.logprobs.content.1.top_logprobs": None}, 0),
], ids=["missing", "empty", "all-missing"])
def test_an_answer_without_top_logprobs_is_refused_naming_the_field_and_setting(change, token):
    with pytest.raises(ServerAnswerError) as err:
        _parse(**change)
    msg = str(err.value)
    assert msg.startswith(f"srv: answer field choices[0].logprobs.content[{token}].top_logprobs is missing or empty")
    assert "top_k=5" in msg and "arms.blocks[].generator" in msg and len(msg.splitlines()) == 1
    assert _parse().tokens[0].top  # a whole answer passes


def test_an_answer_without_top_logprobs_caches_nothing(tmp_path):
    dataset = load_dataset({"name": "qasper", "loader": "qasper", "path": str(FIXTURE)})
    rows = pd.DataFrame({"qid": sorted(q.qid for q in dataset.questions)})
    bare = good_answer(**{"choices.0.logprobs.content.0.top_logprobs": None,
                          "choices.0.logprobs.content.1.top_logprobs": None})
    with FakeServer([(200, good_answer()), (200, bare)]) as srv:
        arm = NoRetrievalArm(generator=f"http://127.0.0.1:{srv.port}", model="m", retries=0)
        with pytest.raises(HarnessError, match=r"top_logprobs is missing or empty"):
            build_block(arm, rows, dataset, base_key="b", required_keys={"base": "b"}, cache_dir=tmp_path / "blocks")
    assert not list((tmp_path / "blocks").rglob("*.parquet"))
