"""Keep process forks out of SQLite write transactions.

SQLite keeps the locks of all of a process's connections to one file in
memory it shares between them. A process forked while another thread holds a
write transaction inherits that bookkeeping without the lock itself: every
connection the child opens to that file then waits for a lock nobody will
release, and its writes fail with "database is locked" after the busy
timeout. The process executor forks worker processes that emit into the
store, so each SQLite write transaction holds this gate; opening or closing
a connection and a background checkpoint (`checkpointer`) hold a second
one; a fork waits until neither is held (`os.register_at_fork`). Writers to the same file are
serialized by SQLite anyway; the gate costs one uncontended lock per write.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["SQLITE_CALL_GATE", "SQLITE_WRITE_GATE", "sqlite_write"]

#: The gate itself, for hot paths that hold it with a plain ``with`` (no generator frame).
SQLITE_WRITE_GATE = _gate = threading.RLock()
#: Held around SQLite calls outside write transactions that a fork must not interrupt: opening or
#: closing a connection, a background checkpoint (`checkpointer`). SQLite takes process-wide locks
#: there too, and a child forked meanwhile hangs in its first ``sqlite3.connect``. A lock of its
#: own, so that writers never wait for them.
SQLITE_CALL_GATE = threading.RLock()


@contextlib.contextmanager
def sqlite_write() -> Iterator[None]:
    """Hold around one SQLite write transaction: a fork waits until it ends."""
    with _gate:
        yield


def _before_fork() -> None:
    _gate.acquire()
    SQLITE_CALL_GATE.acquire()


def _after_fork() -> None:
    SQLITE_CALL_GATE.release()
    _gate.release()


if hasattr(os, "register_at_fork"):
    # The forking thread holds both gates across fork(); both sides let them go.
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)
