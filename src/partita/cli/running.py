"""Running an approved plan from the command line: progress, live log lines, interruption, the report.

Apart from the commands because ``run`` and its backfills share it: the
plan is already approved here, and what is left is how the run is shown on
the terminal and how it ends (exit codes 1, 130 and 143).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from partita.cli.attempt_logs import LiveLogLines, Verbosity, with_capture_choice
from partita.cli.common import EXIT_INTERRUPTED, EXIT_TERMINATED, emit_document, project_config
from partita.cli.progress import ProgressDisplay, ResultCapture
from partita.cli.render import render_result
from partita.cli.signals import Termination, cancel_on_sigterm
from partita.cli.tables import cli_console
from partita.definitions.launch import LaunchKind
from partita.flow import Flow
from partita.planning.plan import FlowPlan
from partita.results.model import RunResult, RunStatus
from partita.store import Store

__all__ = ["report_result", "run_recorded"]


def run_recorded(
    flow: Flow,
    flow_plan: FlowPlan,
    store: Store | None,
    err: Console,
    record_partition_keys: bool | None,
    capture_output: bool | None,
    verbosity: Verbosity,
    as_json: bool,
) -> RunResult:
    """Run the approved plan into ``store`` (None: none), with progress and live log lines on stderr."""
    capture = ResultCapture()
    observers: list[Any] = [capture, LiveLogLines(err, verbosity)]
    display = ProgressDisplay(err) if not as_json and err.is_terminal else None
    if display is not None:
        observers.append(display)
    if record_partition_keys is None:
        record_partition_keys = bool(project_config().record_partition_keys)
    recorded = with_capture_choice(
        flow.with_store(store if store is not None else False, record_partition_keys=record_partition_keys),
        capture_output,
    )
    with verbosity.applied():
        return _execute(recorded, flow_plan, observers, display, capture, err, as_json)


def _execute(
    flow: Flow,
    flow_plan: FlowPlan,
    observers: list[Any],
    display: ProgressDisplay | None,
    capture: ResultCapture,
    err: Console,
    as_json: bool,
) -> RunResult:
    termination = Termination()
    try:
        with display if display is not None else contextlib.nullcontext():
            # SIGINT: asyncio.run cancels the run, then raises KeyboardInterrupt.
            # SIGTERM: cancel_on_sigterm cancels it, and CancelledError comes out.
            running = flow.run_async(flow_plan, observers=observers, launched_by=LaunchKind.CLI)
            result = asyncio.run(cancel_on_sigterm(running, termination))
        if result.status is RunStatus.CANCELLED:
            # Asked through the store (`partita runs cancel`): reported and exited like Ctrl-C.
            err.print("[magenta]Cancelled on request:[/] no new work was admitted; unfinished attempts are cancelled.")
        return result
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    result = capture.result
    cause = "Terminated" if termination.received else "Interrupted"
    err.print(f"[magenta]{cause}:[/] no new work was admitted; unfinished attempts are cancelled.")
    if result is not None:
        report_result(result, flow_plan, as_json)
    sys.exit(EXIT_TERMINATED if termination.received else EXIT_INTERRUPTED)


def report_result(result: RunResult, flow_plan: FlowPlan, as_json: bool) -> None:
    if as_json:
        emit_document("run-result", {"plan": flow_plan.to_dict(), "result": result.to_record(version=1)})
    else:
        render_result(cli_console(), result)
    if result.events_error is not None:
        cli_console(stderr=True).print(
            "[yellow]warning:[/] the events this run published could not be read back "
            f"({escape(result.events_error.type)}); they are stored: see partita events list",
            highlight=False,
        )
