"""``partita serve``, ``partita trigger --once``, ``partita flows pause/resume`` (SPEC §12)."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from partita.automation.daemon import TriggerDaemon
from partita.automation.logs import LogFormat, daemon_logging
from partita.cli.attempt_logs import Verbosity, log_options, with_capture_choice
from partita.cli.common import (
    EXIT_ASSET_FAILED,
    STORABLE_TEXT,
    daemon_executor,
    emit_document,
    executor_option,
    handles_errors,
    json_option,
    opened_store,
    preview_store,
    reading_store,
    store_option,
    unexpected_error,
    with_executor_choice,
)
from partita.cli.failures import render_failures
from partita.documents.pending import pending_body
from partita.entry import load_trigger_flows
from partita.errors import ConfigurationError, PartitaError, StoreError
from partita.execution.log_capture import ASSET_LOGGER
from partita.store.triggers import TriggerStore

log = logging.getLogger("partita.cli")


def _log_format_option(command: Any) -> Any:
    return click.option(
        "--log-format", type=click.Choice([f.value for f in LogFormat]), default=LogFormat.TEXT.value,
        show_default=True, help="Log lines on stderr: text, or one JSON object per line.",
    )(command)


def _shows(verbosity: Verbosity) -> Callable[[logging.LogRecord], bool]:
    """Asset bodies' records at or above the chosen level; the daemon's own lines always."""
    threshold = verbosity.value

    def shows(record: logging.LogRecord) -> bool:
        return record.levelno >= threshold or not record.name.startswith(ASSET_LOGGER)

    return shows


@contextlib.contextmanager
def _daemon_output(
    log_format: LogFormat, as_json: bool = False, verbosity: Verbosity = Verbosity.NORMAL
) -> Iterator[None]:
    """Log to stderr in ``log_format``; in JSON, a command's error is one JSON line too (then its exit code).

    Asset bodies' records reach the same lines, named by asset and key (their ``asset`` and ``partition_key``).
    """
    with verbosity.applied(), daemon_logging(log_format) as handler:
        handler.addFilter(_shows(verbosity))
        if log_format is LogFormat.TEXT:
            yield  # handles_errors reports errors as text
            return
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - reported as one JSON line, never a traceback
            error = exc if isinstance(exc, PartitaError) else unexpected_error(exc)
            log.error("%s", error, extra={"status": "error"})
            if as_json:
                emit_document(
                    "error",
                    {"error": {"type": type(error).__name__, "message": str(error), "exit_code": error.exit_code}},
                )
            sys.exit(error.exit_code)


def _announcer(log_format: LogFormat) -> Callable[[str], None] | None:
    return None if log_format is LogFormat.TEXT else log.info


@click.command()
@click.argument("entry")
@store_option
@click.option(
    "--max-in-flight", type=click.IntRange(min=1), default=4, show_default=True, help="Consumer runs at once."
)
@click.option(
    "--poll-interval", type=click.FloatRange(min=0.01), default=0.1, show_default=True, help="Seconds between passes."
)
@click.option(
    "--no-listen",
    is_flag=True,
    help="On PostgreSQL, poll only (for connection poolers that do not pass LISTEN/NOTIFY through).",
)
@_log_format_option
@executor_option
@log_options
@handles_errors
def serve(
    entry: str,
    store_url: str | None,
    max_in_flight: int,
    poll_interval: float,
    no_listen: bool,
    executor: str | None,
    log_format: str,
    verbose: bool,
    quiet: bool,
    capture_output: bool | None,
) -> None:
    """Process ENTRY's triggers continuously until SIGTERM or SIGINT (Ctrl-C).

    Logs one line per consumer run start and one per end, with its outcome,
    and the consumer runs' asset log lines (INFO and up; -v, -q change it).
    """
    chosen = LogFormat(log_format)
    with _daemon_output(chosen, verbosity=Verbosity.of(verbose, quiet)), daemon_executor(executor) as shared:
        flows = [
            with_executor_choice(with_capture_choice(flow, capture_output), shared)
            for flow in load_trigger_flows(entry)
        ]
        with opened_store(store_url, False, announce=_announcer(chosen)) as store:
            assert store is not None
            daemon = TriggerDaemon(
                flows, store, max_in_flight=max_in_flight, poll_interval=poll_interval, listen=not no_listen
            )

            def stop(signum: int, _frame: Any) -> None:
                daemon.stop()

            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
            daemon.serve()


@click.command()
@click.argument("entry")
@click.option("--once", is_flag=True, required=True, help="Process what is pending now, then exit.")
@store_option
@click.option(
    "--max-in-flight", type=click.IntRange(min=1), default=4, show_default=True, help="Consumer runs at once."
)
@_log_format_option
@executor_option
@log_options
@json_option
@handles_errors
def trigger(
    entry: str,
    once: bool,
    store_url: str | None,
    max_in_flight: int,
    executor: str | None,
    log_format: str,
    verbose: bool,
    quiet: bool,
    capture_output: bool | None,
    as_json: bool,
) -> None:
    """Evaluate ENTRY's triggers once and run the consumer runs that are due.

    Exits 1 when a consumer run failed; 2 or 4 (the gravest) when a flow's
    trigger failed or a claimed run could not start.
    """
    chosen = LogFormat(log_format)
    with _daemon_output(chosen, as_json, Verbosity.of(verbose, quiet)), daemon_executor(executor) as shared:
        flows = [
            with_executor_choice(with_capture_choice(flow, capture_output), shared)
            for flow in load_trigger_flows(entry)
        ]
        with opened_store(store_url, False, announce=_announcer(chosen)) as store:
            assert store is not None
            daemon = TriggerDaemon(flows, store, max_in_flight=max_in_flight)
            started = daemon.run_once()
        codes = _report_pass(daemon, started, chosen, as_json)
    if codes:
        # The other flows were served; the exit code still says what could not be (the gravest code).
        sys.exit(max(codes))


def _report_pass(daemon: TriggerDaemon, started: int, log_format: LogFormat, as_json: bool) -> list[int]:
    """Print the pass's outcome; the exit codes it calls for (1 a consumer run failed, 2/4 see below)."""
    unstarted = daemon.unstarted_runs
    failing = [{"flow": name, "error": failure.reason} for name, failure in daemon.failing.items()]
    succeeded, failed = daemon.succeeded_runs, daemon.failed_runs
    if as_json:
        emit_document(
            "trigger-pass",
            {
                "started_runs": started, "succeeded_runs": succeeded, "failed_runs": failed,
                "unstarted_runs": unstarted, "failing": failing,
            },
        )  # fmt: skip
    else:
        out = Console()
        out.print(
            f"started {started} consumer run{'s' if started != 1 else ''}: {succeeded} succeeded, {failed} failed",
            highlight=False,
        )
        for flow, result in daemon.failed_results:  # the live results hold the keys the store may not record
            out.print(f"consumer run {result.run_id} of flow {escape(flow)}: {result.status.value}", highlight=False)
            render_failures(out, result)
    problems = [f"flow {failure['flow']} failing: {failure['error']}" for failure in failing]
    codes = [failure.exit_code for failure in daemon.failing.values()]
    if unstarted:
        problems.append(
            f"{unstarted} consumer run{'s' if unstarted != 1 else ''} could not start; "
            "a start the store refused stays pending and is retried by a later pass (see the messages above)"
        )
        codes.append(StoreError.exit_code)
    for problem in problems:  # the document, if any, already is the one on stdout: report on stderr
        if log_format is LogFormat.JSON:
            log.error("%s", problem)
        else:
            Console(stderr=True).print(f"[bold red]error:[/] {escape(problem)}", highlight=False, soft_wrap=True)
    if failed:
        codes.append(EXIT_ASSET_FAILED)  # below 2 and 4: a flow or the store that failed is the graver news
    return codes


