"""The order test files start in: heaviest first, so that parallel workers end together.

Why: ``make test`` runs the files on pytest-xdist workers (``--dist loadfile``: a file's tests,
and so its module-scoped fixtures, stay on one worker), and a worker takes the next file in
collection order when it is almost free (``--no-loadscope-reorder``: otherwise xdist orders the
files by their number of tests). A file of several minutes taken last would run alone at the
end; taken first, the short files fill the other worker meanwhile (longest processing time
first). tests/durations.json holds each file's seconds as measured in one whole run; a file
it does not name (a new one) is taken after the known ones, in its usual order. The order
changes no test's outcome: every test sets up what it needs.

Refresh the file from a run's ``--durations=0`` output::

    .venv/bin/python -m pytest -n 2 --dist loadfile --durations=0 -q > /tmp/durations.log
    .venv/bin/python -m tests.helpers.order /tmp/durations.log
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(tests/[^:]+\.py)::")


def file_seconds(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per test file (``tests/test_x.py``) of the last measured run; {} without one."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text(encoding="utf-8"))["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def heaviest_first(items: list, seconds: dict[str, float]) -> list:
    """``items`` (pytest items) with whole files ordered by their measured seconds, heaviest
    first; ties and unknown files keep the collection order, and a file's own tests keep theirs."""
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(_file_of(item), len(first_seen))
    return sorted(items, key=lambda item: (-seconds.get(_file_of(item), 0.0), first_seen[_file_of(item)]))


def _file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def parse_durations(text: str) -> dict[str, float]:
    """Seconds per file, summed over every setup, call and teardown line of ``--durations=0``."""
    seconds: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m:
            seconds[m.group(2)] += float(m.group(1))
    return {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.helpers.order DURATIONS_LOG", file=sys.stderr)
        return 2
    seconds = parse_durations(Path(argv[0]).read_text(encoding="utf-8"))
    if not seconds:
        print(f"error: {argv[0]}: no '--durations=0' lines found", file=sys.stderr)
        return 2
    DURATIONS.write_text(json.dumps({"about": "seconds per test file in one whole run (tests/helpers/order.py)",
                                     "seconds": seconds}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {DURATIONS.name}: {len(seconds)} files, {sum(seconds.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
