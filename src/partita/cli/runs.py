"""``partita runs``: list, show and compare recorded runs (SPEC §6)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from partita.cli.attempt_logs import runs_logs
from partita.cli.cancel import cancel
from partita.cli.common import (
    STORABLE_TEXT,
    chosen_store_url,
    emit_document,
    handles_errors,
    json_option,
    no_run_store_error,
    reading_store,
    since_time,
    store_option,
    tags_of,
)
from partita.cli.tables import cli_console, print_table
from partita.documents.runs import RunView, run_summary
from partita.results.attempts import attempt_never_started
from partita.store import StoredRun
from partita.store.history import compare_runs
from partita.store.protocol import RunFilter
from partita.store.trigger_requests import TriggerRequest
from partita.store.triggers import TriggerLaunch

_STATUSES = ("running", "interrupted", "success", "failed", "cancelled")
_STYLE = {
    "success": "green",
    "failed": "red",
    "cancelled": "magenta",
    "interrupted": "magenta",
    "running": "cyan",
    "not_started": "dim",
}


def _styled(status: str) -> str:
    return f"[{_STYLE.get(status, 'white')}]{status.replace('_', ' ')}[/]"


def _not_started(planned: int | None, attempts: list[dict[str, Any]], status: str) -> tuple[int, str]:
    """Recorded attempts that never began (one rule: `attempt_never_started`), and the cell of all that did not.

    While a run is unfinished, planned attempts with no row yet never began
    either (``?`` when the fan-out is not known).
    """
    never = sum(1 for attempt in attempts if attempt_never_started(attempt["status"], attempt["invocations"]))
    if status not in ("running", "interrupted"):
        return never, str(never)
    return never, "?" if planned is None else str(never + max(0, planned - len(attempts)))


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


@click.group()
def runs() -> None:
    """Inspect the run history: list, show and compare runs, and read their attempts' logs."""


@runs.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most N runs.")
@click.option("--status", type=click.Choice(_STATUSES), default=None, help="Only runs with this status.")
@click.option("--flow", "flow_name", type=STORABLE_TEXT, default=None, metavar="NAME", help="Only runs of this flow.")
@click.option(
    "--tag", "tag_texts", multiple=True, metavar="KEY=VALUE", type=STORABLE_TEXT,
    help="Only runs carrying this tag (repeatable: all must match).",
)
@click.option(
    "--since", type=STORABLE_TEXT, default=None, metavar="TIME",
    help="Only runs started at or after TIME: an ISO 8601 time (UTC unless it has an offset) or an age like 30m, 2h, 7d.",
)
@store_option
@json_option
@handles_errors
def list_runs(
    limit: int,
    status: str | None,
    flow_name: str | None,
    tag_texts: tuple[str, ...],
    since: str | None,
    store_url: str | None,
    as_json: bool,
) -> None:
    """The most recent runs, newest first."""
    where = RunFilter(
        flow_name=flow_name,
        tags=tuple(sorted(tags_of(tag_texts).items())),
        since=None if since is None else since_time(since, time.time()),
    )
    with reading_store(store_url) as store:
        found = [] if store is None else store.list_runs(limit=limit, status=status, where=where)
        url = chosen_store_url(store_url) if store is None else store.url
    if as_json:
        emit_document("runs", {"store": url, "runs": [run_summary(run) for run in found]})
        return
    console = cli_console()
    if not found:
        filtered = where != RunFilter() or status is not None
        console.print(f"No runs {'match' if filtered else 'recorded'} in {escape(url)}.", highlight=False)
        return
    table = Table(title=f"runs in {escape(url)} (any unique prefix of a run id works)", title_justify="left")
    for column in ("run id", "status", "started", "duration", "targets", "attempts", "failed", "skipped"):
        table.add_column(column)
    for run in found:
        table.add_row(
            run.run_id,
            _styled(run.status),
            run.header.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            _seconds(run.duration),
            ", ".join(run.header.targets),
            "at run time" if run.attempt_count is None else str(run.attempt_count),
            str(run.counts.get("failed", 0)),
            str(run.counts.get("skipped", 0)),
        )
    print_table(console, table)


def _print_launch(
    console: Console, run: StoredRun, launch: TriggerLaunch | None, request: TriggerRequest | None
) -> None:
    flow = "" if run.flow_name is None else f" of flow {escape(run.flow_name)}"
    how = "an earlier partita (not recorded)" if run.launched_by is None else run.launched_by
    console.print(f"launched by {how}{flow}", highlight=False)
    if run.tags:
        console.print("tags: " + escape(", ".join(f"{key}={value}" for key, value in run.tags)), highlight=False)
    if launch is not None:
        follows = "" if launch.follows_run_id is None else f", follows interrupted run {launch.follows_run_id}"
        key = generation = ""
        if request is not None:
            if run.record_partition_keys and request.partition_key:
                key = f", consumer key {escape(request.partition_key)}"
            generation = f", generation {request.generation}"
        console.print(
            f"launched by the trigger of flow {escape(launch.flow)}: request {launch.request_id}{key}{generation}, "
            f"try {launch.attempt}{follows}",
            highlight=False,
        )


