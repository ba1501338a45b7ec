"""Which store errors are transient, and the one bounded retry loop for them.

A run's start, its attempt rows and its end are small transactions; losing
one to a moment of contention (SQLite's write lock held past the busy
timeout) or to a dropped PostgreSQL connection would leave a finished run
looking interrupted. Such errors are retried a few times with a short
backoff. Everything else — a constraint, a corrupt file, a read-only store —
fails at once. The callers make their writes idempotent, so a retry after a
commit whose acknowledgement was lost writes no row twice.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

__all__ = ["ATTEMPTS", "BACKOFF_SECONDS", "is_transient", "pause", "retry_transient"]

T = TypeVar("T")

#: Tries in all, the first included.
ATTEMPTS = 4
#: Pause before each retry; doubled each time (0.05, 0.1, 0.2 seconds).
BACKOFF_SECONDS = 0.05
#: How a retry waits (a module attribute so a test can observe the pause).
pause = time.sleep

_SQLITE_TRANSIENT = ("database is locked", "database table is locked", "database is busy")


def _driver_error(exc: BaseException) -> BaseException:
    """The DBAPI error behind a SQLAlchemy wrapper (or the error itself)."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return exc.orig
    return exc


def is_transient(exc: BaseException) -> bool:
    """A contention or connection error that the same write can get past moments later.

    SQLite: "database is locked"/busy. PostgreSQL (psycopg): a lost or
    refused connection and serialization or deadlock aborts — all
    `psycopg.OperationalError`. A connection SQLAlchemy invalidated counts too.
    """
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    original = _driver_error(exc)
    if isinstance(original, sqlite3.OperationalError):
        text = str(original).lower()
        return any(marker in text for marker in _SQLITE_TRANSIENT)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installations
        return False
    return isinstance(original, psycopg.OperationalError)


def retry_transient(operation: Callable[[int], T], *, transient: Callable[[BaseException], bool] = is_transient) -> T:
    """``operation(try_number)`` until it succeeds, at most `ATTEMPTS` times.

    ``try_number`` is 0 on the first call: a later call knows an earlier one
    may have committed before its acknowledgement was lost. A non-transient
    error, or the last transient one, propagates unchanged.
    """
    delay = BACKOFF_SECONDS
    for number in range(ATTEMPTS):
        try:
            return operation(number)
        except Exception as exc:
            if number == ATTEMPTS - 1 or not transient(exc):
                raise
        pause(delay)
        delay *= 2
    raise AssertionError("unreachable")
