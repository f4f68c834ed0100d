"""README.md's own-corpus quick start runs as written: the commands are read from the README's
"## Quick start" section (not copied here) and run, in order, in a fresh folder holding a BEIR
folder ``my_corpus`` written by the test, with the real MiniLM encoder and cross-encoder.

Why: a user's first contact with the harness on their own data is that block; an edited
command, a renamed key or a default that no longer fits a small corpus must fail here, not on
the user's machine. The corpus is the smallest the default sweep accepts, so the test stays
short: 28 questions leave protocol A's held-out set (dev_frac 0.8) at 28 - round(22.4) = 6
questions, protocol.min_heldout's floor; at 27 the sweep's pre-flight refuses the table.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.town_corpus import write_town_corpus

README = Path(__file__).resolve().parents[1] / "README.md"
CORPUS = "my_corpus"
N_TOWNS = 40  # five passages each: 200 passages, forty of each shape (more than the 30 reranked)
N_QUESTIONS = 28  # the fewest the default sweep's pre-flight accepts (module docstring)
SHAPE = ("the README's own-corpus quick start should be one ```sh block under '## Quick start' naming "
         f"{CORPUS}, of `python -m harness ...` lines: data, table build, the sweep (-m), report --out DIR")


def quick_start_commands(text: str) -> list[list[str]]:
    """The command lines of the Quick start's ```sh block that names ``my_corpus``, as argument
    lists, trailing ``# comments`` dropped; AssertionError naming the expected shape otherwise."""
    section = re.search(r"^## Quick start\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"README.md has no '## Quick start' section; {SHAPE}"
    blocks = [b for b in re.findall(r"^```sh\n(.*?)^```", section.group(1), re.S | re.M) if CORPUS in b]
    assert len(blocks) == 1, f"README.md's Quick start has {len(blocks)} ```sh blocks naming {CORPUS}; {SHAPE}"
    commands = [args for line in blocks[0].splitlines() if (args := shlex.split(line, comments=True))]
    assert all(c[:3] == ["python", "-m", "harness"] for c in commands), f"{commands}: {SHAPE}"
    steps = [c[3:5] for c in commands]
    assert len(commands) == 4 and steps[0][0] == "data" and steps[1] == ["table", "build"] and steps[2][0] == "-m" \
        and steps[3][0] == "report" and "--out" in commands[3], f"{commands}: {SHAPE}"
    return commands


def _run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, (shlex.join(args), proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.mark.slow
def test_the_readme_own_corpus_quick_start_runs_as_written(tmp_path):
    commands = quick_start_commands(README.read_text(encoding="utf-8"))
    write_town_corpus(tmp_path / CORPUS, n_towns=N_TOWNS, n_questions=N_QUESTIONS)
    # the suite's cache when CI sets one, else a fresh one; the README's default store (mlruns/ in
    # the launch folder, which $MLFLOW_TRACKING_URI would replace), so the runs land in tmp_path
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["HARNESS_CACHE_DIR"] = os.environ.get("HARNESS_CACHE_DIR") or str(tmp_path / "cache")
    data, build, sweep, report = (_run(c, tmp_path, env) for c in commands)

    assert re.search(rf"^questions\s+{N_QUESTIONS}$", data.stdout, re.M), data.stdout
    assert f"questions: {N_QUESTIONS} rows" in build.stdout, build.stdout
    start = re.search(r"^\[route-bench\] sweep \w+: \d+ jobs, parent run (\w+) in (\S+);", sweep.stdout, re.M)
    assert start, sweep.stdout[:2000]
    parent, store = start.groups()
    assert store == f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"  # the launch folder's, not the checkout's
    assert re.search(r"^\[route-bench\] sweep \w+: \d+ jobs, 0 failed -> parent run FINISHED$", sweep.stdout, re.M), \
        sweep.stdout[-3000:]
    assert "\nVerdict per cost and budget" in sweep.stdout, sweep.stdout[-3000:]

    out = tmp_path / commands[3][commands[3].index("--out") + 1]
    assert (out / "report.html").is_file(), report.stdout + report.stderr
    assert parent in (out / "report.md").read_text(encoding="utf-8")  # the report of the sweep just run


def test_readme_reads_in_five_minutes():
    """Issue 42's bound: the README stays at most 400 lines, the rest linked from it."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; move a section to docs/ and link it"
