"""Multi-hop pool modes (question, global) for HotpotQA, MuSiQue and 2WikiMultiHopQA, on small
files the tests write: counts, deduplication, gold mapping, HotpotQA's unchanged fingerprint,
one line per bad file, and a real table build in each mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data import load_dataset
from harness.errors import ConfigError, DataError

HOTPOT_FIXTURE = Path(__file__).parent / "fixtures" / "data" / "hotpot-fixture.json"
# the fixture's fingerprint before pool modes existed: pool=question must keep it (and so every
# cached HotpotQA table); a SHA-256 over its units and questions, not a float
HOTPOT_FIXTURE_FINGERPRINT = "51b9f5997a9557faa559d53f5a39484be47b7268ed3d686d77efcf437ca3a9d5"


def _hotpot_shared(tmp_path: Path) -> Path:
    """The fixture plus a question sharing one paragraph with h1 exactly and one by title only."""
    data = json.loads(HOTPOT_FIXTURE.read_text())
    data.append({"_id": "h3", "question": "When was Alpha Weekly founded?", "answer": "1844", "type": "bridge",
                 "level": "easy", "supporting_facts": [["Alpha Weekly", 0]],
                 "context": [["Delta", ["Delta is a town."]],  # same title as h2's, other text
                             ["Alpha Weekly", ["Alpha Weekly was founded in 1844."]]]})  # = h1's
    p = tmp_path / "hotpot.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def test_hotpotqa_question_pool_keeps_its_fingerprint():
    ds = load_dataset({"loader": "hotpotqa", "path": str(HOTPOT_FIXTURE)})
    assert ds.fingerprint() == HOTPOT_FIXTURE_FINGERPRINT and ds.options == {}
    same = load_dataset({"loader": "hotpotqa", "path": str(HOTPOT_FIXTURE), "pool": "question"})
    assert same.fingerprint() == HOTPOT_FIXTURE_FINGERPRINT


def test_hotpotqa_global_pool_dedups_by_title_and_text(tmp_path):
    path = _hotpot_shared(tmp_path)
    per_q = load_dataset({"loader": "hotpotqa", "path": str(path)})
    ds = load_dataset({"loader": "hotpotqa", "path": str(path), "pool": "global"})
    # 3 + 2 + 2 candidates; h3's Alpha Weekly equals h1's, its Delta differs from h2's in text
    assert per_q.n_units == 7 and ds.n_units == 6
    assert ds.meta["candidate_paragraphs"] == 7 and ds.meta["distinct_paragraphs"] == 6
    assert list(ds.pools) == ["global"] and ds.pools["global"] == [f"p{i:06d}" for i in range(6)]
    assert {q.pool_id for q in ds.questions} == {"global"}
    text = {u: ds.unit(u).text for u in ds.pools["global"]}
    assert list(text.values()) == [
        "Gamma Daily: Gamma Daily is a newspaper. It closed in 1990.",
        "Alpha Weekly: Alpha Weekly was founded in 1844.",
        "Beta Monthly: Beta Monthly is a magazine. It was founded in 1989.",
        "Delta: Delta is a city in Canada.", "Epsilon: Epsilon is a letter.", "Delta: Delta is a town."]
    q = {x.qid: x for x in ds.questions}
    # gold = the supporting paragraphs mapped to their deduplicated ids, the same texts as per question
    for x in per_q.questions:
        assert [ds.unit(g).text for g in q[x.qid].gold_unit_ids] == [per_q.unit(g).text for g in x.gold_unit_ids]
    assert q["h1"].gold_unit_ids == ("p000001", "p000002") and q["h3"].gold_unit_ids == ("p000001",)
    assert q["h2"].evidence_match == {"exact": 1, "fuzzy": 0, "unmatched": 1}
    assert len({x.doc_id for x in ds.questions}) == 3  # each question its own group
    assert ds.options == {"pool": "global"} and ds.fingerprint() != per_q.fingerprint()
    sub = load_dataset({"loader": "hotpotqa", "path": str(path), "pool": "global", "max_questions": 1})
    assert [x.qid for x in sub.questions] == ["h1"] and len(sub.pools["global"]) == 6  # the whole pool


def _musique_row(qid: str, paragraphs: list[tuple[str, str, bool]], **extra) -> dict:
    row = {"id": qid, "question": f"question {qid}?", "answer": "Paris", "answer_aliases": ["City of Light"],
           "paragraphs": [{"idx": i, "title": t, "paragraph_text": x, "is_supporting": s}
                          for i, (t, x, s) in enumerate(paragraphs)],
           "answerable": True}
    row.update(extra)
    return row


MUSIQUE = [
    _musique_row("2hop__1", [("France", "Paris is the capital of France.", True), ("Rhine", "A river.", False),
                             ("Eiffel", "The tower is in Paris.", True)]),
    _musique_row("3hop__2", [("Rhine", "A river.", False), ("France", "Paris is the capital of France.", True),
                             ("France", "France is in Europe.", True), ("Seine", "It flows through Paris.", True)],
                 answer="yes", answer_aliases=[]),
    _musique_row("2hop__3", [("Rhine", "A river.", True), ("Alps", "Mountains.", False)], answerable=False),
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_musique_both_pools(tmp_path):
    path = _write_jsonl(tmp_path / "musique.jsonl", MUSIQUE)
    per_q = load_dataset({"loader": "musique", "path": str(path)})
    assert [x.qid for x in per_q.questions] == ["2hop__1", "3hop__2"]  # the unanswerable one left out
    assert per_q.meta["left_out"] == {"unanswerable_questions": 1}
    assert per_q.pools == {"2hop__1": ["2hop__1#0", "2hop__1#1", "2hop__1#2"],
                           "3hop__2": [f"3hop__2#{i}" for i in range(4)]}
    q1, q2 = per_q.questions
    assert q1.gold_unit_ids == ("2hop__1#0", "2hop__1#2") and q1.answers == ("Paris", "City of Light")
    assert q2.gold_unit_ids == ("3hop__2#1", "3hop__2#2", "3hop__2#3")  # a repeated title, two paragraphs
    assert (q1.answer_type, q2.answer_type, q2.answers) == ("span", "yes_no", ("yes",))
    assert per_q.unit("2hop__1#1").text == "Rhine: A river." and per_q.meta["licence"] == "CC BY 4.0"

    ds = load_dataset({"loader": "musique", "path": str(path), "pool": "global"})
    assert ds.meta["candidate_paragraphs"] == 7 and ds.n_units == 5  # Rhine and France/Paris shared
    assert [ds.unit(u).text for u in ds.pools["global"]] == [
        "France: Paris is the capital of France.", "Rhine: A river.", "Eiffel: The tower is in Paris.",
        "France: France is in Europe.", "Seine: It flows through Paris."]
    g1, g2 = ds.questions
    assert g1.gold_unit_ids == ("p000000", "p000002") and g2.gold_unit_ids == ("p000000", "p000003", "p000004")
    assert g1.evidence_match["exact"] == 2 and g2.evidence_match["exact"] == 3


TWOWIKI = [
    {"_id": "w1", "type": "comparison", "question": "Who was born first, Ann or Bob?", "answer": "Ann",
     "context": [["Ann", ["Ann was born in 1900.", "She was a painter."]], ["Bob", ["Bob was born in 1950."]],
                 ["Cat", ["Cat is a film."]]],
     "supporting_facts": [["Ann", 0], ["Bob", 0]], "evidences": []},
    {"_id": "w2", "type": "compositional", "question": "Where was the director of Cat born?", "answer": "Rome",
     "context": [["Cat", ["Cat is a film."]], ["Dan", [" Dan directed Cat.", " He was born in Rome."]]],
     "supporting_facts": [["Cat", 0], ["Dan", 1]], "evidences": []},
]


def test_twowiki_both_pools(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(TWOWIKI), encoding="utf-8")
    per_q = load_dataset({"loader": "2wikimultihopqa", "path": str(path)})
    assert per_q.n_units == 5 and per_q.meta["licence"] == "Apache-2.0"
    assert per_q.unit("w1#0").text == "Ann: Ann was born in 1900. She was a painter."
    assert per_q.unit("w2#1").text == "Dan: Dan directed Cat. He was born in Rome."  # one space, either way
    assert [(x.qid, x.gold_unit_ids, x.answers) for x in per_q.questions] == [
        ("w1", ("w1#0", "w1#1"), ("Ann",)), ("w2", ("w2#0", "w2#1"), ("Rome",))]
    ds = load_dataset({"loader": "2wikimultihopqa", "path": str(path), "pool": "global"})
    assert ds.n_units == 4 and ds.meta["candidate_paragraphs"] == 5  # Cat shared
    assert [x.gold_unit_ids for x in ds.questions] == [("p000000", "p000001"), ("p000002", "p000003")]


def test_pool_option_is_checked():
    with pytest.raises(ConfigError) as err:
        load_dataset({"loader": "musique", "path": "m.jsonl", "pool": "globl"})
    assert err.value.key == "dataset.pool" and "did you mean 'global'" in str(err.value)


def _musique_bad(rows_change):
    rows = json.loads(json.dumps(MUSIQUE))
    rows_change(rows)
    return rows


BAD_MUSIQUE = [
    ("empty-question", lambda r: r[1].update(question="  "), "musique.jsonl:2", "'question'", "empty question"),
    ("duplicate-id", lambda r: r[1].update(id="2hop__1"), "musique.jsonl:2", "'id'", "appears twice (first on line 1)"),
    ("duplicate-idx", lambda r: r[0]["paragraphs"][2].update(idx=0), "musique.jsonl:1", "'paragraphs[2].idx'",
     "idx 0 appears twice"),
    ("supporting-not-bool", lambda r: r[0]["paragraphs"][1].update(is_supporting="no"), "musique.jsonl:1",
     "'paragraphs[1].is_supporting'", "expected a boolean, got str"),
    ("missing-text", lambda r: r[1]["paragraphs"][0].pop("paragraph_text"), "musique.jsonl:2",
     "'paragraphs[0].paragraph_text'", "missing key"),
    ("empty-text", lambda r: r[1]["paragraphs"][0].update(paragraph_text=" "), "musique.jsonl:2",
     "'paragraphs[0].paragraph_text'", "is empty"),
    ("no-supporting", lambda r: [p.update(is_supporting=False) for p in r[0]["paragraphs"]], "musique.jsonl:1",
     "'paragraphs'", "no paragraph is_supporting"),
    ("aliases", lambda r: r[0].update(answer_aliases="Paris"), "musique.jsonl:1", "'answer_aliases'",
     "list of strings"),
]


@pytest.mark.parametrize("name, change, where, field, problem", BAD_MUSIQUE, ids=[b[0] for b in BAD_MUSIQUE])
def test_each_bad_musique_file_is_one_line(tmp_path, name, change, where, field, problem):
    path = _write_jsonl(tmp_path / "musique.jsonl", _musique_bad(change))
    with pytest.raises(DataError) as err:
        load_dataset({"loader": "musique", "path": str(path)})
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith(where) and field in text and problem in text, text


BAD_TWOWIKI = [
    ("past-end", lambda d: d[0]["supporting_facts"][1].__setitem__(1, 1), "'[0].supporting_facts[1][1]'",
     "sentence index 1 is past the last sentence of paragraph 'Bob'"),
    ("duplicate-title", lambda d: d[1]["context"][1].__setitem__(0, "Cat"), "'[1].context[1][0]'",
     "title 'Cat' appears twice in one context"),
    ("empty-question", lambda d: d[0].update(question=""), "'[0].question'", "empty question"),
    ("context-shape", lambda d: d[0]["context"][2].pop(), "'[0].context[2]'", "expected [title, [sentences]]"),
]


@pytest.mark.parametrize("name, change, field, problem", BAD_TWOWIKI, ids=[b[0] for b in BAD_TWOWIKI])
def test_each_bad_twowiki_file_is_one_line(tmp_path, name, change, field, problem):
    data = json.loads(json.dumps(TWOWIKI))
    change(data)
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_dataset({"loader": "2wikimultihopqa", "path": str(path), "pool": "global"})
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith("dev.json") and field in text and problem in text, text


def test_the_command_line_gives_one_line(tmp_path):
    rows = _musique_bad(lambda r: r[0]["paragraphs"][2].update(idx=0))
    path = _write_jsonl(tmp_path / "musique.jsonl", rows)
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "musique", f"path={path}", "pool=global"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("error: DataError: musique.jsonl:1, field 'paragraphs[2].idx': idx 0 appears "
                                   "twice in one question (first at paragraphs[0])")
    ok = _write_jsonl(tmp_path / "ok.jsonl", MUSIQUE)
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "musique", f"path={ok}", "pool=global", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert (stats["questions"], stats["units"], stats["pools"], stats["options"]) == (2, 5, 1, {"pool": "global"})
    assert stats["licence"] == "CC BY 4.0"


@pytest.mark.slow
@pytest.mark.parametrize("pool", ["question", "global"])
def test_a_table_builds_in_each_pool_mode(tmp_path, pool):
    """The real table build (retrievers, reranker, gold columns) on a tiny HotpotQA file: one row
    per question, each arm's top k drawn from that question's pool."""
    from harness.retrieval.table import build_outcome_table

    ds = load_dataset({"loader": "hotpotqa", "path": str(_hotpot_shared(tmp_path)), "pool": pool})
    table = build_outcome_table(ds, {"precision": "fp32"}, {"name": "maxsim"}, cache_dir=tmp_path / "tables",
                                progress=False)
    frame = table.frame
    assert sorted(frame["qid"].astype(str)) == ["h1", "h2", "h3"]
    for _, row in frame.iterrows():
        pool_ids = ds.pools[row["pool_id"]]  # question: its 2-3 candidates; global: all 6 paragraphs
        assert len(pool_ids) == (6 if pool == "global" else {"h1": 3, "h2": 2, "h3": 2}[row["qid"]])
        for arm in ("keep", "hybrid", "bm25", "dense"):
            # pools of at most 6 units, fewer than k=10: every arm ranks the whole pool
            assert sorted(row[f"{arm}.top10"]) == sorted(pool_ids)
            assert row[f"{arm}.hit@10"] == 1


@pytest.mark.parametrize("name", ["hotpotqa", "musique", "2wikimultihopqa"])
def test_pool_is_a_plain_override(name):
    from harness.config.compose import compose_config
    from harness.config.validation import validate

    extra = [] if name == "musique" else ["dataset.past_end_facts=skip"]
    cfg = compose_config([f"dataset={name}", "dataset.path=data.json", "dataset.pool=global", *extra])
    validate(cfg)
    assert cfg.dataset.loader == name and cfg.dataset.pool == "global"
    assert compose_config([f"dataset={name}", "dataset.path=data.json"]).dataset.pool == "question"
