"""Event notifications: on PostgreSQL, a committed insert into the event log notifies ``partita_events``.

One statement-level trigger covers every way events are written (single
inserts, ``COPY`` batches, other processes and hosts). Its payload is the
JSON array of the distinct asset names the statement inserted, or an empty
string when that would not fit into a notification (8000 bytes): listeners
then treat it as "events of any asset". A statement that inserted nothing
(every row a duplicate) notifies nobody. PostgreSQL delivers notifications
only when the transaction commits, and folds identical ones within it.

SQLite has no notifications: this revision changes nothing there, and
daemons on SQLite poll.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Kept in step with partita.store.notifications.CHANNEL (a migration is frozen history).
_CHANNEL = "partita_events"
_PAYLOAD_LIMIT = 7999  # NOTIFY refuses payloads of 8000 bytes or more

_FUNCTION = f"""
CREATE FUNCTION partita_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    assets text;
BEGIN
    SELECT json_agg(DISTINCT asset ORDER BY asset)::text INTO assets FROM partita_inserted_events;
    IF assets IS NULL THEN
        RETURN NULL;
    END IF;
    IF octet_length(assets) > {_PAYLOAD_LIMIT} THEN
        assets := '';
    END IF;
    PERFORM pg_notify('{_CHANNEL}', assets);
    RETURN NULL;
END
$$
"""

_TRIGGER = """
CREATE TRIGGER partita_events_notify
    AFTER INSERT ON partita_events
    REFERENCING NEW TABLE AS partita_inserted_events
    FOR EACH STATEMENT EXECUTE FUNCTION partita_notify_events()
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_FUNCTION)
    op.execute(_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS partita_events_notify ON partita_events")
    op.execute("DROP FUNCTION IF EXISTS partita_notify_events()")
