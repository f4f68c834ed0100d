"""The code's shape holds: no import circle (function-local imports included), no module over
500 lines and no function over 80 lines in harness/ and policies/, and no function of the
orchestrating layers (runner/, app, protocols/, report/, results/) worse than radon's grade C;
each check is shown to fail on a planted case."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest
from radon.complexity import cc_rank, cc_visit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "policies")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
GRADED = ("harness/runner", "harness/app.py", "harness/protocols", "harness/report", "harness/results")


def _files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{_name(path)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]


def complex_functions(path: Path) -> list[str]:
    return [f"{_name(path)}:{b.lineno} {b.fullname} (grade {cc_rank(b.complexity)}, {b.complexity})"
            for b in cc_visit(path.read_text(encoding="utf-8")) if cc_rank(b.complexity) > "C"]


def test_no_import_cycle_even_through_function_local_imports():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert "harness.runner.job" in graph.modules  # the graph holds the code
    assert import_cycles(graph) == []


def test_a_planted_cycle_is_found():
    graph = grimp.ImportGraph()
    for m in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(m)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")  # as a function-local import would add it
    graph.add_import(importer="a.z", imported="a.x")
    assert import_cycles(graph) == [["a.x", "a.y"]]


def test_no_module_over_500_lines():
    files = _files()
    assert len(files) > 100
    assert [f"{p.relative_to(REPO)} ({n})" for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES] == []


def test_no_function_over_80_lines():
    assert [f for p in _files() for f in long_functions(p)] == []


def test_no_function_worse_than_grade_c_in_the_orchestrating_layers():
    graded = [p for p in _files() if any(str(p.relative_to(REPO)).startswith(g) for g in GRADED)]
    assert len(graded) > 40
    assert [f for p in graded for f in complex_functions(p)] == []


@pytest.mark.parametrize("check, body", [
    (long_functions, "def f():\n" + "    x = 1\n" * 85),
    (complex_functions, "def f(a):\n" + "".join(f"    if a == {i}:\n        return {i}\n" for i in range(25))),
])
def test_the_size_checks_can_fail(tmp_path, check, body):
    path = tmp_path / "planted.py"
    path.write_text(body, encoding="utf-8")
    assert len(check(path)) == 1
