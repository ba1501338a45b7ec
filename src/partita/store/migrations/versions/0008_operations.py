"""What operating partitions needs: status per key, cancellation, attempt logs.

- ``ix_partita_events_outlet_key``: a partial index over outlet events by
  (asset, partition_key, id) that also holds the run and the time, so the last
  success of each key of an asset (``partita status``, ``--missing``
  backfills) is read from the index alone, without visiting a row.
- ``ix_partita_attempts_asset_key``: attempts by (asset, partition_key) where
  keys are recorded, also holding the finish time, status and run, so each
  key's newest outcome (``partita status``) is read from the index alone,
  without scanning every run or visiting a row.
- ``partita_runs.cancel_requested_at``: set by ``partita runs cancel`` (or
  any other process); the process running the run polls it and cancels.
- ``partita_attempt_logs``: the log records (and captured output) of each
  attempt, one row per line, bounded per attempt by the writer. Keyed by
  (run_id, id), ``id`` being the row's number in the run's write order,
  assigned by the run's one writer: a run's lines in write order for
  ``runs logs --follow`` are a range of the key. No other index and no
  foreign key (runs are never deleted): each costs every line's insert.
  On SQLite the rows live in the key's tree (WITHOUT ROWID).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_OUTLET = sa.text("source_kind = 'outlet'")
_KEYED = sa.text("partition_key IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_partita_events_outlet_key",
        "partita_events",
        ["asset", "partition_key", "id", "source_run_id", "timestamp"],
        sqlite_where=_OUTLET,
        postgresql_where=_OUTLET,
    )
    op.create_index(
        "ix_partita_attempts_asset_key",
        "partita_attempts",
        ["asset", "partition_key", "finished_at", "status", "run_id"],
        sqlite_where=_KEYED,
        postgresql_where=_KEYED,
    )
    with op.batch_alter_table("partita_runs") as table:
        table.add_column(sa.Column("cancel_requested_at", sa.Float))
    op.create_table(
        "partita_attempt_logs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=False
        ),
        sa.Column("asset", sa.Text, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("invocation", sa.Integer),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("stream", sa.String(8), nullable=False),
        sa.Column("level", sa.Integer),
        sa.Column("logger", sa.Text),
        sa.Column("message", sa.Text, nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("partita_attempt_logs")
    with op.batch_alter_table("partita_runs") as table:
        table.drop_column("cancel_requested_at")
    op.drop_index("ix_partita_attempts_asset_key", "partita_attempts")
    op.drop_index("ix_partita_events_outlet_key", "partita_events")
