"""Is the process of a ``running`` stage run still there? Judged by PID and process start time
(a reused PID is another process), only for runs of this host."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path


def host_name() -> str:
    return socket.gethostname()


def start_time(pid: int) -> str | None:
    """``<boot id>:<start ticks>`` of process ``pid`` (``/proc/PID/stat`` field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ')'
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20:
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{boot}:{fields[19]}"


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (signal 0; EPERM: it exists, not ours)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def gone(pid: int | None, host: str | None, proc_start: str | None) -> bool:
    """True when the recorded process is surely not running any more (module doc)."""
    if pid is None or not host or host != host_name():
        return False
    if not pid_alive(int(pid)):
        return True
    if proc_start is None:
        return False  # recorded without /proc: a live PID is taken as the same process
    now = start_time(int(pid))
    return now is not None and now != proc_start
