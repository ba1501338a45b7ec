"""`WalCheckpointer`: copies a SQLite file's write-ahead log into the database on a thread of its own.

In WAL mode SQLite copies the log back into the database file (a
checkpoint) once it holds 1,000 pages, in whichever thread committed last:
that thread then pays for the copy and two file syncs. For small
transactions that is a fifth of each commit's cost (an emission writes about
six pages, so one in about 170 pays for a checkpoint of 1,000 pages).

Here a background thread checkpoints instead, at most every
`CHECKPOINT_INTERVAL` seconds while this process commits. SQLite releases
the interpreter's lock while it copies, so the copy runs beside the writers
on another core.

The log file starts again from its beginning only when a writer finds it
wholly copied, and commits that land during a background copy keep it from
ever being so. The writers' own checkpoint, at `WRITER_CHECKPOINT_PAGES`,
restarts it: that checkpoint runs in the committing thread, under the write
gate, so no commit of this process lands during it, and it has only the
frames the thread has not copied yet to copy. Connections cut the file back
to `LOG_FILE_LIMIT` bytes when the log restarts, so one large transaction
does not leave a large file behind.

A restart is delayed, and the log grows past that size meanwhile, while a
reader holds an old snapshot, while another process (a worker of the
process executor) commits between a writer's checkpoint and its next
commit, and while a background copy is under way: the writer's checkpoint
then gives up until the next commit. The last grows with the time the
disk takes to sync, since the background copy holds SQLite's checkpoint
lock through two syncs.

A checkpoint of the ``PASSIVE`` kind never blocks writers or readers, and
a crash during one loses nothing: the log stays the record until it is
copied. Durability is unchanged: a commit is in the log before it returns,
as before.

The thread starts on the first commit, exits after `IDLE_SECONDS` without
one, and holds the fork gate's checkpoint lock around every SQLite call it
makes (opening and closing its connection too), so a forked child never
inherits a lock it took (see `fork_gate`).

Only on a SQLite without the WAL-reset bug (`WAL_RESET_FIXED`). Before
3.51.3, a checkpoint that starts just after another has finished can miss
that a third connection's commit restarted the log meanwhile; a later
checkpoint then skips part of a transaction, and the database file loses
pages that its indexes still point to. The background thread, checkpointing
every few milliseconds beside the writers of its own process and of others,
makes that race frequent: two processes writing one store (a producer and
the trigger daemon) corrupted it in about one benchmark run in two hundred.
With such a SQLite the writers' own checkpoint, inside their commit and
under the write gate, is the only one this process runs, and partita's
processes take turns on a lock file for their writes (`host_lock`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable

from partita.store.fork_gate import SQLITE_CALL_GATE, forget_in_child

__all__ = [
    "CHECKPOINT_INTERVAL", "IDLE_SECONDS", "LOG_FILE_LIMIT", "WAL_RESET_FIXED", "WRITER_CHECKPOINT_PAGES", "WalCheckpointer",
    "background_checkpoints", "wal_reset_caution", "wal_reset_fixed",
]  # fmt: skip

#: Seconds between two checkpoints while commits go on: the log grows by at most this much writing.
CHECKPOINT_INTERVAL = 0.005
#: The writers' own checkpoint threshold (SQLite's ``wal_autocheckpoint``, in pages; its default is 1,000),
#: where the log restarts. Each restart stalls the writers for the rest of the copy and three file syncs
#: (2 to 6 ms on this project's machines, more on a slow disk): a writer of one-page commits as fast as it
#: can loses up to a tenth against 4,000 pages; an emitter measured about 4% less, within the noise.
WRITER_CHECKPOINT_PAGES = 2000
#: Bytes a log file is cut back to when it restarts (SQLite's ``journal_size_limit``): twice what the
#: log reaches at `WRITER_CHECKPOINT_PAGES` with 4 KiB pages, so an ordinary restart truncates nothing.
LOG_FILE_LIMIT = 16 * 1024 * 1024
#: Seconds without a commit after which the thread exits (the next commit starts it again).
IDLE_SECONDS = 1.0


def wal_reset_fixed(version: tuple[int, int, int]) -> bool:
    """Whether a SQLite ``version`` has the WAL-reset bug's fix (3.51.3, and the 3.44.6 and 3.50.7 patches)."""
    return version >= (3, 51, 3) or (3, 50, 7) <= version < (3, 51, 0) or (3, 44, 6) <= version < (3, 45, 0)


