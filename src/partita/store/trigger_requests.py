"""Consumer run requests in the store: claims, follow-ups of interrupted runs, failed starts, launches.

A request is unique per (flow, key, generation). Claiming it is a
conditional update only one daemon wins; the run id of each try is fixed at
claim time and recorded with how the run was launched, so a run starts once.
A start the store refused gives the claim back with a backoff; a run cut
short by a crash gets a follow-up try, claimed the same way.

Several pending requests may be claimed under one run id (a batch: one run
serving many consumer keys). Every verb on a claim therefore acts on all the
requests claimed under its run id, so a batch is taken over, followed up,
given back, finished or abandoned whole; a single request is a batch of one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from partita.store.schema import (
    FINISH_RUN_REQUESTS,
    RECORD_TRIGGER_LAUNCH,
    TRIGGER_REQUEST_FINISHED,
    trigger_requests,
    trigger_runs,
)
from partita.store.sql import SqlStore

__all__ = ["TriggerLaunch", "TriggerRequest", "TriggerRequests"]

#: Requests claimed per statement (a batch may be larger; its statements share one transaction).
_CLAIM_CHUNK = 500
#: What finishing a request sets (its finish time is the statement's first parameter).


@dataclass(frozen=True, slots=True)
class TriggerRequest:
    id: int
    flow: str
    partition_key: str
    generation: int
    status: str
    event_ids: tuple[int, ...]
    run_id: str | None
    created_at: float
    claimed_at: float | None
    #: Runs started for the request so far (a follow-up of an interrupted run is one more).
    tries: int = 0
    #: Starts that failed in a row; the next is not tried before ``not_before``.
    start_failures: int = 0
    not_before: float | None = None
    last_error: str | None = None
    #: Set (in memory, never stored) on a claim whose run was interrupted: a follow-up run is due.
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class TriggerLaunch:
    """A consumer run's launch: its flow and request, which try it is, and the interrupted run it follows."""

    flow: str
    request_id: int
    attempt: int
    follows_run_id: str | None


#: Every requests column by name, in table order (`_request` reads them by position).
_COLUMNS = ", ".join(column.name for column in trigger_requests.columns)


def _request(row: Any) -> TriggerRequest:
    """The request a row of every column (`_COLUMNS` order) holds: a SQLAlchemy row or a driver's tuple."""
    (
        id_, flow, partition_key, generation, status, event_ids, run_id, created_at, claimed_at, _,
        tries, start_failures, not_before, last_error,
    ) = row  # fmt: skip
    return TriggerRequest(
        id=int(id_),
        flow=flow,
        partition_key=partition_key,
        generation=generation,
        status=status,
        event_ids=tuple(json.loads(event_ids)),
        run_id=run_id,
        created_at=created_at,
        claimed_at=claimed_at,
        tries=int(tries),
        start_failures=int(start_failures),
        not_before=not_before,
        last_error=last_error,
    )


