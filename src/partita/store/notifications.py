"""Listening for new asset events: PostgreSQL ``LISTEN`` on the channel ``partita_events``.

Schema revision 0005 makes every committed insert into the event log notify
:data:`CHANNEL` (outlet events, ``emit``, ``publish_event``, discovery
events; single rows and ``COPY`` batches alike), with the JSON array of the
inserted assets as payload. An `EventListener` holds one dedicated
connection in autocommit mode that only listens, and tells a waiting caller
when events of the assets it cares about were committed.

Notifications are a shortcut, not the record: a caller still reads the store
and keeps a poll interval as a safety net. A listener whose connection drops
logs a warning, keeps answering ``wait`` with timeouts (so its caller polls)
and reconnects with a growing delay; after reconnecting it reports events
as possibly missed, so the caller reads the store once. SQLite has no
notifications: `listen_for_events` returns ``None`` there.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import time
from collections.abc import Collection
from typing import Any

from partita.store.sql import SqlStore

__all__ = ["CHANNEL", "LISTENER_APPLICATION_NAME", "EventListener", "listen_for_events"]

log = logging.getLogger("partita.store.notifications")

#: The channel every committed insert into ``partita_events`` notifies (PostgreSQL only).
CHANNEL = "partita_events"
#: ``application_name`` of the listening connections, to find them in ``pg_stat_activity``.
LISTENER_APPLICATION_NAME = "partita event listener"

_FIRST_RETRY_SECONDS = 0.5
_MAX_RETRY_SECONDS = 30.0
# libpq's minimum; an unreachable host must not stall the caller's loop for long.
_CONNECT_TIMEOUT_SECONDS = 2


def _assets_of(payload: str) -> frozenset[str] | None:
    """The assets a notification names; ``None`` when it does not say (any asset)."""
    if not payload:
        return None
    try:
        names = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return None
    return frozenset(names)


class EventListener:
    """A dedicated PostgreSQL connection that ``LISTEN``\\ s for committed asset events.

    ``assets`` restricts what `wait` reports to events of those assets
    (``None``: any asset). Use it from one thread; `close` it when done.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        assets: Collection[str] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._assets = None if assets is None else frozenset(assets)
        self._connection: Any = None
        self._retry_delay = _FIRST_RETRY_SECONDS
        self._retry_at = time.monotonic()
        self._closed = False
        self._connect(initial=True)

    @property
    def listening(self) -> bool:
        """Whether the listening connection is up (otherwise callers are polling)."""
        return self._connection is not None

    @property
    def backend_pid(self) -> int | None:
        """The server process of the listening connection, while there is one."""
        return None if self._connection is None else int(self._connection.info.backend_pid)

    # -- waiting -----------------------------------------------------------------------

    def wait(self, timeout: float, *, interrupt: int | None = None) -> bool:
        """Block until events of the watched assets are committed, ``interrupt`` is readable, or ``timeout`` passes.

        True when such events were announced, or may have been missed while
        the connection was down (it has just been re-established). False on
        timeout or interruption; ``interrupt`` (a file descriptor) is not read.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        while not self._closed:
            if self._connection is None:
                if time.monotonic() >= self._retry_at and self._connect():
                    return True  # events committed while nobody listened were not announced
                # Poll until the next connection attempt or the deadline.
                if self._sleep(min(deadline, self._retry_at), interrupt, None):
                    return False
            else:
                ready = self._sleep(deadline, interrupt, self._connection.fileno())
                if interrupt is not None and interrupt in ready:
                    return False
                if ready and self._received_relevant():
                    return True
            if time.monotonic() >= deadline:
                return False
        return False

    def _sleep(self, until: float, interrupt: int | None, connection: int | None) -> list[int]:
        """The descriptors that became readable before ``until`` (empty: the time is up)."""
        descriptors = [fd for fd in (interrupt, connection) if fd is not None]
        remaining = max(0.0, until - time.monotonic())
        if not descriptors:
            time.sleep(remaining)
            return []
        readable, _, _ = select.select(descriptors, [], [], remaining)
        return readable

    def _received_relevant(self) -> bool:
        """Read what the server sent; True if it announced events of the watched assets."""
        import psycopg
        from psycopg import pq

        connection = self._connection
        relevant = False
        try:
            pgconn = connection.pgconn
            pgconn.consume_input()
            if pgconn.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the connection was closed")
            while (notify := pgconn.notifies()) is not None:
                assets = _assets_of(bytes(notify.extra).decode("utf-8", "replace"))
                if assets is None or self._assets is None or not assets.isdisjoint(self._assets):
                    relevant = True
        except psycopg.Error as exc:
            self._lost(exc)
        return relevant

    # -- connecting ----------------------------------------------------------------------

    def _connect(self, *, initial: bool = False) -> bool:
        import psycopg

        try:
            connection = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                application_name=LISTENER_APPLICATION_NAME,
                client_encoding="utf8",
                # A server that vanished without closing the connection is noticed within about a minute.
                keepalives=1,
                keepalives_idle=30,
                keepalives_interval=10,
                keepalives_count=3,
            )
        except psycopg.Error as exc:
            if initial:
                log.warning("cannot listen for event notifications (%s); polling until it can", _first_line(exc))
            else:
                log.debug("reconnecting to listen failed (%s); next attempt in %.1f s", _first_line(exc), self._retry_delay)
            self._retry_later()
            return False
        try:
            connection.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            with contextlib.suppress(Exception):
                connection.close()
            log.warning("cannot listen for event notifications (%s); polling until it can", _first_line(exc))
            self._retry_later()
            return False
        self._connection = connection
        self._retry_delay = _FIRST_RETRY_SECONDS
        if not initial:
            log.info("listening for event notifications again")
        return True

    def _retry_later(self) -> None:
        """Back off: a server that is down is not asked again at every wait."""
        self._retry_at = time.monotonic() + self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, _MAX_RETRY_SECONDS)

    def _lost(self, exc: BaseException) -> None:
        log.warning(
            "lost the connection listening for event notifications (%s); polling until it is re-established",
            _first_line(exc),
        )
        with contextlib.suppress(Exception):
            self._connection.close()
        self._connection = None
        self._retry_at = time.monotonic()  # a terminated session usually comes back at once

    def close(self) -> None:
        """Stop listening and close the connection; idempotent."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def __enter__(self) -> EventListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def listen_for_events(store: SqlStore, *, assets: Collection[str] | None = None) -> EventListener | None:
    """A listener for the events committed to ``store``; ``None`` on SQLite, where callers poll."""
    if store.dialect != "postgresql":
        return None
    return EventListener(store.database.psycopg_conninfo, assets=assets)
