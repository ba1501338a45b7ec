"""Tables of the run-history store (SQLAlchemy Core).

The migrations under ``migrations/versions`` create and evolve these tables;
this module is the description the queries use. ``SCHEMA_HEAD`` names the
newest revision this version of partita understands.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

__all__ = [
    "KNOWN_REVISIONS",
    "POSTGRESQL_ONLY",
    "SCHEMA_HEAD",
    "VERSION_TABLE",
    "attempt_logs",
    "attempts",
    "events",
    "invocations",
    "metadata",
    "partition_history",
    "partitions",
    "run_tags",
    "runs",
    "trigger_requests",
    "trigger_runs",
    "trigger_waiting",
    "trigger_cursors",
    "flow_state",
    "daemons",
    "pool_leases",
    "pool_waiters",
]

#: Every migration revision this version ships, oldest first.
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009")
SCHEMA_HEAD = KNOWN_REVISIONS[-1]
#: Columns and indexes that exist on PostgreSQL only and that no query built
#: from these tables names (driver SQL reads them): (table, column, index).
POSTGRESQL_ONLY = (("partita_events", "txid", "ix_partita_events_txid"),)
#: Alembic's bookkeeping table, named for partita so a database shared with
#: another Alembic-managed application keeps both histories apart.
VERSION_TABLE = "partita_alembic_version"

metadata = MetaData()

# Attempts that recorded their partition key (``record_partition_keys``).
_KEYED = text("partition_key IS NOT NULL")

runs = Table(
    "partita_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("targets", Text, nullable=False),  # JSON list
    Column("selection_kind", String(16), nullable=False),
    Column("domain", Text),
    Column("key_count", Integer),  # null: keys discovered at run time
    Column("attempt_count", Integer),  # null: fan-out decided at run time
    Column("plan", Text, nullable=False),  # the portable plan document (no raw keys)
    Column("summary", Text),  # JSON: resources, callback errors
    Column("record_partition_keys", Boolean, nullable=False),
    Column("owner_host", Text, nullable=False),
    Column("owner_pid", Integer, nullable=False),
    Column("owner_token", Text, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("launched_by", String(16)),  # null: recorded before launches were (revision 0007)
    Column("flow_name", Text),
    Column("cancel_requested_at", Float),  # set by another process asking this run to cancel
    Index("ix_partita_runs_started_at", "started_at"),
    Index("ix_partita_runs_status", "status"),
    Index("ix_partita_runs_flow_name", "flow_name", "started_at"),
)

#: User tags of a run, one value per key; indexed by (key, value) for ``runs list --tag``.
run_tags = Table(
    "partita_run_tags",
    metadata,
    Column("run_id", String(64), ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Index("ix_partita_run_tags_key_value", "key", "value"),
    sqlite_with_rowid=False,
)

attempts = Table(
    "partita_attempts",
    metadata,
    Column("run_id", String(64), ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("asset", Text, primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("status", String(16), nullable=False),
    Column("reason", String(32)),
    Column("partition_key_present", Boolean, nullable=False),
    Column("partition_key", Text),  # only with record_partition_keys
    Column("invocations", Integer, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("duration", Float, nullable=False),
    Column("failure_type", Text),
    Column("failure_message", Text),
    Column("failure_traceback", Text),
    Column("blocked_by", Text),  # JSON [[asset, index], ...]
    Column("resolution", String(16)),
    Column("materialization_id", Text),
    # A key's attempts across runs (``partita status``), where keys are recorded; the newest
    # outcome of each key is read from the index alone (finish time, status and run are in it).
    Index(
        "ix_partita_attempts_asset_key",
        "asset",
        "partition_key",
        "finished_at",
        "status",
        "run_id",
        sqlite_where=_KEYED,
        postgresql_where=_KEYED,
    ),
    sqlite_with_rowid=False,
)

#: Log records and captured output of attempts, one row per line, keyed by the run and
#: the row's number in the run's write order (``id``, assigned by the run's one writer).
#: One tree and no index: a row is written for every logged line, and each index (or a
#: foreign key's lookup) costs every insert. Rows lie in write order per run, which
#: ``runs logs`` reads and ``--follow`` continues from; a cut deletes rows by number.
#: No foreign key: runs are never deleted, and a run's rows are written only after its start.
attempt_logs = Table(
    "partita_attempt_logs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=False),
    Column("asset", Text, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("invocation", Integer),
    Column("seq", Integer, nullable=False),  # the line's number within its attempt; a gap marks a cut
    Column("at", Float, nullable=False),
    Column("stream", String(8), nullable=False),
    Column("level", Integer),  # a logging level; null for captured output
    Column("logger", Text),
    Column("message", Text, nullable=False),
    sqlite_with_rowid=False,
)

invocations = Table(
    "partita_invocations",
    metadata,
    Column("run_id", String(64), ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("asset", Text, primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("succeeded", Boolean, nullable=False),
    Column("failure_type", Text),
    Column("failure_message", Text),
    sqlite_with_rowid=False,
)

# Published events carry a dedupe identity; outlet and discovery events (null
# dedupe key, written once with their attempt) stay out of these partial indexes.
_PUBLISHED = text("dedupe_key IS NOT NULL")
# The automatic event of each successful attempt: the last success of a key is read from this index alone.
_OUTLET = text("source_kind = 'outlet'")

# On PostgreSQL revision 0006 adds ``txid`` (the inserting transaction's id,
# filled by the database): triggers consume events in commit order through it.
# It is not described here, so no insert names it and SQLite has no such column.
events = Table(
    "partita_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("asset", Text, nullable=False),
    Column("partition_key", Text),  # canonical text: the routing pointer consumers need
    Column("partition_date", Text),  # ISO 8601 with offset
    Column("extra", Text, nullable=False),  # JSON object
    Column("timestamp", Float, nullable=False),
    Column("source_kind", String(16), nullable=False),
    Column("source_run_id", String(64)),
    Column("source_asset", Text),
    Column("source_key_present", Boolean),
    Column("source_invocation", Integer),
    # Null for outlet and discovery events, which are written once with their attempt.
    Column("dedupe_key", Text),
    Column("payload_hash", String(64)),
    Index("ix_partita_events_asset_id", "asset", "id"),
    Index("ix_partita_events_asset_key", "asset", "partition_key"),
    Index(
        "ix_partita_events_outlet_key",
        "asset",
        "partition_key",
        "id",
        "source_run_id",
        "timestamp",
        sqlite_where=_OUTLET,
        postgresql_where=_OUTLET,
    ),
    Index(
        "uq_partita_events_dedupe_key",
        "dedupe_key",
        unique=True,
        sqlite_where=_PUBLISHED,
        postgresql_where=_PUBLISHED,
    ),
    Index(
        "ix_partita_events_run",
        "source_run_id",
        sqlite_where=_PUBLISHED,
        postgresql_where=_PUBLISHED,
    ),
)

partitions = Table(
    "partita_partitions",
    metadata,
    Column("domain", Text, primary_key=True),
    Column("partition_key", Text, primary_key=True),
    Column("first_seen", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("retired", Boolean, nullable=False),
    Column("retired_at", Float),
    Column("reactivated_at", Float),
    Column("last_run_id", String(64)),
)

partition_history = Table(
    "partita_partition_history",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("domain", Text, nullable=False),
    Column("partition_key", Text, nullable=False),
    Column("action", String(16), nullable=False),  # retired | reactivated
    Column("at", Float, nullable=False),
    Column("run_id", String(64)),
    Index("ix_partita_partition_history_key", "domain", "partition_key", "id"),
)

trigger_requests = Table(
    "partita_trigger_requests",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("flow", Text, nullable=False),
    Column("partition_key", Text, nullable=False),  # canonical text; "" for an unpartitioned consumer
    # One request per (flow, key, generation): new events join the open request
    # until its run starts; later events open the next generation.
    Column("generation", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | claimed | finished | abandoned
    Column("event_ids", Text, nullable=False),  # JSON list of triggering event ids
    Column("run_id", String(64)),  # the run of the current try, fixed when it is claimed
    Column("created_at", Float, nullable=False),
    Column("claimed_at", Float),
    Column("finished_at", Float),
    # Runs started for this request: 1 after the first start, more after follow-ups of interrupted runs.
    Column("tries", Integer, nullable=False, server_default="0"),
    # Starts that failed in a row (the store refused the run's start); reset by a start.
    Column("start_failures", Integer, nullable=False, server_default="0"),
    Column("not_before", Float),  # a pending request is not due before this time (backoff)
    Column("last_error", Text),  # why the last start failed, or why the request was abandoned
    UniqueConstraint("flow", "partition_key", "generation", name="uq_partita_trigger_requests"),
    Index("ix_partita_trigger_requests_status", "flow", "status"),
)

def event_ids_text(ids: Iterable[int]) -> str:
    """A request's (or waiting key's) ``event_ids`` as stored: the sorted distinct ids as a JSON list.

    A request's events only grow, so its text changes whenever one joins.
    """
    return json.dumps(sorted(set(ids)))


#: What a finished request's row says: its run ran (set with the run's end, or by the daemon).
TRIGGER_REQUEST_FINISHED = "status = 'finished', finished_at = ?, start_failures = 0, not_before = NULL"
#: Finish every request of a flow claimed under a run id (parameters: finished_at, flow, run_id).
FINISH_RUN_REQUESTS = (
    f"UPDATE {trigger_requests.name} SET {TRIGGER_REQUEST_FINISHED} "
    "WHERE flow = ? AND status = 'claimed' AND run_id = ?"
)

trigger_runs = Table(
    "partita_trigger_runs",
    metadata,
    # How a consumer run was launched: its request, which try of it the run is (attempt),
    # and the interrupted run it follows.
    Column("run_id", String(64), primary_key=True),
    Column("request_id", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
    Column("flow", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("follows_run_id", String(64)),
    Column("created_at", Float, nullable=False),
    Index("ix_partita_trigger_runs_request", "request_id"),
)

#: Claim one pending request for a run (parameters: claimed_at, run_id, flow, id, event_ids): no row
#: matches once another daemon claimed it, or once new events joined it since it was read.
CLAIM_PENDING_REQUEST = (
    f"UPDATE {trigger_requests.name} SET status = 'claimed', claimed_at = ?, run_id = ?, tries = tries + 1 "
    "WHERE flow = ? AND id = ? AND status = 'pending' AND event_ids = ?"
)
#: Record a consumer run's launch (parameters: run_id, request_id, flow, attempt, follows_run_id, created_at).
RECORD_TRIGGER_LAUNCH = (
    f"INSERT INTO {trigger_runs.name} (run_id, request_id, flow, attempt, follows_run_id, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)

trigger_waiting = Table(
    "partita_trigger_waiting",
    metadata,
    Column("flow", Text, primary_key=True),
    Column("partition_key", Text, primary_key=True),
    Column("first_seen", Float, nullable=False),
    Column("event_ids", Text, nullable=False),
)

trigger_cursors = Table(
    "partita_trigger_cursors",
    metadata,
    Column("flow", Text, primary_key=True),
    # The position of the last event consumed, in commit order: (transaction id,
    # event id) on PostgreSQL, where ids are not assigned in commit order;
    # (0, event id) on SQLite, where they are.
    Column("last_event_id", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
    Column("last_event_txid", BigInteger().with_variant(Integer(), "sqlite"), nullable=False, server_default="0"),
    Column("last_tick", Float),
)

flow_state = Table(
    "partita_flow_state",
    metadata,
    Column("flow", Text, primary_key=True),
    Column("paused", Boolean, nullable=False),
    Column("changed_at", Float, nullable=False),
)

daemons = Table(
    "partita_daemons",
    metadata,
    Column("daemon_id", String(64), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("stopped_at", Float),
)

# Shared resource pools (revision 0009): a row per leased slot, and per run waiting for one.
pool_leases = Table(
    "partita_pool_leases",
    metadata,
    Column("pool", String(200), primary_key=True),
    Column("slot", Integer, primary_key=True, autoincrement=False),
    Column("lease_id", String(64), nullable=False, unique=True),
    Column("run_id", String(64), nullable=False),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("owner_token", Text, nullable=False),
    Column("asset", Text, nullable=False),
    Column("key_index", Integer, nullable=False),
    Column("partition_key", Text),
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

pool_waiters = Table(
    "partita_pool_waiters",
    metadata,
    Column("pool", String(200), primary_key=True),
    Column("run_id", String(64), primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("asset", Text, nullable=False),
    Column("waiting", Integer, nullable=False),
    Column("since", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
