"""Which process runs a run: host, pid and the process's start time (``process_identity``), and
whether that process is still alive (``process_alive``), so a RUNNING run whose process is gone
is told apart from a live one (a reused pid included). Runs of another host are never declared
stale (their process cannot be checked from here)."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path
from typing import Mapping

from harness.store_schema import TAG_HOST, TAG_PID, TAG_PROC_START


@functools.lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "noboot"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of ``pid`` from ``/proc``; None without it."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = data[data.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    if len(rest) < 20:
        return None
    return rest[0], rest[19]  # field 3 (state) and field 22 (starttime)


def process_identity(pid: int | None = None) -> dict[str, str]:
    """Tags naming a process: host, pid and its start time (so a reused pid is told apart)."""
    pid = os.getpid() if pid is None else int(pid)
    stat = _proc_stat(pid)
    start = f"{stat[1]}@{_boot_id()}" if stat else ""
    return {TAG_HOST: socket.gethostname(), TAG_PID: str(pid), TAG_PROC_START: start}


def process_alive(tags: Mapping[str, str]) -> bool | None:
    """Is the process a run's tags name still running? None when it cannot be told (no tags,
    another host): such a run is never declared stale."""
    host, pid = tags.get(TAG_HOST), str(tags.get(TAG_PID, ""))
    if not host or not pid.isdigit():
        return None
    if host != socket.gethostname():
        return None
    pid_n = int(pid)
    if pid_n == os.getpid():
        return True
    try:
        os.kill(pid_n, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    stat = _proc_stat(pid_n)
    if stat is None:
        return True  # no /proc: the pid exists, trust it
    state, start = stat
    if state in ("Z", "X"):  # exited, not yet reaped
        return False
    recorded = tags.get(TAG_PROC_START)
    if recorded and recorded != f"{start}@{_boot_id()}":
        return False  # the pid was reused by another process
    return True
