"""``partita schedules ENTRY``: each scheduled flow's catch-up, last handled tick, next ticks and pause state."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import click
from rich.console import Console
from rich.markup import escape

from partita.automation.evaluation import consumer_partition_def
from partita.automation.schedules import next_ticks, scheduled_key, tick_before
from partita.automation.triggers import CronPartitions
from partita.cli.common import emit_document, handles_errors, json_option, preview_store, store_option
from partita.entry import load_trigger_flows
from partita.errors import EntryLoadError
from partita.flow import Flow
from partita.store.triggers import TriggerStore


def _schedule(flow: Flow, triggers: TriggerStore, now: dt.datetime, count: int) -> dict[str, Any]:
    trigger = flow.trigger
    assert isinstance(trigger, CronPartitions)
    zone = ZoneInfo(trigger.timezone)
    _, last_tick = triggers.cursor(flow.name)
    last = None if last_tick is None else dt.datetime.fromtimestamp(last_tick, dt.UTC)
    # Upcoming ticks: after now, and never at or before what the trigger counts from.
    after = max(trigger.counted_after(last), now)
    consumer = consumer_partition_def(flow)
    # What a tick runs depends on the tick before it (see `scheduled_key`).
    before = tick_before(trigger.cron, zone, after)
    previous = trigger.counted_after(before)
    ticks = []
    for tick in next_ticks(trigger.cron, zone, after, count):
        key = scheduled_key(consumer, zone, tick, previous)
        ticks.append({"at": tick.isoformat(), "partition_key": key})
        previous = tick
    return {
        "flow": flow.name,
        "trigger": trigger.describe(),
        "paused": triggers.is_paused(flow.name),
        "last_tick": None if last is None else last.astimezone(zone).isoformat(),
        "next_ticks": ticks,
    }


@click.command()
@click.argument("entry")
@store_option
@click.option(
    "--next", "count", type=click.IntRange(1, 100), default=3, show_default=True, help="Upcoming ticks to list per flow."
)
@json_option
@handles_errors
def schedules(entry: str, store_url: str | None, count: int, as_json: bool) -> None:
    """List ENTRY's scheduled flows: catch-up, last handled tick, next ticks, pause state."""
    flows = [flow for flow in load_trigger_flows(entry) if isinstance(flow.trigger, CronPartitions)]
    if not flows:
        raise EntryLoadError(f"entry {entry!r} defines no Flow with a CronPartitions trigger")
    now = dt.datetime.now(dt.UTC)
    with preview_store(store_url) as store:
        triggers = TriggerStore(store)
        documents = [_schedule(flow, triggers, now, count) for flow in flows]
    if as_json:
        emit_document("schedules", {"flows": documents})
        return
    console = Console()
    for document in documents:
        trigger = document["trigger"]
        state = "paused" if document["paused"] else "active"
        console.print(f"[bold]{escape(document['flow'])}[/] ({state})", highlight=False)
        console.print(
            f"  cron {escape(trigger['cron'])} in {escape(trigger['timezone'])}, catch-up {trigger['catchup']}",
            highlight=False,
        )
        console.print(f"  last tick: {document['last_tick'] or 'none handled yet'}", highlight=False)
        for tick in document["next_ticks"]:
            runs = tick["partition_key"] or "nothing (inside a partition)"
            console.print(f"  next {tick['at']} runs {escape(runs)}", highlight=False)