@runs.command("show")
@click.argument("run_id", type=STORABLE_TEXT)
@store_option
@json_option
@handles_errors
def show_run(run_id: str, store_url: str | None, as_json: bool) -> None:
    """One run: status, timing and every task's outcome (RUN_ID or a unique prefix)."""
    with reading_store(store_url) as store:
        if store is None:
            raise no_run_store_error(run_id, store_url)
        view = RunView.read(store, run_id)
    if as_json:
        emit_document("run", view.body())
        return
    run, record, launch, request = view.run, view.record, view.launch, view.request
    console = cli_console()
    console.print(
        f"run {run.run_id}: {_styled(run.status)}, started {run.header.started_at:%Y-%m-%d %H:%M:%S}, "
        f"duration {_seconds(run.duration)}",
        highlight=False,
    )
    selection = record["selection"]
    console.print(
        f"targets: {', '.join(run.header.targets)}; selection: {selection['kind']}"
        f" ({selection['domain'] or 'unpartitioned'}, "
        f"{'keys discovered at run time' if selection['key_count'] is None else str(selection['key_count']) + ' keys'})",
        highlight=False,
    )
    _print_launch(console, run, launch, request)
    _print_cancel_request(console, run)
    table = Table(title="tasks", title_justify="left")
    columns = ("asset", "status", "success", "failed", "skipped", "cancelled", "unfinished", "not started")
    for column in (*columns, "materialized"):
        table.add_column(column)
    planned = {task["name"]: task["attempt_count"] for task in run.plan["tasks"]}
    for task in record["tasks"]:
        counts = task["counts"]
        unfinished = counts.get("running", 0) + counts.get("interrupted", 0)
        materialized = sum(1 for attempt in task["attempts"] if attempt.get("resolution") == "materialized")
        never, not_started = _not_started(planned.get(task["asset"]), task["attempts"], run.status)
        table.add_row(
            task["asset"],
            _styled(task["status"]),
            *(str(counts.get(name, 0)) for name in ("success", "failed", "skipped")),
            str(counts.get("cancelled", 0) - never),  # cut short; those that never began are not started
            str(unfinished),
            not_started,
            str(materialized),
        )
    print_table(console, table)
    _print_failures(console, record)
    if run.record_partition_keys:
        _print_unsuccessful_keys(console, record)


def _print_cancel_request(console: Console, run: StoredRun) -> None:
    """That a running run was asked to cancel (``partita runs cancel``), and when."""
    if run.cancel_requested_at is not None and run.status == "running":
        asked = dt.datetime.fromtimestamp(run.cancel_requested_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        console.print(f"cancel requested at {asked} UTC: the process running it is cancelling it", highlight=False)


def _print_failures(console: Console, record: dict[str, Any]) -> None:
    """Each asset's first failure; with recorded keys, the key it failed on."""
    for task in record["tasks"]:
        for attempt in task["attempts"]:
            if attempt["failure"] is not None:
                failure = attempt["failure"]
                key = attempt.get("partition_key")
                where = f"attempt {attempt['index']}" if key is None else f"{escape(key)} (attempt {attempt['index']})"
                console.print(
                    f"[red]{escape(task['asset'])}[/] {where}: {escape(failure['type'])}: {escape(failure['message'])}",
                    highlight=False,
                )
                break


def _print_unsuccessful_keys(console: Console, record: dict[str, Any]) -> None:
    """The failed and skipped keys of each asset (only a run that recorded keys has them)."""
    for task in record["tasks"]:
        for status in ("failed", "skipped"):
            keys = [a["partition_key"] for a in task["attempts"] if a["status"] == status and a.get("partition_key")]
            if keys:
                console.print(f"{escape(task['asset'])} {status}: {escape(', '.join(keys))}", highlight=False)


@runs.command("compare")
@click.argument("first", type=STORABLE_TEXT)
@click.argument("second", type=STORABLE_TEXT)
@store_option
@json_option
@handles_errors
def compare(first: str, second: str, store_url: str | None, as_json: bool) -> None:
    """Status and duration per asset in two runs, and what changed."""
    with reading_store(store_url) as store:
        if store is None:
            raise no_run_store_error(first, store_url)
        comparison = compare_runs(store, first, second)
    if as_json:
        emit_document("runs-compare", comparison)
        return
    console = cli_console()
    a, b = comparison["a"], comparison["b"]
    console.print(
        f"A {a['run_id']} ({_styled(a['status'])}, {_seconds(a['duration_seconds'])})  vs  "
        f"B {b['run_id']} ({_styled(b['status'])}, {_seconds(b['duration_seconds'])})",
        highlight=False,
    )
    table = Table(title="per asset", title_justify="left")
    for column in ("asset", "A status", "B status", "A duration", "B duration", "changes"):
        table.add_column(column)
    for row in comparison["assets"]:
        left, right = row["a"] or {}, row["b"] or {}
        table.add_row(
            row["asset"],
            _styled(left["status"]) if left else "-",
            _styled(right["status"]) if right else "-",
            _seconds(left.get("duration_seconds")),
            _seconds(right.get("duration_seconds")),
            escape("; ".join(row["changes"])) or "unchanged",
        )
    print_table(console, table)


runs.add_command(runs_logs)
runs.add_command(cancel)
