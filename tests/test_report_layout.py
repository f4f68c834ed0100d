"""The report's layout on a hand-built sweep: the first section after the title is the verdicts
(the first screen answers), the decision table follows, the per-job table is last and folded
(``<details>``), every name is HTML-escaped, and ``--budget`` / ``--cost`` print key-value lines
of at most 100 characters."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest

from harness.report.html_page import render_html
from harness.report.markdown_page import render_markdown
from harness.report.page_content import NO_VERDICT
from harness.protocols.builtin import decision_table_result
from harness.protocols.decision_table import COLUMNS, decision_table
from harness.protocols.decision_table_render import HEADERS, _text_cells, format_keyvalue
from harness.report.columns import Column
from harness.report.model import JobRow, SweepReport
from tests.helpers.verdicts import _arms, _record

ODD = '<script>alert("x")</script>&co'  # a policy name that is markup


class _Outline(HTMLParser):
    """Headings in order, the element path of each table id, and balanced tags."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.headings, self.tables, self.errors, self._text = [], [], {}, [], None

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        if tag == "table":
            self.tables.setdefault(dict(attrs).get("id") or dict(attrs).get("class"), list(self.stack))
        self.stack.append(tag)
        if tag in ("h1", "h2", "h3"):
            self._text = ""

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> in {self.stack[-3:]}")
            return
        self.stack.pop()
        if tag in ("h1", "h2", "h3"):
            self.headings.append((tag, self._text.strip()))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text += data


def _sweep() -> SweepReport:
    base, extra = _arms(rescues=10)
    records = [_record("ridge", base, extra, extra.copy(), 0.7, cost=0.02),
               _record(ODD, base, extra, extra * 0, 0.5, cost=0.02)]
    table = decision_table(records)
    rows = [JobRow(f"{name} c=0.02", f"{name} c=0.02", "FINISHED", name, "0.02", {"heldout/utility": u})
            for name, u in (("ridge", 0.8), (ODD, 0.6))]
    rep = SweepReport("sw-<1>", "sqlite:///mlruns/mlflow.db", "exp <&>", "parent", rows,
                      [Column("heldout utility", "heldout/utility", "high")], None,
                      results={"budget": decision_table_result(table)})
    rep.warnings = ["a <warning>"]
    return rep


def test_the_first_section_is_the_verdicts_and_the_job_table_is_last_and_folded():
    page = render_html(_sweep(), None)
    p = _Outline()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    assert p.headings[0] == ("h1", "Sweep sw-<1>")
    assert p.headings[1] == ("h2", "Verdicts")  # the first heading after the title
    h2 = [text for tag, text in p.headings if tag == "h2"]
    assert h2.index("Decision table") == 1 and h2[-2:] == ["Jobs", "About this report"]
    tables = list(p.tables)
    assert tables[0] == "verdicts"  # the first table on the page
    assert "details" in p.tables["comparison"] and "details" not in p.tables["verdicts"]
    assert "details" in p.tables["decision-table"]  # every column: folded under the short tables
    assert "details" not in p.tables["decision-budget"]
    assert page.index('id="verdicts"') < page.index('class="decision-budget"') < page.index('id="comparison"')
    assert "<style>" in page and "overflow-x:auto" in page and "nth-child(even)" in page
    for anchor in ("verdicts", "protocol-budget", "frontiers", "jobs"):
        assert f'href="#{anchor}"' in page and f'id="{anchor}"' in page
    # the verdict words reach the first table
    assert "deploy ridge: ridge beats always" in page[page.index('id="verdicts"'):page.index("</table>")]


def test_names_are_html_escaped():
    rep = _sweep()
    page = render_html(rep, None)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "sw-&lt;1&gt;" in page and "exp &lt;&amp;&gt;" in page and "a &lt;warning&gt;" in page
    md = render_markdown(rep, None)
    assert "<script>" not in md and "&lt;script&gt;" in md


def test_markdown_opens_on_the_verdicts_and_folds_the_jobs():
    md = render_markdown(_sweep(), None)
    headings = [line for line in md.splitlines() if line.startswith("#")]
    assert headings[0] == "# Sweep sw-&lt;1&gt;" and headings[1] == "## Verdicts" and headings[2] == "## Decision table"
    jobs = md[md.index("## Jobs"):]
    assert jobs.index("<details>") < jobs.index("| job | policy |") < jobs.index("</details>")
    assert "[Verdicts](#verdicts)" in md and "[Decision table](#decision-table)" in md


def test_no_protocol_b_says_there_is_no_verdict():
    rep = _sweep()
    rep.results = {}
    page = render_html(rep, None)
    assert html.escape(NO_VERDICT) in page
    assert page.index("<h2>Verdicts</h2>") < page.index("<h2>Frontiers</h2>") < page.index("<h2>Jobs</h2>")


def test_single_cell_is_key_value_lines_of_at_most_100_characters():
    table = _sweep().decision_table
    note = "a long note " * 20  # a value wider than a line is wrapped, not cut
    table.loc[table.index[0], "note"] = note
    text = format_keyvalue(table)
    lines = text.splitlines()
    assert lines and max(len(line) for line in lines) <= 100
    header, rows = _text_cells(table)
    assert sum(1 for line in lines if not line.startswith(" ") and "; deployable" in line) == 2
    for name, value in zip(header, rows[1]):  # every non-empty value of a row, under its column's name
        if value and name not in ("cost", "budget", "policy", "kind", "mark"):
            assert any(line.strip().startswith(f"{name}:") and line.rstrip().endswith(value) for line in lines), name
    assert " ".join(note.split()) in " ".join(text.split())
    assert set(HEADERS) >= set(COLUMNS)


@pytest.mark.parametrize("width", [60, 100])
def test_key_value_width_is_a_parameter(width):
    assert max(len(line) for line in format_keyvalue(_sweep().decision_table, width).splitlines()) <= width
