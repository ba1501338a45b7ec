"""``partita pools ENTRY``: the shared resource pools of a flow, their holders and waiters."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from partita.cli.common import chosen_store_url, emit_document, handles_errors, json_option, reading_store, store_option
from partita.cli.tables import cli_console, print_table
from partita.documents.pools import declared_pools, pools_body
from partita.entry import load_entry


@click.command()
@click.argument("entry")
@store_option
@json_option
@handles_errors
def pools(entry: str, store_url: str | None, as_json: bool) -> None:
    """List the shared resource pools of ENTRY's flow: limit, holders and waiting runs, in every process."""
    declared = declared_pools(load_entry(entry).resources)
    with reading_store(store_url) as store:
        if store is None:  # no store yet: nothing was ever leased
            url, holders, waiters = chosen_store_url(store_url), [], []
        else:
            leases, now = store.pool_leases, time.time()
            url, holders, waiters = store.url, leases.holders(now=now), leases.waiters(now=now)
    body = pools_body(url, declared, holders, waiters)
    if as_json:
        emit_document("pools", body)
        return
    _render(body)


def _render(body: dict[str, Any]) -> None:
    console = cli_console()
    if not body["pools"]:
        console.print("The flow declares no shared pool (ResourcePolicy(..., shared=True)).", highlight=False)
        return
    now = time.time()
    for pool in body["pools"]:
        limit = pool["max_concurrency"]
        of = f" of {limit}" if limit is not None else " (not declared by this entry)"
        console.print(
            f"pool {escape(pool['name'])}: {len(pool['holders'])}{of} slots held, "
            f"{sum(waiter['waiting'] for waiter in pool['waiters'])} attempts waiting in {len(pool['waiters'])} runs",
            highlight=False,
        )
        if pool["holders"]:
            table = Table(title_justify="left")
            for column in ("slot", "run id", "host", "pid", "asset", "key", "since", "expires in"):
                table.add_column(column)
            for holder in pool["holders"]:
                key = holder["partition_key"]
                table.add_row(
                    str(holder["slot"]), holder["run_id"], escape(holder["host"]), str(holder["pid"]),
                    escape(holder["asset"]), f"#{holder['key_index']}" if key is None else escape(key),
                    _clock(holder["acquired_at"]), _remaining(holder["expires_at"], now),
                )
            print_table(console, table)
        if pool["waiters"]:
            table = Table(title_justify="left")
            for column in ("waiting run", "host", "pid", "asset", "attempts", "since"):
                table.add_column(column)
            for waiter in pool["waiters"]:
                table.add_row(
                    waiter["run_id"], escape(waiter["host"]), str(waiter["pid"]), escape(waiter["asset"]),
                    str(waiter["waiting"]), _clock(waiter["since"]),
                )
            print_table(console, table)


def _clock(iso: str) -> str:
    return iso[:19].replace("T", " ")


def _remaining(iso: str, now: float) -> str:
    import datetime as dt

    return f"{max(0.0, dt.datetime.fromisoformat(iso).timestamp() - now):.1f} s"
