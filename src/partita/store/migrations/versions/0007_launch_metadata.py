"""Runs record how they were launched, their flow's name and their user tags.

- ``partita_runs.launched_by`` (cli, python, trigger, schedule, backfill, ui)
  and ``partita_runs.flow_name``; runs recorded before this revision keep
  null in both, except runs a trigger launched (``partita_trigger_runs``),
  which are marked ``trigger`` with the flow the launch names.
- ``partita_run_tags``: (run_id, key, value), one value per key, indexed by
  (key, value) so that ``runs list --tag`` does not scan every run.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("partita_runs") as table:
        table.add_column(sa.Column("launched_by", sa.String(16)))
        table.add_column(sa.Column("flow_name", sa.Text))
    op.create_index("ix_partita_runs_flow_name", "partita_runs", ["flow_name", "started_at"])
    op.execute(
        "UPDATE partita_runs SET launched_by = 'trigger', flow_name = "
        "(SELECT flow FROM partita_trigger_runs WHERE partita_trigger_runs.run_id = partita_runs.run_id) "
        "WHERE run_id IN (SELECT run_id FROM partita_trigger_runs)"
    )
    op.create_table(
        "partita_run_tags",
        sa.Column(
            "run_id", sa.String(64), sa.ForeignKey("partita_runs.run_id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_partita_run_tags_key_value", "partita_run_tags", ["key", "value"])


def downgrade() -> None:
    op.drop_index("ix_partita_run_tags_key_value", "partita_run_tags")
    op.drop_table("partita_run_tags")
    op.drop_index("ix_partita_runs_flow_name", "partita_runs")
    with op.batch_alter_table("partita_runs") as table:
        table.drop_column("flow_name")
        table.drop_column("launched_by")
