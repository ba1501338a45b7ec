"""`HostWriteLock`: one partita writer at a time on a SQLite file, across the processes of a host.

SQLite before 3.51.3 has the WAL-reset bug (`checkpointer`): a checkpoint
racing a commit that restarts the log can later lose pages of a committed
transaction. Within one process the write gate already keeps them apart (a
writer's own checkpoint runs inside its commit, under the gate), but a
trigger daemon, a producer run and a process executor's workers write one
store from several processes. On such a SQLite every partita write
transaction, its checkpoint included, also holds an exclusive ``flock`` on
``<database>.lock``: no other partita process can restart the log while one
checkpoints. Writers were serialized by SQLite's write lock anyway; they now
wait for the file lock first.

Held only under the write gate, which serializes this process's writers:
the depth and the descriptor need no lock of their own. A forked child opens
its own descriptor (a ``flock`` belongs to the open file, which the child
shares until then); a fork waits for the gate, so none happens while held.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time

__all__ = ["HostWriteLock", "lock_file_of"]

#: Sleeps between tries while another process holds the lock: short first (a write takes well under a
#: millisecond), then at most 5 ms, as SQLite's own busy handler waits for its write lock.
_FIRST_SLEEP, _LONGEST_SLEEP = 0.0001, 0.005


def lock_file_of(database_file: str) -> str:
    """The lock file beside a SQLite database file."""
    return f"{database_file}.lock"


class HostWriteLock:
    """An exclusive ``flock`` on a database's lock file, re-entrant within the holding thread (the gate's).

    A writer waits for it at most ``timeout`` seconds (the store's busy
    timeout), then fails as SQLite does when its write lock stays taken:
    ``sqlite3.OperationalError("database is locked")``, which the store's
    callers already retry or report.
    """

    __slots__ = ("_path", "_timeout", "_descriptor", "_pid", "_depth")

    def __init__(self, database_file: str, timeout: float) -> None:
        self._path = lock_file_of(database_file)
        self._timeout = timeout
        self._descriptor = -1
        self._pid = 0
        self._depth = 0

    def __enter__(self) -> None:
        if self._pid != os.getpid():  # first use, or a forked child: the parent's open file is not its lock
            self._open()
        if self._depth == 0:
            self._acquire(self._descriptor)
        self._depth += 1

    def _acquire(self, descriptor: int) -> None:
        deadline, sleep = time.monotonic() + self._timeout, _FIRST_SLEEP
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise sqlite3.OperationalError("database is locked") from None
            time.sleep(sleep)
            sleep = min(sleep * 2, _LONGEST_SLEEP)

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def _open(self) -> None:
        self._descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._pid, self._depth = os.getpid(), 0

    def close(self) -> None:
        """Close the descriptor (the store is closing); a later write opens it again.

        Not while held (a store closed inside its own write): closing would let
        the lock go under the writer, whose exit then has nothing to release.
        """
        if self._depth:
            return
        if self._descriptor >= 0 and self._pid == os.getpid():
            os.close(self._descriptor)
        self._descriptor, self._pid = -1, 0
