"""docs/results.md is generated from logged runs, and every number of ours on it is the value
of the run it cites.

- The papers' figures (harness.published) are verbatim pieces of the quoted passages, and the
  passages are in the papers whenever the seed texts are at hand (``HARNESS_SEEDS_DIR`` or
  ``../shared/seeds`` next to the repository).
- The fast variant of each named experiment runs from scratch (real data, real models, small
  slices), ``python -m harness results --variant fast`` writes a page, and each cited number is
  read back here from the MLflow store with MLflow's own client (a metric, a ratio of two, a
  mean, or one cell of a CSV artifact) and formatted here, independently of harness.results.
- The committed docs/results.md agrees with its sidecar docs/results.json (every cited number
  in page order, the commit it was made at) and names the fingerprints; where the store that
  produced it is at hand (``HARNESS_RESULTS_STORE``), every cited value is read back from it.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.published import FIGURES, PAPERS
from tests.helpers.cites import _check_cites, _find_token, _fmt, _ours_cells_are_cited, _value_tokens

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "results.md"
SIDECAR = REPO / "docs" / "results.json"
FAST = ("seed000_keep_hybrid_fast", "seed003_budget_triggers_fast", "seed002_rag_gain_fast")


# ---- the papers' figures ------------------------------------------------------------------------
def test_every_published_figure_is_in_the_passage_it_quotes():
    assert len({f.key for f in FIGURES}) == len(FIGURES)
    for f in FIGURES:
        assert f.paper in PAPERS
        quote = f.quote.replace("−", "-")
        for token in _value_tokens(f.text):
            assert token in quote, (f.key, token, f.quote)


def _seeds_dir() -> Path | None:
    env = os.environ.get("HARNESS_SEEDS_DIR")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "seeds"]:
        if cand.is_dir() and list(cand.glob("000_*.txt")):
            return cand
    return None


def test_every_quoted_passage_is_in_its_paper():
    seeds = _seeds_dir()
    if seeds is None:
        pytest.skip("the seed papers are not at hand (HARNESS_SEEDS_DIR)")
    texts = {p.name[:3]: p.read_text(encoding="utf-8") for p in seeds.glob("*.txt")}
    for f in FIGURES:
        assert f.quote in texts[f.paper], (f.key, f.quote)


# ---- a page from fresh runs ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def fast_store(tmp_path_factory):
    """The three fast experiments, run from scratch into one store (one cache: they share the
    QASPER slice's table)."""
    root = tmp_path_factory.mktemp("results")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    # the suite's cache when CI sets one (the QASPER wheel and tables are shared), else a fresh one
    env = {**os.environ, "HARNESS_CACHE_DIR": os.environ.get("HARNESS_CACHE_DIR") or str(root / "cache")}
    for name in FAST:
        proc = subprocess.run([sys.executable, "-m", "harness", "-m", f"experiment={name}", f"tracking.uri={uri}"],
                              cwd=root, env=env, capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, (name, proc.stdout[-4000:], proc.stderr[-4000:])
    out = root / "docs" / "results.md"
    proc = subprocess.run([sys.executable, "-m", "harness", "results", "--variant", "fast", "--out", str(out),
                           "--tracking-uri", uri], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return uri, out


@pytest.mark.slow
def test_fast_page_numbers_are_the_runs_values(fast_store):
    from mlflow.tracking import MlflowClient

    uri, out = fast_store
    page = out.read_text(encoding="utf-8")
    sidecar = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert _check_cites(page, sidecar, MlflowClient(tracking_uri=uri)) > 100
    _ours_cells_are_cited(page, sidecar)
    _summary_is_its_claims(page, sidecar)
    assert sidecar["missing"] == [], sidecar["missing"]  # every metric the page reads was logged
    # the three experiments are on it, each with its paper's figures beside ours
    for title in ("seed 000", "seed 003", "seed 002"):
        assert f"({title})" in page
    for f in FIGURES:
        if f.key.startswith(("s0.", "s3.dep50", "s2.r_wig", "s2.q_")):
            assert f.text in page, f.key
    assert re.search(r"Dataset fingerprint: `[0-9a-f]{8,}", page)
    assert re.search(r"git commit `[0-9a-f]{7,}|git commit `unknown", page)
    assert "Why our numbers differ" in page and "cannot tell" in page


@pytest.mark.slow
def test_a_number_that_is_not_the_runs_value_is_caught(fast_store):
    """The check above can fail: a cited value changed in the sidecar, or a number changed on the
    page, is reported."""
    from mlflow.tracking import MlflowClient

    uri, out = fast_store
    client = MlflowClient(tracking_uri=uri)
    page = out.read_text(encoding="utf-8")
    sidecar = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    i = next(i for i, c in enumerate(sidecar["numbers"]) if c["text"] not in ("n/a",) and c["op"] == "metric")
    wrong = json.loads(json.dumps(sidecar))
    wrong["numbers"][i]["text"] = "123.456"
    with pytest.raises(AssertionError):
        _check_cites(page, wrong, client)
    text = sidecar["numbers"][i]["text"]
    with pytest.raises(AssertionError):
        _check_cites(page.replace(text, "123.456"), sidecar, client)
    # a table number changed in place (sign, a digit in front): not a cited number any more
    lines = page.splitlines()
    body = [j for j in range(2, len(lines)) if lines[j].startswith("|") and lines[j - 1].startswith("|")
            and not set(lines[j]) <= set("|-")]  # table rows below a header and its separator
    k, cell = next((j, t) for j in body for t in _value_tokens(lines[j].split("|", 2)[2])
                   if re.fullmatch(r"\d+\.\d+", t) and t in {c["text"] for c in sidecar["numbers"]}
                   and not any(t in f.text for f in FIGURES))
    for changed in (f"-{cell}", f"9{cell}"):
        lines = page.splitlines()
        label_end = len(lines[k].split("|", 2)[1]) + 2  # after the label column
        at = _find_token(lines[k], cell, label_end)
        lines[k] = lines[k][:at] + changed + lines[k][at + len(cell):]
        with pytest.raises(AssertionError):
            _ours_cells_are_cited("\n".join(lines), sidecar)


@pytest.mark.slow
def test_results_refuse_an_empty_or_missing_store(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "results", "--tracking-uri",
                           f"sqlite:///{tmp_path / 'none.db'}", "--out", str(tmp_path / "r.md")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--tracking-uri" in proc.stderr and not (tmp_path / "r.md").exists()


def _summary_is_its_claims(page: str, sidecar: dict) -> None:
    """The page opens on the summary; each claim's status is its rule re-applied to its recorded
    inputs, each input is a number the page cites, and the table is the claims rendered."""
    from harness import results_summary as rs

    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Summary"
    summary = page[page.index("## Summary"):page.index(headings[1])]
    assert len(summary.splitlines()) <= 40  # one screen
    assert max(len(line) for line in summary.splitlines() if line.startswith("|")) <= 140
    cited = [c["value"] for c in sidecar["numbers"]]
    claims = []
    for c in sidecar["claims"]:
        settings = {k: tuple(v) if isinstance(v, list) else v for k, v in c["settings"].items()}
        again = getattr(rs, c["rule"])(c["seed"], c["finding"], c["dataset"], *c["args"], **settings)
        assert (again.status, again.reasons) == (c["status"], c["reasons"]), c
        for x in (x for x in c["args"] if x == x):  # a NaN input is a number not logged, nothing cited
            assert any(math.isclose(x, v, rel_tol=1e-12) for v in cited if v == v), (c["finding"], x)
        claims.append(again)
    assert claims and "\n".join(rs.summary_lines(claims)).strip() in page
    for line in summary.splitlines():  # words only in the table: no column mixes units
        if line.startswith("| ") and not line.startswith("| finding"):
            assert not re.search(r"\d", "|".join(line.split("|")[2:])), line


# ---- the committed page -------------------------------------------------------------------------
# the page, BoolQ's page and seed 003's page with its trigger cascade (their runs in other stores)
COMMITTED = (PAGE, REPO / "docs" / "results_boolq.md", REPO / "docs" / "results_seed003.md")


@pytest.mark.parametrize("page_path", COMMITTED, ids=lambda p: p.name)
def test_committed_page_matches_its_sidecar(page_path):
    sidecar_file = page_path.with_suffix(".json")
    assert page_path.is_file() and sidecar_file.is_file(), f"{page_path.name} and its .json are generated together"
    page = page_path.read_text(encoding="utf-8")
    sidecar = json.loads(sidecar_file.read_text(encoding="utf-8"))
    assert sidecar["variant"] == "full" and len(sidecar["numbers"]) > 100
    assert f"git commit `{sidecar['git_commit']}`" in page
    pos = 0
    for cite in sidecar["numbers"]:
        assert _fmt(cite["value"], cite["scale"], cite["decimals"]) == cite["text"], cite
        at = _find_token(page, cite["text"], pos)
        assert at >= 0, cite
        pos = at + len(cite["text"])
    assert sidecar.get("missing") == [], "metrics the page asked for but the runs do not have"
    _ours_cells_are_cited(page, sidecar)
    _summary_is_its_claims(page, sidecar)
    assert re.search(r"Dataset fingerprint: `[0-9a-f]{8,}", page)
    if page_path == PAGE:
        for f in FIGURES:  # every published figure we can compare is on the page
            assert f.text in page, f.key


@pytest.mark.parametrize("page_path, variable", [(PAGE, "HARNESS_RESULTS_STORE"),
                                                 (COMMITTED[1], "HARNESS_RESULTS_BOOLQ_STORE"),
                                                 (COMMITTED[2], "HARNESS_RESULTS_SEED003_STORE")],
                         ids=["results", "boolq", "seed003"])
def test_committed_page_against_its_store(page_path, variable):
    store = os.environ.get(variable)
    if not store:
        pytest.skip(f"the store that produced {page_path.name} is not at hand ({variable})")
    from mlflow.tracking import MlflowClient

    page = page_path.read_text(encoding="utf-8")
    sidecar = json.loads(page_path.with_suffix(".json").read_text(encoding="utf-8"))
    assert _check_cites(page, sidecar, MlflowClient(tracking_uri=store)) == len(sidecar["numbers"])
