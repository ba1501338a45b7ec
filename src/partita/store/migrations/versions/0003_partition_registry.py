"""Partition registry: the known keys of each runtime domain and their history.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partita_partitions",
        sa.Column("domain", sa.Text, primary_key=True),
        sa.Column("partition_key", sa.Text, primary_key=True),
        sa.Column("first_seen", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
        sa.Column("retired", sa.Boolean, nullable=False),
        sa.Column("retired_at", sa.Float),
        sa.Column("reactivated_at", sa.Float),
        sa.Column("last_run_id", sa.String(64)),
    )
    op.create_table(
        "partita_partition_history",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("domain", sa.Text, nullable=False),
        sa.Column("partition_key", sa.Text, nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("run_id", sa.String(64)),
    )
    op.create_index("ix_partita_partition_history_key", "partita_partition_history", ["domain", "partition_key", "id"])


def downgrade() -> None:
    op.drop_index("ix_partita_partition_history_key", "partita_partition_history")
    op.drop_table("partita_partition_history")
    op.drop_table("partita_partitions")
