"""Faults of issue 26 (every input bounded and named) beside the fault suite of
``tests/test_faults.py``: SIGTERM during a real base-table build. The build keeps its finished
shards (each written whole, with its digest), leaves no table, says so in one error line with
exit 143, and the rerun reuses the shards and equals a build that was never interrupted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.test_faults import _env, _table_folder, big_qasper, run  # noqa: F401 - big_qasper is a fixture


@pytest.mark.slow
def test_sigterm_during_a_table_build_keeps_the_shards_and_resumes(tmp_path, big_qasper):  # noqa: F811
    import pandas as pd

    args, reference = big_qasper
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=_env(tmp_path / "cache"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not list((tmp_path / "cache").glob("tables/*/shards/shard-00000.parquet")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no shard written in time"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    folder = _table_folder(tmp_path / "cache")
    assert proc.returncode == 143, out[-2000:] + err[-2000:]
    lines = err.strip().splitlines()
    # the last line (the model loader's progress bar may precede it), and no traceback
    assert lines[-1].startswith("error: Interrupted: SIGTERM") and "Traceback" not in err, err
    assert sum(line.startswith("error: ") for line in lines) == 1, err
    assert not (folder / "table.parquet").exists(), "a terminated build must not leave a finished table"
    assert not list(folder.rglob("*.tmp")), "no half-written file"
    written = len(list((folder / "shards").glob("shard-*.parquet")))
    assert 1 <= written < 48
    rerun = run(args, tmp_path)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    info = json.loads((folder / "info.json").read_text())
    assert info["counts"]["shards_reused"] >= written - 1 and info["counts"]["shards_computed"] >= 1
    assert info["counts"]["shards_reused"] + info["counts"]["shards_computed"] == 48
    a = pd.read_parquet(folder / "table.parquet")
    cols = [c for c in a.columns if "_ms" not in c]
    assert list(a.columns) == list(reference.columns)
    pd.testing.assert_frame_equal(a[cols], reference[cols])
