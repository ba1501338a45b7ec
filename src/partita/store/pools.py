"""`SqlPoolLeases`: the slots of shared resource pools, leased in the store with expiry.

Acquiring is one write transaction: leases past their expiry are deleted
(a killed holder's slot comes back), the live ones are counted against the
caller's limit, and the lowest free slot number is inserted. The key
(pool, slot) is what makes this safe on PostgreSQL, where two transactions
may count the same free slot: both insert the same key and the second fails
on it (then counts again). On SQLite the write lock (``BEGIN IMMEDIATE``)
serialises acquirers outright. Times are the writers' wall clocks (POSIX
seconds): hosts sharing a PostgreSQL store must keep their clocks within a
small fraction of the lease length of each other.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from partita.errors import StoreError
from partita.execution.pools import SlotRequest
from partita.store.liveness import current_owner_token
from partita.store.retries import retry_transient
from partita.store.schema import pool_leases, pool_waiters

if TYPE_CHECKING:
    from partita.store.database import Database

__all__ = ["PoolHolder", "PoolWaiter", "SqlPoolLeases"]

_CHUNK = 500
#: Tries when another process took the slot this one counted as free (PostgreSQL).
_SLOT_RACES = 5
_LEASES = pool_leases.name
_WAITERS = pool_waiters.name


@dataclass(frozen=True, slots=True)
class PoolHolder:
    """A live lease: who holds which slot of a pool, since when, until when unless renewed."""

    pool: str
    slot: int
    run_id: str
    host: str
    pid: int
    asset: str
    key_index: int
    partition_key: str | None
    acquired_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class PoolWaiter:
    """A run with ``waiting`` attempts denied a slot of a pool (refreshed by every denied acquire)."""

    pool: str
    run_id: str
    host: str
    pid: int
    asset: str
    waiting: int
    since: float
    expires_at: float


class SqlPoolLeases:
    """The engine's `PoolLeases` over a store's database, and what ``partita pools`` reads."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._failures = database.failures
        sql = database.driver_sql
        self._reclaim_sql = sql(f"DELETE FROM {_LEASES} WHERE pool = ? AND expires_at < ?")
        self._slots_sql = sql(f"SELECT slot FROM {_LEASES} WHERE pool = ? ORDER BY slot")
        self._insert_sql = sql(
            f"INSERT INTO {_LEASES} (pool, slot, lease_id, run_id, host, pid, owner_token, asset, key_index, "
            "partition_key, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self._unwait_sql = sql(f"DELETE FROM {_WAITERS} WHERE pool = ? AND run_id = ?")
        self._wait_sql = sql(
            f"INSERT INTO {_WAITERS} (pool, run_id, host, pid, asset, waiting, since, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pool, run_id) DO UPDATE SET "
            "asset = excluded.asset, waiting = excluded.waiting, expires_at = excluded.expires_at"
        )

    def acquire_slot(self, request: SlotRequest) -> str | None:
        """A new lease id when the pool has a free slot, else None with the run recorded as waiting."""
        for _ in range(_SLOT_RACES):
            try:
                with self._failures(f"acquire a slot of pool {request.pool!r}"):
                    return retry_transient(lambda _: self._try_acquire(request))
            except StoreError as exc:
                if not isinstance(exc.__cause__, IntegrityError):
                    raise
                # Another process inserted the slot this one counted as free: count again.
        return None  # lost every race: the pool is contended; the caller polls again

    def _try_acquire(self, request: SlotRequest) -> str | None:
        now = time.time()
        expires = now + request.lease_seconds
        pool = request.pool
        with self._database.write() as connection:
            connection.exec_driver_sql(self._reclaim_sql, (pool, now))
            taken = [row[0] for row in connection.exec_driver_sql(self._slots_sql, (pool,))]
            if len(taken) >= request.limit:
                connection.exec_driver_sql(
                    self._wait_sql,
                    (pool, request.run_id, self._database.host, os.getpid(), request.asset, request.waiting,
                     now, expires),
                )
                return None
            used = set(taken)
            slot = next(number for number in range(len(taken) + 1) if number not in used)
            lease_id = uuid.uuid4().hex
            connection.exec_driver_sql(
                self._insert_sql,
                (pool, slot, lease_id, request.run_id, self._database.host, os.getpid(), current_owner_token(),
                 request.asset, request.key_index, request.partition_key, now, expires),
            )
            connection.exec_driver_sql(self._unwait_sql, (pool, request.run_id))
        return lease_id

    def renew_leases(self, lease_ids: Sequence[str], run_id: str, lease_seconds: float) -> int:
        """Push back the expiry of these leases and the run's waiting rows; how many leases still existed."""
        expires = time.time() + lease_seconds

        def write(_: int) -> int:
            held = 0
            with self._database.write() as connection:
                for chunk in _chunks(lease_ids):
                    result = connection.exec_driver_sql(
                        self._database.driver_sql(
                            f"UPDATE {_LEASES} SET expires_at = ? WHERE lease_id IN ({', '.join('?' * len(chunk))})"
                        ),
                        (expires, *chunk),
                    )
                    held += result.rowcount
                connection.exec_driver_sql(
                    self._database.driver_sql(f"UPDATE {_WAITERS} SET expires_at = ? WHERE run_id = ?"),
                    (expires, run_id),
                )
            return held

        with self._failures("renew pool leases"):
            return retry_transient(write)

    def release_leases(self, lease_ids: Sequence[str]) -> None:
        def write(_: int) -> None:
            with self._database.write() as connection:
                for chunk in _chunks(lease_ids):
                    connection.exec_driver_sql(
                        self._database.driver_sql(
                            f"DELETE FROM {_LEASES} WHERE lease_id IN ({', '.join('?' * len(chunk))})"
                        ),
                        tuple(chunk),
                    )

        if lease_ids:
            with self._failures("release pool leases"):
                retry_transient(write)

    def withdraw_run(self, run_id: str) -> None:
        def write(_: int) -> None:
            with self._database.write() as connection:
                for table in (_LEASES, _WAITERS):
                    connection.exec_driver_sql(
                        self._database.driver_sql(f"DELETE FROM {table} WHERE run_id = ?"), (run_id,)
                    )

        with self._failures("release the run's pool leases"):
            retry_transient(write)

    # -- reading, for partita pools ---------------------------------------------

    def holders(self, pools: Collection[str] | None = None, now: float | None = None) -> list[PoolHolder]:
        """Live leases (of ``pools``, or of every pool), by pool and slot."""
        rows = self._read(
            "SELECT pool, slot, run_id, host, pid, asset, key_index, partition_key, acquired_at, expires_at "
            f"FROM {_LEASES} WHERE expires_at >= ?",
            now,
        )
        return sorted(
            (PoolHolder(*row) for row in rows if pools is None or row[0] in pools),
            key=lambda holder: (holder.pool, holder.slot),
        )

    def waiters(self, pools: Collection[str] | None = None, now: float | None = None) -> list[PoolWaiter]:
        """Runs waiting for a slot (of ``pools``, or of any pool), by pool and since when."""
        rows = self._read(
            f"SELECT pool, run_id, host, pid, asset, waiting, since, expires_at FROM {_WAITERS} WHERE expires_at >= ?",
            now,
        )
        return sorted(
            (PoolWaiter(*row) for row in rows if pools is None or row[0] in pools),
            key=lambda waiter: (waiter.pool, waiter.since),
        )

    def _read(self, statement: str, now: float | None) -> list[tuple[Any, ...]]:
        with self._failures("read shared pools"), self._database.connect() as connection:
            return self._database.rows(connection, statement, (time.time() if now is None else now,))


def _chunks(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[start : start + _CHUNK] for start in range(0, len(values), _CHUNK)]
