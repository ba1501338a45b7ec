"""Is the process that owns a running run still alive?

A run's row names its owner: host, pid and a token identifying that exact
process (its start time), so a recycled pid is not mistaken for the owner.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["current_owner_token", "owner_is_alive"]


def _start_time(pid: int) -> str:
    """The process start time in clock ticks since boot ("" where /proc is absent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces; fields resume after ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def current_owner_token() -> str:
    return _start_time(os.getpid())


def owner_is_alive(pid: int, token: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    return not token or _start_time(pid) in ("", token)