class TriggerRequests:
    """Request verbs on top of a `SqlStore`'s database."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        # The same database as the store's, other tables.
        self._database = store.database
        self._failures = store.database.failures
        self._run_history = store.run_history

    def requests(
        self,
        flow: str,
        statuses: Sequence[str] = ("pending",),
        limit: int | None = None,
        *,
        due_at: float | None = None,
    ) -> list[TriggerRequest]:
        """Requests in creation order; ``limit`` keeps a pass from reading a long backlog whole.

        With ``due_at``, requests whose failed start backs off past that time are left out.
        """
        query = (
            f"SELECT {_COLUMNS} FROM {trigger_requests.name} "
            f"WHERE flow = ? AND status IN ({', '.join('?' * len(statuses))})"
        )
        params: tuple[Any, ...] = (flow, *statuses)
        if due_at is not None:
            query += " AND (not_before IS NULL OR not_before <= ?)"
            params += (due_at,)
        query += " ORDER BY id"
        if limit is not None:
            query += " LIMIT ?"
            params += (limit,)
        with self._failures("read trigger requests"):
            return [_request(row) for row in self._database.read(self._database.driver_sql(query), params)]

    def claim(self, request: TriggerRequest, run_id: str, now: float) -> bool:
        """Take a pending request (or a stale claim) for this daemon; only one claimant wins.

        A first claim fixes the run id of the request's next try and records
        how that run is launched; a takeover of a stale claim keeps both (for
        every request claimed under that run id), so the same run can never
        start twice.
        """
        if request.status == "pending":
            return bool(self.claim_pending([request], run_id, now))
        statement = (
            f"UPDATE {trigger_requests.name} SET claimed_at = ? "
            "WHERE flow = ? AND status = 'claimed' AND run_id = ? AND claimed_at = ?"
        )
        params = (now, request.flow, request.run_id, request.claimed_at)
        return self._updated("claim a trigger request", statement, params)

    def claim_pending(self, requests: Sequence[TriggerRequest], run_id: str, now: float) -> dict[int, tuple[int, ...]]:
        """Claim those of ``requests`` still pending under one run id, in one transaction; id -> event ids of each won.

        Another daemon may win some of them meanwhile: the run serves the
        requests this returns, and none when it returns nothing. Each comes
        with the events it holds as claimed, which may be more than when it
        was read.
        """
        if not requests:
            return {}
        won: dict[int, tuple[int, ...]] = {}
        with self._failures("claim trigger requests"), self._database.driver_write() as connection:
            for start in range(0, len(requests), _CLAIM_CHUNK):  # bound the statement's parameters
                chunk = requests[start : start + _CLAIM_CHUNK]
                statement = (
                    f"UPDATE {trigger_requests.name} SET status = 'claimed', claimed_at = ?, run_id = ?, "
                    f"tries = tries + 1 WHERE id IN ({', '.join('?' * len(chunk))}) AND status = 'pending' "
                    "RETURNING id, event_ids"
                )
                params = (now, run_id, *(request.id for request in chunk))
                result = connection.exec_driver_sql(self._database.driver_sql(statement), params)
                won.update((int(row[0]), tuple(json.loads(row[1]))) for row in result)
            if won:
                first = next(request for request in requests if request.id == min(won))
                self._launched(connection, first, run_id, first.tries + 1, None, now)
        return won

    def claimed_under(self, flow: str, run_id: str) -> list[TriggerRequest]:
        """The requests of ``flow`` claimed under ``run_id`` (a batch, or one request), in creation order."""
        query = (
            f"SELECT {_COLUMNS} FROM {trigger_requests.name} "
            "WHERE flow = ? AND status = 'claimed' AND run_id = ? ORDER BY id"
        )
        params = (flow, run_id)
        with self._failures("read claimed trigger requests"):
            return [_request(row) for row in self._database.read(self._database.driver_sql(query), params)]

    def follow_up(self, request: TriggerRequest, run_id: str, now: float) -> bool:
        """Claim the next try of a request whose run was interrupted; only one claimant wins."""
        statement = (
            f"UPDATE {trigger_requests.name} SET run_id = ?, claimed_at = ?, tries = tries + 1 "
            "WHERE flow = ? AND status = 'claimed' AND run_id = ?"
        )
        with self._failures("claim a follow-up run"), self._database.driver_write() as connection:
            won = connection.exec_driver_sql(
                self._database.driver_sql(statement), (run_id, now, request.flow, request.run_id)
            ).rowcount > 0
            if won:
                self._launched(connection, request, run_id, request.tries + 1, request.run_id, now)
            return bool(won)

    def _launched(
        self, connection: Any, request: TriggerRequest, run_id: str, attempt: int, follows: str | None, now: float
    ) -> None:
        connection.exec_driver_sql(
            self._database.driver_sql(RECORD_TRIGGER_LAUNCH), (run_id, request.id, request.flow, attempt, follows, now)
        )

    def release(self, request: TriggerRequest, error: str, not_before: float) -> bool:
        """Give back a claim whose run could not start: pending again, retried from ``not_before``.

        Only the claimant's own claim is given back (a takeover changed
        ``claimed_at``); the next claim picks a new run id, so a start whose
        commit lands late can never be mistaken for the retry.
        """
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'pending', run_id = NULL, claimed_at = NULL, "
            "tries = tries - 1, start_failures = start_failures + 1, not_before = ?, last_error = ? "
            "WHERE flow = ? AND status = 'claimed' AND run_id = ? AND claimed_at = ?"
        )
        params = (not_before, error, request.flow, request.run_id, request.claimed_at)
        with self._failures("release a trigger request"), self._database.driver_write() as connection:
            released = connection.exec_driver_sql(self._database.driver_sql(statement), params).rowcount > 0
            if released:
                connection.exec_driver_sql(
                    self._database.driver_sql(f"DELETE FROM {trigger_runs.name} WHERE run_id = ?"), (request.run_id,)
                )
            return bool(released)

    def defer(self, request: TriggerRequest, error: str, not_before: float) -> bool:
        """Put off a pending request whose run could not start: due again from ``not_before``.

        For a one-key run, whose start is what claims its request: that start
        rolled back, so the request is still pending. A start whose commit
        landed after all claimed it, and then nothing matches.
        """
        statement = (
            f"UPDATE {trigger_requests.name} SET start_failures = start_failures + 1, not_before = ?, "
            "last_error = ? WHERE flow = ? AND id = ? AND status = 'pending'"
        )
        params = (not_before, error, request.flow, request.id)
        return self._updated("put off a trigger request", statement, params)

    def finish_run(self, flow: str, run_id: str, now: float) -> None:
        """Finish every request of ``flow`` claimed under ``run_id``: its run ran."""
        with self._failures("finish trigger requests"), self._database.driver_write() as connection:
            connection.exec_driver_sql(self._database.driver_sql(FINISH_RUN_REQUESTS), (now, flow, run_id))

    def finish(self, request_id: int, now: float) -> None:
        statement = (
            f"UPDATE {trigger_requests.name} SET {TRIGGER_REQUEST_FINISHED} WHERE id = ?"
        )
        with self._failures("finish a trigger request"), self._database.driver_write() as connection:
            connection.exec_driver_sql(self._database.driver_sql(statement), (now, request_id))

    def abandon(self, request: TriggerRequest, error: str, now: float, *, alone: bool = False) -> bool:
        """End a claim that will not run: its start was refused for good, or its tries are used up.

        Every request claimed under the run id ends, unless ``alone``: then
        only ``request`` does (one key of a batch whose plan refuses it).
        """
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'abandoned', finished_at = ?, last_error = ? "
            "WHERE flow = ? AND status = 'claimed' AND run_id = ?"
        )
        params: tuple[Any, ...] = (now, error, request.flow, request.run_id)
        if alone:
            statement, params = statement + " AND id = ?", (*params, request.id)
        return self._updated("abandon a trigger request", statement, params)

    def abandon_pending(self, request: TriggerRequest, error: str, now: float) -> bool:
        """End a pending request that will not run: a one-key run's, whose plan is refused before its start claims it."""
        statement = (
            f"UPDATE {trigger_requests.name} SET status = 'abandoned', finished_at = ?, last_error = ? "
            "WHERE flow = ? AND status = 'pending' AND id = ?"
        )
        params = (now, error, request.flow, request.id)
        return self._updated("abandon a trigger request", statement, params)

    def _updated(self, action: str, statement: str, params: tuple[Any, ...]) -> bool:
        """Run one conditional update (driver SQL with ``?``) in a transaction of its own: whether a row matched."""
        with self._failures(action), self._database.driver_write() as connection:
            return bool(connection.exec_driver_sql(self._database.driver_sql(statement), params).rowcount > 0)

    def run_status(self, run_id: str) -> str | None:
        """The run's status as history shows it (``interrupted`` once its owner is gone), or None before it started."""
        return self._run_history.run_status(run_id)

    def request(self, request_id: int) -> TriggerRequest | None:
        """The request with this id (its consumer key and generation), or None when it is gone."""
        query = select(trigger_requests).where(trigger_requests.c.id == request_id)
        with self._failures("read a trigger request"), self._database.connect() as connection:
            row = connection.execute(query).first()
        return None if row is None else _request(row)

    def launch(self, run_id: str) -> TriggerLaunch | None:
        """How a consumer run was launched (None for a run no trigger started)."""
        with self._failures("read the run's launch"), self._database.connect() as connection:
            row = connection.execute(select(trigger_runs).where(trigger_runs.c.run_id == run_id)).first()
        if row is None:
            return None
        return TriggerLaunch(row.flow, int(row.request_id), int(row.attempt), row.follows_run_id)
