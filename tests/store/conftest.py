"""Helpers for the store's fork tests, and a SQLite store in a temporary folder (``sqlite_store``)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from partita.store import open_store
from partita.store.sql import SqlStore


def hung_children(forks: int, child: Callable[[], None], seconds: float = 10.0) -> int:
    """Fork ``forks`` children one after another, each running ``child`` then exiting; how many never ended.

    A child still running after ``seconds`` counts as hung and is killed.
    """
    hung = 0
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            try:
                child()
            finally:
                os._exit(0)
        deadline, ended = time.monotonic() + seconds, False
        while not ended and time.monotonic() < deadline:
            ended = os.waitpid(pid, os.WNOHANG) != (0, 0)
            time.sleep(0.002)
        if not ended:
            hung += 1
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return hung


@contextlib.contextmanager
def running_constantly(work: Callable[[], None], threads: int = 1) -> Iterator[None]:
    """``threads`` threads calling ``work`` over and over until the block ends (then joined)."""
    stop = threading.Event()

    def repeat() -> None:
        while not stop.is_set():
            work()

    started = [threading.Thread(target=repeat) for _ in range(threads)]
    for thread in started:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in started:
            thread.join(30)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlStore]:
    """A SQLite store in a new file, for tests of SQLite's own statements (``store`` is one per backend)."""
    opened = open_store(f"sqlite:///{tmp_path}/partita.db")
    try:
        yield opened
    finally:
        opened.close()
