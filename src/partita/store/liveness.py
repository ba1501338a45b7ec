"""Is the process that owns a running run still alive?

A run's row names its owner: host, pid and a token identifying that exact
process (its start time), so a recycled pid is not mistaken for the owner.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

__all__ = ["current_host", "current_owner_token", "owner_is_alive"]


@functools.cache
def current_host() -> str:
    """This machine's host name, read once per process (a run's start named it with a system call each)."""
    return socket.gethostname()


def _start_time(pid: int) -> str:
    """The process start time in clock ticks since boot ("" where /proc is absent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces; fields resume after ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


_own_token: tuple[int, str] = (0, "")


def current_owner_token() -> str:
    """This process's token (read once per process: its start time never changes)."""
    global _own_token
    pid = os.getpid()
    if _own_token[0] != pid:  # first call, or a forked child
        _own_token = (pid, _start_time(pid))
    return _own_token[1]


def owner_is_alive(pid: int, token: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    return not token or _start_time(pid) in ("", token)
