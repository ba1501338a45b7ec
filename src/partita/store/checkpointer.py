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
wholly copied, and commits that land during a copy keep it from ever being
so: the log would grow to the writers' own threshold every time. Once it
holds `RESTART_PAGES`, the thread copies what the last copy missed while it
holds this process's write gate (a few milliseconds: one interval's
frames and two file syncs), and the next commit restarts the log. Writers
keep a built-in checkpoint at `BACKSTOP_PAGES` as the safety net: a log the
thread cannot keep up with (or a process that never starts it) stays
bounded. Connections cut the file back to `LOG_FILE_LIMIT` bytes when the
log restarts, so one large transaction does not leave a large file behind.

A checkpoint of the ``PASSIVE`` kind never blocks writers or readers (the
gated one blocks this process's writers only), and a crash during one
loses nothing: the log stays the record until it is copied. Durability is
unchanged: a commit is in the log before it returns, as before.

The thread starts on the first commit, exits after `IDLE_SECONDS` without
one, and holds the fork gate's checkpoint lock around every SQLite call it
makes (opening and closing its connection too), so a forked child never
inherits a lock it took (see `fork_gate`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable

from partita.store.fork_gate import SQLITE_CALL_GATE, SQLITE_WRITE_GATE, forget_in_child

__all__ = [
    "BACKSTOP_PAGES", "CHECKPOINT_INTERVAL", "IDLE_SECONDS", "LOG_FILE_LIMIT", "RESTART_PAGES", "WalCheckpointer",
]  # fmt: skip

#: Seconds between two checkpoints while commits go on: the log grows by at most this much writing.
CHECKPOINT_INTERVAL = 0.005
#: The writers' own checkpoint threshold (SQLite's ``wal_autocheckpoint``, in pages; its default is 1,000).
BACKSTOP_PAGES = 4000
#: Log pages from which a checkpoint holds this process's writers off to finish the copy, so the log restarts.
#: Each gated copy stalls the writers about 2 ms: at 1,000 pages one busy emitter lost about a tenth.
RESTART_PAGES = 2000
#: Bytes a log file is cut back to when it restarts (SQLite's ``journal_size_limit``).
LOG_FILE_LIMIT = BACKSTOP_PAGES * 4096
#: Seconds the thread waits for the write gate before leaving the restart to the next checkpoint.
GATE_WAIT = 0.05
#: Seconds without a commit after which the thread exits (the next commit starts it again).
IDLE_SECONDS = 1.0


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
        """One checkpoint, and a gated second one when the log did not restart.

        The gate covers opening the connection too: opening and closing a
        SQLite connection take SQLite's own process-wide locks, and a child
        forked meanwhile would inherit them held and hang in its first
        ``sqlite3.connect``. This thread runs at moments nobody chose, so
        every SQLite call it makes holds the gate.
        """
        try:
            with SQLITE_CALL_GATE:
                if not connection:
                    connection.append(self._connect())
                _, log_pages, _ = connection[0].execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if log_pages >= RESTART_PAGES:
                self._copy_the_rest(connection[0])
            self.checkpoints += 1
        except sqlite3.Error:
            pass  # busy, or the file is gone: the writers' own backstop still bounds the log

    @staticmethod
    def _copy_the_rest(connection: sqlite3.Connection) -> None:
        """Copy the frames committed during the last checkpoint, with no writer of this process committing more.

        A short wait for the gate: a long write transaction (or a caller
        that holds the gate while it closes the store) leaves the restart
        to the next checkpoint instead of stalling this thread.
        """
        if not SQLITE_WRITE_GATE.acquire(timeout=GATE_WAIT):
            return
        try:
            with SQLITE_CALL_GATE:
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            SQLITE_WRITE_GATE.release()

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
