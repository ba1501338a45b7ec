"""Asset events: an append-only log with provenance and a unique dedupe identity.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partita_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("asset", sa.Text, nullable=False),
        sa.Column("partition_key", sa.Text),
        sa.Column("partition_date", sa.Text),
        sa.Column("extra", sa.Text, nullable=False),
        sa.Column("timestamp", sa.Float, nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_run_id", sa.String(64)),
        sa.Column("source_asset", sa.Text),
        sa.Column("source_key_present", sa.Boolean),
        sa.Column("source_invocation", sa.Integer),
        sa.Column("dedupe_key", sa.Text),
        sa.Column("payload_hash", sa.String(64)),
    )
    op.create_index("ix_partita_events_asset_id", "partita_events", ["asset", "id"])
    op.create_index("ix_partita_events_asset_key", "partita_events", ["asset", "partition_key"])
    # Published events carry a dedupe identity; outlet and discovery events are
    # written exactly once with their attempt, so they skip these two indexes.
    published = sa.text("dedupe_key IS NOT NULL")
    op.create_index(
        "uq_partita_events_dedupe_key",
        "partita_events",
        ["dedupe_key"],
        unique=True,
        sqlite_where=published,
        postgresql_where=published,
    )
    op.create_index(
        "ix_partita_events_run",
        "partita_events",
        ["source_run_id"],
        sqlite_where=published,
        postgresql_where=published,
    )


def downgrade() -> None:
    op.drop_index("ix_partita_events_run", "partita_events")
    op.drop_index("uq_partita_events_dedupe_key", "partita_events")
    op.drop_index("ix_partita_events_asset_key", "partita_events")
    op.drop_index("ix_partita_events_asset_id", "partita_events")
    op.drop_table("partita_events")
