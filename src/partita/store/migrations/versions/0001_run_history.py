"""Run history: runs, attempts and invocations.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partita_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("finished_at", sa.Float),
        sa.Column("targets", sa.Text, nullable=False),
        sa.Column("selection_kind", sa.String(16), nullable=False),
        sa.Column("domain", sa.Text),
        sa.Column("key_count", sa.Integer),  # null: keys discovered at run time
        sa.Column("attempt_count", sa.Integer),  # null: fan-out decided at run time
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("summary", sa.Text),
        sa.Column("record_partition_keys", sa.Boolean, nullable=False),
        sa.Column("owner_host", sa.Text, nullable=False),
        sa.Column("owner_pid", sa.Integer, nullable=False),
        sa.Column("owner_token", sa.Text, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )
    op.create_index("ix_partita_runs_started_at", "partita_runs", ["started_at"])
    op.create_index("ix_partita_runs_status", "partita_runs", ["status"])
    op.create_table(
        "partita_attempts",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("asset", sa.Text, primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32)),
        sa.Column("partition_key_present", sa.Boolean, nullable=False),
        sa.Column("partition_key", sa.Text),
        sa.Column("invocations", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.Column("duration", sa.Float, nullable=False),
        sa.Column("failure_type", sa.Text),
        sa.Column("failure_message", sa.Text),
        sa.Column("failure_traceback", sa.Text),
        sa.Column("blocked_by", sa.Text),
        sa.Column("resolution", sa.String(16)),
        sa.Column("materialization_id", sa.Text),
        sqlite_with_rowid=False,  # rows live in the primary-key tree: one B-tree per insert
    )
    op.create_table(
        "partita_invocations",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("asset", sa.Text, primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.Column("succeeded", sa.Boolean, nullable=False),
        sa.Column("failure_type", sa.Text),
        sa.Column("failure_message", sa.Text),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("partita_invocations")
    op.drop_table("partita_attempts")
    op.drop_index("ix_partita_runs_status", "partita_runs")
    op.drop_index("ix_partita_runs_started_at", "partita_runs")
    op.drop_table("partita_runs")
