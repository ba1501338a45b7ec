"""Alembic environment: migrations always run on a connection partita provides."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("partita migrations run through partita's store, which provides the connection")

context.configure(
    connection=connection,
    render_as_batch=connection.dialect.name == "sqlite",
    version_table=context.config.attributes.get("version_table", "partita_alembic_version"),
)
with context.begin_transaction():
    context.run_migrations()