def pending_document(entry: str, store_url: str | None) -> dict[str, Any]:
    """What `plan --pending` shows: due requests and waiting keys, without starting or recording anything."""
    flows = load_trigger_flows(entry)
    with preview_store(store_url) as store:
        return pending_body(flows, store, time.time())


def progress_phrase(entry: dict[str, Any]) -> str:
    """``waiting 2026-10-25: 1 of 25 upstream keys`` (with a minimum: ``1 of 3 needed (24 upstream keys in the window)``)."""
    present, required, listed = entry["present"], entry["required"], entry["upstream_keys"]
    noun = "upstream key" if listed == 1 else "upstream keys"
    if required == listed:
        return f"waiting {entry['partition_key']}: {present} of {listed} {noun}"
    return f"waiting {entry['partition_key']}: {present} of {required} needed ({listed} {noun} in the window)"


#: Roll-up progress lines per flow in `plan --pending`; the JSON document lists them all.
PROGRESS_LINES_PER_FLOW = 20


def render_pending(document: dict[str, Any]) -> None:
    console = Console()
    table = Table(title="pending consumer runs", title_justify="left")
    for column in ("flow", "state", "would start", "waiting (incomplete)", "ignored events"):
        table.add_column(column)
    failing = []
    for flow in document["flows"]:
        if flow["error"] is not None:
            failing.append(flow)
        table.add_row(
            escape(flow["flow"]),
            "failing" if flow["error"] is not None else "paused" if flow["paused"] else "active",
            escape(", ".join(flow["would_start"])) or "-",
            escape(", ".join(flow["waiting"])) or "-",
            str(len(flow["rejected_events"])),
        )
    console.print(table)
    # Requests that need attention, one line each (a table column would not fit a narrow terminal).
    for flow in document["flows"]:
        name = escape(flow["flow"])
        for follow_up in flow["follow_ups"]:
            console.print(
                f"follow-up: flow {name}, key {escape(follow_up['partition_key'])}: run "
                f"{follow_up['interrupted_run']} was interrupted; try {follow_up['try']} would start",
                highlight=False,
            )
        for retrying in flow["retrying"]:
            console.print(
                f"retrying: flow {name}, key {escape(retrying['partition_key'])}: the start failed "
                f"{retrying['start_failures']} time(s), next try at {retrying['retry_at']}: "
                f"{escape(retrying['error'] or 'no reason recorded')}",
                highlight=False,
            )
        shown = flow["waiting_progress"][:PROGRESS_LINES_PER_FLOW]
        for progress in shown:
            console.print(f"flow {name}: {escape(progress_phrase(progress))}", highlight=False, soft_wrap=True)
        if len(flow["waiting_progress"]) > len(shown):
            more = len(flow["waiting_progress"]) - len(shown)
            console.print(f"flow {name}: ... and {more} more waiting keys (see --json)", highlight=False)
        for abandoned in flow["abandoned"]:
            console.print(
                f"abandoned: flow {name}, key {escape(abandoned['partition_key'])}: "
                f"{escape(abandoned['error'] or 'no reason recorded')}",
                highlight=False,
            )
    for flow in failing:
        console.print(f"flow {escape(flow['flow'])} failing: {escape(flow['error'])}", highlight=False, soft_wrap=True)