#: Whether this process's SQLite may checkpoint in the background (see the module's docstring).
WAL_RESET_FIXED = wal_reset_fixed(sqlite3.sqlite_version_info)


def background_checkpoints() -> bool:
    """Whether stores opened now checkpoint on a thread of their own (`WAL_RESET_FIXED`, read at each call)."""
    return WAL_RESET_FIXED


def wal_reset_caution(dialect: str) -> str | None:
    """What a long-lived writer of a store (the trigger daemon) tells its operator on a SQLite with the bug."""
    if dialect != "sqlite" or WAL_RESET_FIXED:
        return None
    return (
        f"SQLite {sqlite3.sqlite_version} predates the fix of its WAL-reset bug (3.51.3): partita's processes take "
        "turns writing this store (a lock file beside it) and checkpoint only as they commit, which is slower, and "
        "another program writing it at the same time can still corrupt it. Use a Python built with SQLite 3.51.3 "
        "or later, or PostgreSQL"
    )


class WalCheckpointer:
    """Checkpoints one SQLite file, in the background, after this process's commits.

    `committed` is on every write's path: once a checkpoint is due it is an
    attribute test.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._wake = threading.Event()  # set by a commit while the thread waits for one
        self._stop = threading.Event()  # set by close
        self._due = False  # a commit happened since the last checkpoint began
        self._thread: threading.Thread | None = None
        #: Checkpoints run, for tests and benchmarks.
        self.checkpoints = 0
        forget_in_child(self)

    def committed(self) -> None:
        """A transaction of this process committed: checkpoint soon."""
        if self._due:
            return
        with self._lock:
            if self._due or self._stop.is_set():
                return
            self._due = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="partita-wal-checkpoint", daemon=True)
                self._thread.start()
            else:
                self._wake.set()

    def _serve(self) -> None:
        connection: list[sqlite3.Connection] = []  # opened on the first checkpoint, closed when the thread ends
        try:
            while True:
                self._stop.wait(CHECKPOINT_INTERVAL)  # commits gather: one checkpoint per interval at most
                with self._lock:
                    if self._stop.is_set():
                        self._thread = None
                        return
                    self._due = False  # a commit from now on asks for the next checkpoint
                self._checkpoint(connection)
                self._wake.wait(IDLE_SECONDS)
                with self._lock:
                    self._wake.clear()
                    if not self._due or self._stop.is_set():
                        self._thread = None  # idle (or closing): the next commit starts a new thread
                        return
        except BaseException:
            with self._lock:
                self._thread, self._due = None, False
            raise
        finally:
            for opened in connection:
                with SQLITE_CALL_GATE, contextlib.suppress(sqlite3.Error):
                    opened.close()

    def _checkpoint(self, connection: list[sqlite3.Connection]) -> None:
        """One checkpoint; the gate covers opening the connection too.

        Opening and closing a SQLite connection take SQLite's own process-wide
        locks: a child forked meanwhile would inherit them held and hang in
        its first ``sqlite3.connect``. This thread runs at moments nobody
        chose, so every SQLite call it makes holds the gate.
        """
        try:
            with SQLITE_CALL_GATE:
                if not connection:
                    connection.append(self._connect())
                connection[0].execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error:
            pass  # busy, or the file is gone: the writers' own checkpoint copies the log instead

    def close(self) -> None:
        """Stop the thread (after the checkpoint it may be running) and start no other."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _forget_after_fork(self) -> None:
        """In a forked child: the parent's thread did not come along; the next commit starts one."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = None
        self._due = False
