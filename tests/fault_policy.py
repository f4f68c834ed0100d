"""A test-only policy for the fault tests (``tests/test_faults.py``): always-keep that can be
made slow from the environment, so a test can signal a sweep while a job runs.

Selected with ``policy=always_keep policy._target_=tests.fault_policy.SlowKeep`` (the repository
root on PYTHONPATH). With ``ROUTE_BENCH_TEST_SLOW_S`` set, the first score of each process first
writes ``$ROUTE_BENCH_TEST_MARKERS/started-<pid>`` (the test's cue: a job is running now) and
then sleeps that long; later scores of that process are instant, and without the variable the
policy is plain always-keep, so a rerun finishes at once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from policies.builtin import AlwaysBase

_SLEPT = False


class SlowKeep(AlwaysBase):
    def score(self, X, ctx):
        global _SLEPT
        seconds = float(os.environ.get("ROUTE_BENCH_TEST_SLOW_S") or 0)
        if seconds > 0 and not _SLEPT:
            _SLEPT = True
            markers = os.environ.get("ROUTE_BENCH_TEST_MARKERS")
            if markers:
                Path(markers).mkdir(parents=True, exist_ok=True)
                (Path(markers) / f"started-{os.getpid()}").write_text(str(time.time()))
            time.sleep(seconds)
        return super().score(X, ctx)
