"""More bad inputs in issue 26's categories, each new: one stderr line naming the key or file.

The cases of ``tests/test_bad_inputs.py`` cover the issue's own strings; these are other inputs
of the same kinds (a second, independent battery found them accepted, hanging or unnamed):
unbounded (a FIFO inside Hydra's ``--config-dir``, huge question counts, a page written onto a
FIFO, a file that grows while it is read), silently accepted (annotators that all give an empty
answer, an empty gold list, a key given twice to ``data``, a precision or model folder the
encoder would refuse minutes later), and unnamed (a store whose folder cannot be written, a
plain folder store MLflow refuses, a port out of range, an argument that is not UTF-8, a cache
folder that is a FIFO). Each case runs the CLI entry in-process with the fixtures of
``test_bad_inputs`` (its own folder, cache and store; tests/helpers/fixtures.py). Markdown output
escapes names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.bad_inputs import HOTPOT, QASPER, _cached_files, _finished_runs, _run

SYN = "dataset=synthetic"
H = str(HOTPOT)
Q = str(QASPER)


def _qasper_blank_annotators() -> dict:
    """Every annotator of one question answers nothing (not unanswerable, no span, no free form,
    yes_no null): the official QASPER evaluator raises on such an annotation."""
    data = json.loads(QASPER.read_text(encoding="utf-8"))
    for annot in data["P1"]["qas"][0]["answers"]:
        annot["answer"].update({"unanswerable": False, "extractive_spans": [], "yes_no": None, "free_form_answer": ""})
    return data


def _musique(**changes) -> bytes:
    row = {"id": "a", "question": "q?", "answer": "Paris", "answer_aliases": [], "answerable": True,
           "paragraphs": [{"idx": 0, "title": "France", "paragraph_text": "Paris is the capital.", "is_supporting": True},
                          {"idx": 1, "title": "Rhine", "paragraph_text": "A river.", "is_supporting": False}]}
    row.update(changes)
    return (json.dumps(row) + "\n").encode()


CORPUS = b'{"id": "c1", "contents": "alpha beta"}\n{"id": "c2", "contents": "gamma delta"}\n'
MORE_FILES = {
    "qasper-blank-annotators.json": json.dumps(_qasper_blank_annotators()).encode(),
    "musique-empty-answer.jsonl": _musique(answer=" "),
    "corpus.jsonl": CORPUS,
    "q-gold-empty.jsonl": b'{"id": "q1", "question": "alpha?", "golden_answers": ["a"], "gold_ids": []}\n',
    "beir-corpus-fifo/queries.jsonl": b'{"_id": "q1", "text": "alpha?"}\n',
    "beir-corpus-fifo/qrels/test.tsv": b"query-id\tcorpus-id\tscore\nq1\tc1\t1\n",
    "model-noconfig/readme.txt": b"not a model",
    "model-badconfig/config.json": b"{not json",
    "model-badpositions/config.json": b'{"max_position_embeddings": "lots"}',
    "hydra-conf/ok.yaml": b"a: 1\n",
    "plain.md": b"x",
}
MORE_FIFOS = ["hydra-conf/config.yaml", "beir-corpus-fifo/corpus.jsonl", "cache-fifo", "page-fifo.md"]
SPARSE = "sparse-3g.json"  # 3 GiB of holes: above the default cap, no disk used

# (id, argv, text the one line must contain); exit code 2 for all; "@env:NAME=VALUE" sets a variable
MORE_CASES = [
    # --- unbounded: every file gated before it is opened, every count bounded ---
    ("file-fifo-in-config-dir", ["--config-dir", "{d}/hydra-conf", SYN], "--config-dir"),
    ("file-fifo-in-config-dir-short", ["-cd", "{d}/hydra-conf", SYN], "config.yaml: is a FIFO"),
    ("file-fifo-in-config-dir-equals", ["--config-dir={d}/hydra-conf", SYN], "is a FIFO"),
    ("file-config-dir-is-a-file", ["--config-dir", "{d}/plain.md", SYN], "not a folder"),
    ("file-fifo-beir-corpus", ["data", "beir", "path={d}/beir-corpus-fifo"], "corpus.jsonl: is a FIFO"),
    ("file-device-musique", ["data", "musique", "path=/dev/zero"], "character device"),
    ("file-device-jsonl-corpus", ["data", "jsonl", "questions={d}/q-gold-empty.jsonl", "corpus=/dev/urandom"],
     "character device"),
    ("file-sparse-app", ["dataset=2wikimultihopqa", "dataset.path={d}/" + SPARSE], "ROUTE_BENCH_MAX_FILE_MB"),
    ("file-fifo-results-out", ["results", "--out", "{d}/page-fifo.md"], "--out"),
    ("file-results-out-folder", ["results", "--out", "{d}"], "is a folder"),
    ("count-max-questions-huge", ["data", "hotpotqa", f"path={H}", "max_questions=99999999999999999999"],
     "'dataset.max_questions'"),
    ("count-max-questions-app", ["dataset=hotpotqa", f"dataset.path={H}", "dataset.max_questions=100000000"],
     "at most 10000000"),
    ("count-n-questions-huge", ["data", "boolq", "n_questions=10000000000000"], "'dataset.n_questions'"),
    # --- silently accepted: data and settings refused before any work ---
    ("datacheck-qasper-blank-annotators", ["data", "qasper", "path={d}/qasper-blank-annotators.json"],
     "'P1.qas[0].answers': none of its 2 annotator(s) gives an answer"),
    ("datacheck-qasper-blank-annotators-table", ["table", "build", "dataset=qasper",
                                                 "dataset.path={d}/qasper-blank-annotators.json"], "'P1.qas[0].answers'"),
    ("datacheck-musique-empty-answer", ["data", "musique", "path={d}/musique-empty-answer.jsonl"],
     "musique-empty-answer.jsonl:1, field 'answer'"),
    ("datacheck-jsonl-empty-gold", ["data", "jsonl", "questions={d}/q-gold-empty.jsonl", "corpus={d}/corpus.jsonl"],
     "q-gold-empty.jsonl:1, field 'gold_ids'"),
    ("misc-data-key-twice", ["data", "hotpotqa", f"path={H}", "max_questions=1", "max_questions=2"],
     "'dataset.max_questions': given twice"),
    ("misc-data-path-flag-and-key", ["data", "hotpotqa", "--path", H, f"path={H}"], "'dataset.path': given twice"),
    ("arms-precision-unknown", ["arms.precision=fp3"], "'arms.precision'"),
    ("arms-k-above-candidates", ["arms.k=1000"], "below arms.k=1000"),
    ("arms-answers-on-synthetic", ["arms=noret_rag", "protocol=answers", SYN], "the synthetic table has none"),
    ("arms-model-without-config", ["arms.encoder.model={d}/model-noconfig"], "holds no config.json"),
    ("arms-model-config-not-json", ["arms.encoder.model={d}/model-badconfig"], "is not readable JSON"),
    ("arms-model-positions-text", ["arms.encoder.model={d}/model-badpositions"], "max_position_embeddings"),
    # --- unnamed: the real cause, the right key ---
    ("misc-store-folder-not-writable", [SYN, "tracking.uri=sqlite:////proc/route-bench-26.db"], "'tracking.uri'"),
    ("misc-store-dir-not-writable", [SYN, "tracking.store_dir=/proc/sys/route-bench-26"], "'tracking.store_dir'"),
    ("misc-folder-store-refused", [SYN, "tracking.uri=some-folder"], "MLFLOW_ALLOW_FILE_STORE"),
    ("misc-server-port-out-of-range", [SYN, "tracking.uri=http://127.0.0.1:99999"], "'tracking.uri'"),
    ("misc-argument-not-utf8", ["data", "hotpotqa", "path=a\udc80b.json"], "the value of 'path' is not valid UTF-8"),
    ("misc-override-not-utf8", [SYN, "tracking.experiment=x\udcffy"], "'tracking.experiment'"),
    ("misc-cache-dir-fifo", ["@env:HARNESS_CACHE_DIR={d}/cache-fifo", "table", "build", "dataset=qasper",
                             f"dataset.path={Q}", "arms.extra=bm25"], "$HARNESS_CACHE_DIR"),
    ("misc-cache-dir-under-device", ["@env:HARNESS_CACHE_DIR=/dev/null/cache", "table", "build", "dataset=qasper",
                                     f"dataset.path={Q}", "arms.extra=bm25"], "$HARNESS_CACHE_DIR"),
    ("misc-plugin-scores-differ", [SYN, "policy=always_keep", "policy._target_=tests.bad_plugins.ScoresDiffer"],
     "tests.bad_plugins.ScoresDiffer (tests.bad_plugins.ScoresDiffer): score() gave other scores on a second call"),
    ("misc-export-unknown-flag", ["data", "export", "--bogus"], "--bogus"),
    ("misc-data-unknown-flag-first", ["data", "--bogus", "qasper"], "--bogus"),
]


@pytest.fixture
def more(workdir):  # the folder of test_bad_inputs (tests/helpers/fixtures.py), with more files
    data, run, cache = workdir
    for name, body in MORE_FILES.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(body)
    for name in MORE_FIFOS:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(data / name)
    with open(data / SPARSE, "wb") as f:
        f.truncate(3 * 2**30)
    return data, run, cache


@pytest.mark.parametrize("argv, needle", [c[1:] for c in MORE_CASES], ids=[c[0] for c in MORE_CASES])
def test_more_bad_input_is_one_line(argv, needle, more, capsys, monkeypatch):
    data, run, cache = more
    for item in [a for a in argv if a.startswith("@env:")]:
        name, _, value = item[len("@env:"):].partition("=")
        monkeypatch.setenv(name, value.format(d=data))
    argv = [a.format(d=data) for a in argv if not a.startswith("@env:")]
    code, out, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, err, out[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert needle in lines[0], lines[0]
    assert "(unexpected;" not in lines[0]
    assert _cached_files(cache) == [] and _finished_runs(run) == 0
    assert not list(Path("/proc").glob("route-bench-26*"))


def test_more_cases_cover_each_category():
    prefixes = {c[0].split("-")[0] for c in MORE_CASES}
    assert prefixes == {"file", "count", "datacheck", "misc", "arms"}
    assert len(MORE_CASES) >= 30 and len({c[0] for c in MORE_CASES}) == len(MORE_CASES)


def test_a_file_that_grows_while_it_is_read_is_capped_on_the_bytes_read(tmp_path, monkeypatch):
    """The size cap holds on what is read, not only on ``stat`` before: another process appends
    to the file right after the check (here: the check itself, then the writer), and the read
    stops one byte past the cap with a DataError naming the file and the override."""
    from harness.data import validate
    from harness.errors import DataError

    path = tmp_path / "growing.json"
    path.write_bytes(b"[" + b" " * 500 + b"]")  # 502 bytes: under the cap when stat-ed
    monkeypatch.setenv(validate.MAX_FILE_MB_ENV, str(1024 / 2**20))  # a 1024-byte cap
    real_check = validate.check_regular

    def check_then_grow(p, what="file"):
        size = real_check(p, what)
        with open(p, "ab") as f:  # the writer: 4 KiB more once the size was taken
            f.write(b" " * 4096)
        return size

    monkeypatch.setattr(validate, "check_regular", check_then_grow)
    reads = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        handle = real_open(self, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: reads.append(n) or real_read(n)
        return handle

    monkeypatch.setattr(Path, "open", counting_open)
    with pytest.raises(DataError, match=r"growing\.json.*grew above the 0\.00097\d* MB cap .*ROUTE_BENCH_MAX_FILE_MB"):
        validate.read_bytes(path, "JSON file")
    assert reads == [1025]  # one bounded read: never the whole (growing) file
    assert path.stat().st_size == 502 + 4096


# ---- Markdown: names shown as text, never read as HTML or table syntax --------------------------
def test_md_code_and_code_block_keep_any_name_literal():
    from harness.markdown import md_code, md_code_block

    assert md_code("plain") == "`plain`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x`") == "`` `x` ``"
    assert md_code("two\nlines") == "`two lines`"
    block = md_code_block("deploy <script>|x\n```\nend")
    assert block.startswith("````\n") and block.endswith("\n````") and "deploy <script>|x" in block


def test_verdicts_page_keeps_the_console_text_in_a_fence():
    """The parent run's verdicts.md, from real protocol B runs of a policy named ``<script>|x``:
    the table escapes the name, the console text below it is fenced (raw, it would put
    ``<script>`` into the Markdown)."""
    import re

    from harness.protocols import run_budget_protocol
    from harness.protocols.builtin import decision_table_result
    from harness.protocols.decision_table import JobRecord, decision_table
    from harness.synthetic import synthetic_outcome_table
    from harness.task import RoutingTask
    from policies.builtin import AlwaysBase
    from tests.helpers.policies import LstsqPolicy

    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=40, questions_per_doc=4, seed=0))
    records = []
    for name, factory in (("<script>|x", LstsqPolicy), (AlwaysBase.name, AlwaysBase)):
        res = run_budget_protocol(task, factory, budgets=(0.5,), n_splits=3, seed=0, cost=0.02)
        records.append(JobRecord(name, 0, 0.02, res.frontiers, res.decisions, cell="cost.c=0.02"))
    result = decision_table_result(decision_table(records))
    page = result.files["verdicts.md"]
    outside = re.sub(r"(?s)(`{3,}).*?\1", "", page)
    assert "<script>" not in outside and "&lt;script&gt;\\|x" in outside, page
    assert "<script>|x" in page  # the console text, fenced, as typed
    for name, text in result.files.items():
        if name.endswith(".md"):
            assert "<script>" not in re.sub(r"(?s)(`{3,}).*?\1", "", text), name


def test_results_page_escapes_names_from_the_store(monkeypatch):
    """docs/results.md: a policy, reference or experiment name from the store is text on the page
    (``<script>`` escaped, ``|`` not splitting a table cell, a backtick not closing a code span)."""
    import pandas as pd

    from harness.results import answer_tables, cite, wording

    frame = pd.DataFrame([
        {"cost": 0.02, "budget": 0.5, "kind": "deployable", "policy": "<script>|x", "mark": "ref",
         "reference": "<script>|x", "utility": 0.5, "usage": 0.5, "diff_vs_ref": 0.0, "p_holm": 1.0},
        {"cost": 0.02, "budget": 0.5, "kind": "deployable", "policy": "ridge", "mark": "<",
         "reference": "<script>|x", "utility": 0.4, "usage": 0.5, "diff_vs_ref": -0.1, "p_holm": 0.01},
    ])
    monkeypatch.setattr(answer_tables, "artifact_frame", lambda client, run_id, path: frame)
    view = SimpleNamespace(parent=SimpleNamespace(info=SimpleNamespace(run_id="r1")))
    page = cite.Page()
    answer_tables.decision_table(page, view, client=None)
    rows = [ln for ln in page.lines if ln.startswith("| ")]
    assert rows and all("<script>" not in ln for ln in page.lines), page.lines
    header_cells = rows[0].count(" | ")
    assert all(r.replace("\\|", "").count(" | ") == header_cells for r in rows), rows  # no cell split by a name
    assert any("&lt;script&gt;\\|x" in ln for ln in page.lines if ln.startswith("- c = "))

    parent = SimpleNamespace(info=SimpleNamespace(start_time=0, run_id="r`1"))
    prov_view = SimpleNamespace(
        parent=parent, experiment="<b>exp`1", sweep_id="s1", runs=[1, 2], command=lambda: "python -m harness -m x=`y`",
        tag_values=lambda tag: ["abc"], expected_jobs=lambda: 2, seeds=lambda: [0])
    page = cite.Page()
    wording.provenance(page, prov_view)
    assert "MLflow experiment ``<b>exp`1``" in page.lines[1] and "parent run ``r`1``" in page.lines[1]
    assert page.lines[0] == "- Command: `` python -m harness -m x=`y` ``"  # CommonMark strips one space each side
