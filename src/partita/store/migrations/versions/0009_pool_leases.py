"""Shared resource pools: leased slots with expiry, and who waits for one.

- ``partita_pool_leases``: one row per held slot of a shared pool, keyed by
  (pool, slot). The slot number is what keeps two processes from both taking
  the last slot on PostgreSQL: both would insert the same (pool, slot) and
  the second insert fails on the key (SQLite's write lock serialises anyway).
  ``lease_id`` is the holder's own token for the row, so a holder whose
  lease expired and was reclaimed never renews or releases the new holder's
  slot. ``expires_at`` is renewed while the body runs; a row past it is free
  to the next acquirer (a killed holder never renews).
- ``partita_pool_waiters``: one row per (pool, run) while that run has
  attempts waiting for a slot, refreshed by each denied acquire and expiring
  like a lease, so ``partita pools`` can list waiters of every process.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partita_pool_leases",
        sa.Column("pool", sa.String(200), primary_key=True),
        sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("lease_id", sa.String(64), nullable=False, unique=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("owner_token", sa.Text, nullable=False),
        sa.Column("asset", sa.Text, nullable=False),
        sa.Column("key_index", sa.Integer, nullable=False),
        sa.Column("partition_key", sa.Text),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_table(
        "partita_pool_waiters",
        sa.Column("pool", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("asset", sa.Text, nullable=False),
        sa.Column("waiting", sa.Integer, nullable=False),
        sa.Column("since", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("partita_pool_waiters")
    op.drop_table("partita_pool_leases")