@click.group()
def flows() -> None:
    """Pause and resume triggered flows (a paused flow starts nothing)."""


def _set_paused(name: str, entry: str | None, store_url: str | None, paused: bool, as_json: bool) -> None:
    if not name:
        raise ConfigurationError(
            "flow NAME is empty; pass the triggered flow's name= (see partita plan ENTRY --pending)"
        )
    if entry is not None:
        names = [flow.name for flow in load_trigger_flows(entry)]
        if name not in names:
            raise ConfigurationError(
                f"entry {entry!r} defines no triggered flow named {name!r}; its triggered flows are {', '.join(names)}"
            )
    # Without ENTRY the name must already be known to the store; nothing is created to find out.
    store_context = opened_store(store_url, False) if entry is not None else reading_store(store_url)
    with store_context as store:
        triggers = None if store is None else TriggerStore(store)
        if triggers is None or (entry is None and not triggers.knows_flow(name)):
            raise ConfigurationError(
                f"no triggered flow named {name!r} is known to the store (none was paused, evaluated or run there); "
                "pass --entry ENTRY to check the name against the entry's flows"
            )
        triggers.set_paused(name, paused, time.time())
        # The document reports the state read back from the store, not the request.
        now_paused = triggers.is_paused(name)
    if as_json:
        emit_document("flow-state", {"flow": name, "paused": now_paused})
        return
    Console().print(f"flow {escape(name)} {'paused' if now_paused else 'resumed'}", highlight=False)


def _entry_option(command: Any) -> Any:
    return click.option(
        "--entry", default=None, metavar="ENTRY",
        help="Check NAME against ENTRY's triggered flows (needed before a daemon has seen the flow).",
    )(command)


@flows.command()
@click.argument("name", type=STORABLE_TEXT)
@_entry_option
@store_option
@json_option
@handles_errors
def pause(name: str, entry: str | None, store_url: str | None, as_json: bool) -> None:
    """Pause the triggered flow NAME (a name known to the store, or one of --entry's flows)."""
    _set_paused(name, entry, store_url, True, as_json)


@flows.command()
@click.argument("name", type=STORABLE_TEXT)
@_entry_option
@store_option
@json_option
@handles_errors
def resume(name: str, entry: str | None, store_url: str | None, as_json: bool) -> None:
    """Resume the triggered flow NAME (a name known to the store, or one of --entry's flows)."""
    _set_paused(name, entry, store_url, False, as_json)
