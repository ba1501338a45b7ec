"""``partita events``: list the event log, publish events from outside partita (SPEC §8)."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from partita.cli.common import (
    STORABLE_TEXT,
    chosen_store_url,
    emit_document,
    handles_errors,
    json_option,
    opened_store,
    reading_store,
    store_option,
)
from partita.cli.tables import cli_console, print_table
from partita.documents.emission import emission_body
from partita.documents.events import events_body
from partita.entry import load_registry
from partita.events.external import parse_extra_text, parse_partition_date, publish_event


@click.group()
def events() -> None:
    """The asset event log: list events, publish events from outside partita."""


@events.command("list")
@click.option("--asset", type=STORABLE_TEXT, default=None, metavar="ASSET", help="Only events of this asset.")
@click.option(
    "--partition-key", type=STORABLE_TEXT, default=None, metavar="KEY", help="Only events with this canonical key text."
)
@click.option("--since", type=click.IntRange(min=0), default=None, metavar="ID", help="Only events after this id.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="At most N events.")
@store_option
@json_option
@handles_errors
def list_events(
    asset: str | None, partition_key: str | None, since: int | None, limit: int, store_url: str | None, as_json: bool
) -> None:
    """Events in id order (oldest first), filtered."""
    with reading_store(store_url) as store:
        found = (
            []
            if store is None
            else store.list_events(asset=asset, partition_key=partition_key, since=since, limit=limit)
        )
        url = chosen_store_url(store_url) if store is None else store.url
    if as_json:
        emit_document("events", events_body(url, found))
        return
    console = cli_console()
    if not found:
        console.print(f"No matching events in {escape(url)}.", highlight=False)
        return
    table = Table(title=f"events in {escape(url)}", title_justify="left")
    for column in ("id", "asset", "partition key", "date", "extra", "source", "run", "at"):
        table.add_column(column)
    for event in found:
        source = event.source
        table.add_row(
            str(event.id),
            escape(event.asset),
            escape(event.partition_key or "-"),
            "-" if event.partition_date is None else event.partition_date.isoformat(),
            escape(json.dumps(event.extra)) if event.extra else "",
            source.kind.value,
            source.run_id or "-",
            event.timestamp.strftime("%Y-%m-%d %H:%M:%S"),
        )
    print_table(console, table)


@events.command("emit")
@click.argument("asset")
@click.argument("entry")
@click.option("--partition-key", default=None, metavar="KEY", help="The event's key (canonical text of ASSET's definition).")
@click.option("--partition-date", default=None, metavar="ISO", help="An ISO 8601 date-time with offset (needs a key).")
@click.option("--extra", default=None, metavar="JSON", help="A JSON object attached to the event.")
@click.option("--dedupe-key", default=None, metavar="D", help="Makes repeating this publication idempotent.")
@store_option
@json_option
@handles_errors
def emit_event(
    asset: str,
    entry: str,
    partition_key: str | None,
    partition_date: str | None,
    extra: str | None,
    dedupe_key: str | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Publish an event for ASSET, validated against ENTRY's definitions (source: external)."""
    registry = load_registry(entry)
    with opened_store(store_url, False) as store:
        assert store is not None
        receipt = publish_event(
            store,
            registry,
            asset,
            partition_key=partition_key,
            partition_date=parse_partition_date(partition_date, "--partition-date"),
            extra=parse_extra_text(extra, "--extra"),
            dedupe_key=dedupe_key,
        )
    if as_json:
        emit_document("emission", emission_body(receipt))
        return
    state = "already published (duplicate)" if receipt.duplicate else "published"
    cli_console().print(f"event {receipt.id} {state} at {receipt.timestamp.isoformat()}", highlight=False)
