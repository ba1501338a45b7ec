"""A run's start and its end on SQLite as one statement each, through temporary views and their triggers.

Every call into SQLite gives up the interpreter's lock, and the calling
thread must then take it back from whichever thread took it meanwhile,
while it holds the write gate that every writer of the process waits on. A
triggered one-key run made 13 such calls under the gate: its claim
(``BEGIN``, the claim, the launch, ``COMMIT``), its start (``BEGIN``, the
run's row, ``COMMIT``) and its end (``BEGIN``, the attempt, the outlet
event, the outcome, the requests, ``COMMIT``). Here the start (with the
claim) and the end are one ``INSERT`` each into a temporary view whose
``INSTEAD OF`` trigger makes all of its writes, committed on its own: the
same rows, in one transaction, for one call.

The views live in the connection's ``temp`` schema, created when a
connection opens (`install`); they are never part of the database file or
its migrations. The run's end goes this way when its last batches hold only
plain successes (`journal_rows.success_row`), which SQLite unpacks from one
JSON text, each row whole; anything else (or a long tail of successes)
keeps the transaction of several statements.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from partita.store.bulk_writes import sqlite_json_text
from partita.store.journal_rows import sqlite_success_attempts, sqlite_success_outlets
from partita.store.protocol import ProgressBatch, RequestClaim
from partita.store.run_rows import RUN_START_COLUMNS
from partita.store.schema import CLAIM_PENDING_REQUEST, TRIGGER_REQUEST_FINISHED, runs, trigger_requests, trigger_runs

__all__ = [
    "CLAIM_LOST", "END_ROWS_MAX", "RUN_END_SQL", "RUN_START_SQL", "SUPPORTED", "end_successes", "install",
    "run_start_values",
]  # fmt: skip

#: ``->>``, which the end's trigger reads its JSON with, arrived in SQLite 3.38: older ones keep the transactions.
SUPPORTED = sqlite3.sqlite_version_info >= (3, 38, 0)
#: The message of the abort a claim that no longer matches raises (an `sqlite3.IntegrityError`).
CLAIM_LOST = "partita: the trigger request changed since it was read"

#: The most plain successes a run's end writes through its one statement; a longer tail of a big
#: run takes the transaction, where a few more calls cost less than reading each row whole.
END_ROWS_MAX = 64
_CLAIM_COLUMNS = ("claim_flow", "claim_request", "claim_attempt", "claim_at", "claim_events")
_END_COLUMNS = ("run_id", "status", "finished_at", "summary", "serves_flow", "successes")


def _view(name: str, columns: Sequence[str]) -> str:
    return f"CREATE TEMP VIEW IF NOT EXISTS {name} AS SELECT " + ", ".join(f"NULL AS {c}" for c in columns)


def _with_new(statement: str, names: Sequence[str]) -> str:
    """A statement written with ``?`` for ``names``, each replaced by its ``NEW.`` column, in order."""
    assert statement.count("?") == len(names), statement  # the statement and this call must change together
    for name in names:
        statement = statement.replace("?", f"NEW.{name}", 1)
    return statement


_START = (*RUN_START_COLUMNS, *_CLAIM_COLUMNS)
_START_TRIGGER = f"""
CREATE TEMP TRIGGER IF NOT EXISTS partita_run_start_writes INSTEAD OF INSERT ON partita_run_start BEGIN
    SELECT RAISE(ABORT, '{CLAIM_LOST}') WHERE NEW.claim_request IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM {trigger_requests.name} WHERE flow = NEW.claim_flow AND id = NEW.claim_request
        AND status = 'pending' AND event_ids = NEW.claim_events);
    {_with_new(CLAIM_PENDING_REQUEST, ("claim_at", "run_id", "claim_flow", "claim_request", "claim_events"))};
    INSERT INTO {trigger_runs.name} (run_id, request_id, flow, attempt, follows_run_id, created_at)
        SELECT NEW.run_id, NEW.claim_request, NEW.claim_flow, NEW.claim_attempt, NULL, NEW.claim_at
        WHERE NEW.claim_request IS NOT NULL;
    INSERT INTO {runs.name} ({", ".join(RUN_START_COLUMNS)})
        VALUES ({", ".join(f"NEW.{column}" for column in RUN_START_COLUMNS)});
END
"""
_END_TRIGGER = f"""
CREATE TEMP TRIGGER IF NOT EXISTS partita_run_end_writes INSTEAD OF INSERT ON partita_run_end BEGIN
    {sqlite_success_attempts("NEW.run_id", "NEW.successes")};
    {sqlite_success_outlets("NEW.run_id", "NEW.successes")};
    UPDATE {runs.name} SET status = NEW.status, finished_at = NEW.finished_at, heartbeat_at = NEW.finished_at,
        summary = NEW.summary WHERE run_id = NEW.run_id;
    {_with_new(f"UPDATE {trigger_requests.name} SET {TRIGGER_REQUEST_FINISHED} ", ("finished_at",))}
        WHERE NEW.serves_flow IS NOT NULL AND flow = NEW.serves_flow AND status = 'claimed' AND run_id = NEW.run_id;
END
"""
_DDL = (
    _view("partita_run_start", _START),
    _START_TRIGGER,
    _view("partita_run_end", _END_COLUMNS),
    _END_TRIGGER,
)

#: A run's start: its `RUN_START_COLUMNS` values, then its claim's (`run_start_values`).
RUN_START_SQL = f"INSERT INTO temp.partita_run_start ({', '.join(_START)}) VALUES ({', '.join('?' * len(_START))})"
#: A run's end: run id, status, finish time, summary, the trigger flow it serves, its successes' JSON text.
RUN_END_SQL = f"INSERT INTO temp.partita_run_end ({', '.join(_END_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?)"


def install(connection: sqlite3.Connection) -> sqlite3.Connection:
    """Create the views and their triggers on a newly opened connection (its ``temp`` schema); returns it."""
    for statement in _DDL if SUPPORTED else ():
        connection.execute(statement)
    return connection


def run_start_values(values: tuple[Any, ...], claim: RequestClaim | None) -> tuple[Any, ...]:
    """`RUN_START_SQL`'s parameters: the runs row's values and the claim's (NULL without one)."""
    if claim is None:
        return (*values, None, None, None, None, None)
    return (*values, claim.flow, claim.request_id, claim.attempt, claim.claimed_at, claim.event_ids)


def end_successes(progress: Sequence[ProgressBatch]) -> tuple[str | None, list[tuple[Any, ...]]] | None:
    """The JSON text of the plain successes a run's last batches hold, and those rows; None when they hold more.

    A batch with records, outlet drafts, log lines or a replay needs the
    transaction of several statements; so does a row JSON would not carry
    exactly. So do more than `END_ROWS_MAX` rows: the trigger reads each row
    whole, and the transaction's compact inserts (`sqlite_success_groups`) cost
    SQLite about half as much per row. No successes at all: None as the text
    (SQLite reads no rows).
    """
    rows: list[tuple[Any, ...]] = []
    for batch in progress:
        if batch.attempts or batch.outlets or batch.outlet_rows or batch.logs or batch.replay or not batch.new:
            return None
        rows.extend(batch.attempt_rows)
    if not rows:
        return None, rows
    if len(rows) > END_ROWS_MAX:
        return None
    text = sqlite_json_text(rows)
    return None if text is None else (text, rows)
