"""``partita status ENTRY``: each key of each asset materialized, failed, running or missing (SPEC §15).

Per asset: the counts per state, then a grid of symbols that fits 80
columns. A selection applies to the assets whose definition accepts it (the
assets of the domain it parses in); the others are left out and named, or
are an error when named with --asset.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from partita.cli.common import (
    CLI_SELECTION_FIELDS,
    chosen_store_url,
    emit_document,
    handles_errors,
    json_option,
    key_selection_options,
    reading_store,
    store_option,
)
from partita.cli.status_grid import LEGEND, SYMBOLS, grid_lines, when
from partita.cli.tables import cli_console
from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.entry import load_entry
from partita.errors import ConfigurationError, SelectionError
from partita.operations.status import (
    KeyState,
    PartitionStates,
    PartitionStatus,
    asset_states,
    asset_status,
    cycles_uncollected,
)
from partita.planning.selection import KeySource
from partita.store import Store, open_store

__all__ = ["status"]


@contextmanager
def _store(store_url: str | None) -> Iterator[tuple[Store, bool]]:
    """The store to read and whether it exists; a missing one reads as empty (nothing is created)."""
    with reading_store(store_url) as store:
        if store is not None:
            yield store, True
            return
    empty = open_store("sqlite://")
    try:
        yield empty, False
    finally:
        empty.close()


def _chosen(closure: tuple[AssetDefinition, ...], names: tuple[str, ...], entry: str) -> list[AssetDefinition]:
    by_name = {definition.name: definition for definition in closure}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ConfigurationError(
            f"--asset {unknown[0]!r} is not an asset of {entry!r}; its assets are {', '.join(by_name)}"
        )
    return [by_name[name] for name in dict.fromkeys(names)] if names else list(closure)


#: What a status says of one asset: every key's record (--json, an unpartitioned asset), or its state alone (the grid).
AssetReport = PartitionStatus | PartitionStates


def _report(
    definition: AssetDefinition,
    closure: dict[str, AssetDefinition],
    config: RunConfig,
    store: Store,
    now: dt.datetime,
    detailed: bool,
    **selection: Any,
) -> AssetReport:
    if detailed or definition.partition_def is None:
        return asset_status(definition, closure, config, store, now, **selection)
    return asset_states(definition, closure, config, store, now, **selection)


def _statuses(
    chosen: list[AssetDefinition],
    closure: tuple[AssetDefinition, ...],
    config: RunConfig,
    store: Store,
    named: bool,
    detailed: bool,
) -> tuple[list[AssetReport], list[dict[str, Any]]]:
    """Each chosen asset's status, and the assets a selection did not fit (an error when named or none fit).

    ``detailed``: every key's record (the JSON document); otherwise each partitioned asset's key states alone,
    which the grid needs and which read and build far less over 100,000 keys.
    """
    by_name = {definition.name: definition for definition in closure}
    now = dt.datetime.now(dt.UTC)
    found: list[AssetReport] = []
    left_out: list[dict[str, Any]] = []
    first_error: SelectionError | None = None
    selecting = bool(config.selection_forms())
    for definition in chosen:
        if selecting and definition.partition_def is None and not named:
            found.append(_report(definition, by_name, RunConfig(), store, now, detailed))
            continue
        try:
            selection = {"source": KeySource.TEXT, "fields": CLI_SELECTION_FIELDS}
            found.append(_report(definition, by_name, config, store, now, detailed, **selection))
        except SelectionError as error:
            if named or not selecting:
                raise
            first_error = first_error or error
            domain = None if definition.partition_def is None else definition.partition_def.domain
            left_out.append({"asset": definition.name, "domain": domain, "reason": str(error)})
    if selecting and not any(status.definition is not None for status in found) and first_error is not None:
        raise first_error
    return found, left_out


def _counts_line(status: AssetReport) -> Text:
    line = Text("  ")
    for number, state in enumerate(KeyState):
        if number:
            line.append("  ")
        line.append(f"{SYMBOLS[state]} {state.value} {status.counts[state]:,}")
    return line


def _heading(status: AssetReport) -> str:
    definition = status.definition
    if definition is None:
        return f"{status.asset} (unpartitioned)"
    count = len(status.scope.keys)
    return f"{status.asset} ({definition.domain}): {count:,} key{'s' if count != 1 else ''}, {status.scope.description}"


def _unpartitioned(console: Console, status: PartitionStatus) -> None:
    only = status.keys[0]
    detail = ""
    if only.state is KeyState.MATERIALIZED and only.last_success is not None:
        detail = f", last success {when(only.last_success.at)} in run {only.last_success.run_id}"
    elif only.state is KeyState.FAILED and only.last_failure is not None:
        detail = f", failed {when(only.last_failure.at)} in run {only.last_failure.run_id}"
    elif only.state is KeyState.RUNNING and only.running is not None:
        detail = f" in run {only.running.run_id}"
    console.print(f"  {SYMBOLS[only.state]} {only.state.value}{escape(detail)}", highlight=False, soft_wrap=True)


def _render(console: Console, statuses: list[AssetReport], left_out: list[dict[str, Any]], url: str, exists: bool) -> None:
    if not exists:
        console.print(f"No run-history store exists at {escape(url)} yet: every key reads missing.", highlight=False, soft_wrap=True)
    for number, status in enumerate(statuses):
        if number:
            console.print()
        console.print(escape(_heading(status)), highlight=False, soft_wrap=True)
        if isinstance(status, PartitionStatus) and status.definition is None:
            _unpartitioned(console, status)
            continue
        assert isinstance(status, PartitionStates)
        console.print(_counts_line(status), highlight=False, soft_wrap=True)
        for line in grid_lines(status):
            console.print(Text("  ").append_text(line), highlight=False, soft_wrap=True)
    for item in left_out:
        console.print(
            f"\n{escape(item['asset'])} ({escape(str(item['domain']))}) left out: the selection does not fit its definition",
            highlight=False, soft_wrap=True,
        )
    if any(status.definition is not None for status in statuses):
        console.print(f"\nlegend: {LEGEND}", highlight=False, soft_wrap=True)
        console.print("failed and running keys need runs that recorded keys (--record-partition-keys)", style="dim", highlight=False, soft_wrap=True)


@click.command("status")
@click.argument("entry")
@click.option(
    "--asset", "asset_names", multiple=True, metavar="ASSET",
    help="Report this asset of ENTRY's flow (repeatable; default: every asset of the flow).",
)
@key_selection_options
@store_option
@json_option
@handles_errors
def status(
    entry: str,
    asset_names: tuple[str, ...],
    partition_keys: tuple[str, ...],
    partition_range: tuple[str, str] | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """Each key of ENTRY's assets: materialized, failed, running or missing.

    Without a selection, time assets cover a recent window ending now (30
    days, 7 days of hours, 24 months), static assets their declared keys and
    runtime domains their known keys. Nothing runs; the store is only read.
    """
    flow = load_entry(entry)
    closure = flow.closure()
    chosen = _chosen(closure, asset_names, entry)
    config = RunConfig.coerce(
        {"partition_keys": list(partition_keys) or None, "partition_range": partition_range}
    )
    with _store(store_url) as (store, exists):
        url = store.url if exists else chosen_store_url(store_url)
        statuses, left_out = _statuses(chosen, closure, config, store, bool(asset_names), detailed=as_json)
    if as_json:
        with cycles_uncollected():
            detailed = [item for item in statuses if isinstance(item, PartitionStatus)]
            assert len(detailed) == len(statuses)  # --json reads every asset's records
            assets = [item.to_dict() for item in detailed]
            emit_document(
                "partition-status", {"store": url, "store_exists": exists, "assets": assets, "left_out": left_out}, compact=True
            )
        return
    _render(cli_console(), statuses, left_out, url, exists)
