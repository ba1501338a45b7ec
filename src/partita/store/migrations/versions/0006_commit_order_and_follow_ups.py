"""Triggers consume events in commit order; consumer runs that fail to start or are cut short are started again.

- PostgreSQL assigns an event's id when its transaction inserts it and shows
  the row when that transaction commits, so ids do not follow commit order.
  ``partita_events.txid`` records the inserting transaction's id (PostgreSQL
  only; rows written before this revision get 0, which sorts them first),
  and a trigger cursor becomes a (transaction id, event id) position.
- Trigger requests count the runs started for them (``tries``) and the
  starts that failed in a row, with a time before which a failed start is
  not retried and the last error; ``partita_trigger_runs`` records how each
  consumer run was launched, including the interrupted run a follow-up
  replaces.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    if postgresql:
        # A constant default fills existing rows at once; new rows get their transaction's id.
        op.execute("ALTER TABLE partita_events ADD COLUMN txid bigint NOT NULL DEFAULT 0")
        op.execute("ALTER TABLE partita_events ALTER COLUMN txid SET DEFAULT (pg_current_xact_id()::text::bigint)")
        op.create_index("ix_partita_events_txid", "partita_events", ["txid", "id"])
    with op.batch_alter_table("partita_trigger_cursors") as table:
        table.add_column(sa.Column("last_event_txid", _ID, nullable=False, server_default="0"))
    with op.batch_alter_table("partita_trigger_requests") as table:
        table.add_column(sa.Column("tries", sa.Integer, nullable=False, server_default="0"))
        table.add_column(sa.Column("start_failures", sa.Integer, nullable=False, server_default="0"))
        table.add_column(sa.Column("not_before", sa.Float))
        table.add_column(sa.Column("last_error", sa.Text))
    # Requests claimed before this revision started one run each.
    op.execute("UPDATE partita_trigger_requests SET tries = 1 WHERE run_id IS NOT NULL")
    op.create_table(
        "partita_trigger_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("request_id", _ID, nullable=False),
        sa.Column("flow", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("follows_run_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_partita_trigger_runs_request", "partita_trigger_runs", ["request_id"])


def downgrade() -> None:
    op.drop_index("ix_partita_trigger_runs_request", "partita_trigger_runs")
    op.drop_table("partita_trigger_runs")
    with op.batch_alter_table("partita_trigger_requests") as table:
        for column in ("last_error", "not_before", "start_failures", "tries"):
            table.drop_column(column)
    with op.batch_alter_table("partita_trigger_cursors") as table:
        table.drop_column("last_event_txid")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_partita_events_txid", "partita_events")
        op.execute("ALTER TABLE partita_events DROP COLUMN txid")
