"""Triggers: consumer run requests (unique per flow, key and generation), cursors, pauses, daemons.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partita_trigger_requests",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("flow", sa.Text, nullable=False),
        sa.Column("partition_key", sa.Text, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("event_ids", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("claimed_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.UniqueConstraint("flow", "partition_key", "generation", name="uq_partita_trigger_requests"),
    )
    op.create_index("ix_partita_trigger_requests_status", "partita_trigger_requests", ["flow", "status"])
    op.create_table(
        "partita_trigger_waiting",
        sa.Column("flow", sa.Text, primary_key=True),
        sa.Column("partition_key", sa.Text, primary_key=True),
        sa.Column("first_seen", sa.Float, nullable=False),
        sa.Column("event_ids", sa.Text, nullable=False),
    )
    op.create_table(
        "partita_trigger_cursors",
        sa.Column("flow", sa.Text, primary_key=True),
        sa.Column("last_event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("last_tick", sa.Float),
    )
    op.create_table(
        "partita_flow_state",
        sa.Column("flow", sa.Text, primary_key=True),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("changed_at", sa.Float, nullable=False),
    )
    op.create_table(
        "partita_daemons",
        sa.Column("daemon_id", sa.String(64), primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("stopped_at", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("partita_daemons")
    op.drop_table("partita_flow_state")
    op.drop_table("partita_trigger_cursors")
    op.drop_table("partita_trigger_waiting")
    op.drop_index("ix_partita_trigger_requests_status", "partita_trigger_requests")
    op.drop_table("partita_trigger_requests")
