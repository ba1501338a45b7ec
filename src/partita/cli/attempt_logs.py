"""Attempt logs on the command line: lines shown live while a run runs, and ``partita runs logs``.

Live lines go to stderr, prefixed by asset and key (``extract[2026-10-03]
INFO loaded 120 rows``), above the progress display on a terminal and as
plain lines in a pipe. ``-v`` shows DEBUG too (and makes bodies' DEBUG
records kept), ``-q`` only WARNING and up; the options belong to the
commands that run flows (``run``, ``trigger``, ``serve``).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from partita.cli.common import (
    EXIT_INTERRUPTED,
    STORABLE_TEXT,
    emit_document,
    handles_errors,
    json_option,
    no_run_store_error,
    project_config,
    reading_store,
    store_option,
)
from partita.cli.tables import cli_console
from partita.documents.attempt_logs import LOG_LEVELS, attempt_logs_body, log_query, partitioned_assets
from partita.errors import ConfigurationError
from partita.execution.events import ExecutionEvent
from partita.execution.log_capture import ASSET_LOGGER
from partita.flow import Flow
from partita.results.logs import LogLine, LogStream
from partita.store import SqlStore
from partita.store.attempt_log_rows import sorted_for_reading
from partita.store.protocol import LogQuery, StoredLogLine

__all__ = ["LiveLogLines", "Verbosity", "log_options", "runs_logs", "with_capture_choice"]

#: How often ``--follow`` asks the store for new lines.
FOLLOW_POLL_SECONDS = 0.2
_STYLE = {logging.WARNING: "yellow", logging.ERROR: "red", logging.CRITICAL: "bold red"}


class Verbosity(enum.Enum):
    """Which lines a command shows live: ``-q`` WARNING and up, default INFO and up, ``-v`` DEBUG too."""

    QUIET = logging.WARNING
    NORMAL = logging.INFO
    VERBOSE = logging.DEBUG

    @classmethod
    def of(cls, verbose: bool, quiet: bool) -> Verbosity:
        if verbose and quiet:
            raise ConfigurationError("-v/--verbose and -q/--quiet cannot be combined; choose one")
        return cls.VERBOSE if verbose else cls.QUIET if quiet else cls.NORMAL

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """With -v, bodies' DEBUG records are made (and kept) too while the block runs, unless the user set a level."""
        logger = logging.getLogger(ASSET_LOGGER)
        previous = logger.level
        if self is Verbosity.VERBOSE and previous in (logging.NOTSET, logging.INFO):
            logger.setLevel(logging.DEBUG)
        try:
            yield
        finally:
            logger.setLevel(previous)


def log_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``-v``/``-q`` and ``--capture-output/--no-capture-output`` for a command that runs flows."""
    options = [
        click.option("--verbose", "-v", is_flag=True, help="Show DEBUG lines of asset bodies too (and keep them)."),
        click.option("--quiet", "-q", is_flag=True, help="Show only WARNING and up of asset bodies' lines."),
        click.option(
            "--capture-output/--no-capture-output", "capture_output", default=None,
            help=(
                "Keep what asset bodies write to stdout and stderr with their attempts (default: the project "
                "configuration's log_capture, else the flow's own choice)."
            ),
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def with_capture_choice(flow: Flow, capture_output: bool | None) -> Flow:
    """The flow with output capture as the flag, else the project configuration, says (else unchanged)."""
    chosen = capture_output if capture_output is not None else project_config().log_capture
    return flow if chosen is None else flow.with_log_capture(chosen)


def _prefix(asset: str, key_text: str | None, index: int, partitioned: bool) -> str:
    if key_text is not None:
        return f"{asset}[{key_text}]"
    return f"{asset}#{index}" if partitioned else asset


def _text(line: LogLine, prefix: str) -> str:
    if line.stream == LogStream.CUT:
        return f"{prefix} … {line.message} …"
    return f"{prefix} {line.level_name} {line.message}"


def _print(console: Console, line: LogLine, prefix: str) -> None:
    text = escape(_text(line, prefix))
    style = _STYLE.get(line.level or 0) if console.is_terminal else None
    console.print(f"[{style}]{text}[/]" if style else text, highlight=False, markup=True)


class LiveLogLines:
    """Prints each kept line at or above the chosen level on stderr while the run runs.

    An execution observer too (it ignores events), so it rides with the
    run's observers; the flow hands it every line as the body logs it.
    """

    def __init__(self, console: Console, verbosity: Verbosity) -> None:
        self._console = console
        self._threshold = verbosity.value

    def on_event(self, event: ExecutionEvent) -> None:
        return None

    def on_log(self, line: LogLine, key_text: str | None) -> None:
        if line.level is not None and line.level < self._threshold:
            return
        _print(self._console, line, _prefix(line.asset, key_text, line.index, key_text is not None))


# -- partita runs logs ------------------------------------------------------------


def _follow(store: SqlStore, run_id: str, query: LogQuery, show: Callable[[Sequence[StoredLogLine]], None]) -> None:
    """Print new lines until the run is no longer running (then once more: its last flush)."""
    last = 0
    while True:
        status = store.run_history.run_status(run_id)
        lines = store.attempt_logs(run_id, LogQuery(**{**_fields(query), "after_id": last}))
        if lines:
            show(lines)
            last = lines[-1].id
        if status != "running":
            return
        if not lines:
            time.sleep(FOLLOW_POLL_SECONDS)


def _fields(query: LogQuery) -> dict[str, Any]:
    return {name: getattr(query, name) for name in ("asset", "partition_key", "min_level", "limit")}


@click.command("logs")
@click.argument("run_id", type=STORABLE_TEXT)
@click.option("--asset", type=STORABLE_TEXT, default=None, help="Only the lines of this asset.")
@click.option(
    "--key", "partition_key", type=STORABLE_TEXT, default=None, metavar="KEY",
    help="Only the lines of this partition key (the run must have recorded keys).",
)
@click.option(
    "--level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default=None,
    help="Only records at or above LEVEL (captured output and cut markers are always shown).",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the run finishes.")
@store_option
@json_option
@handles_errors
def runs_logs(
    run_id: str,
    asset: str | None,
    partition_key: str | None,
    level: str | None,
    follow: bool,
    store_url: str | None,
    as_json: bool,
) -> None:
    """The log lines a run's attempts kept, in the order they were logged (RUN_ID or a unique prefix)."""
    if follow and as_json:
        raise ConfigurationError("--follow and --json cannot be combined: --json prints one document")
    with reading_store(store_url) as store:
        if store is None:
            raise no_run_store_error(run_id, store_url)
        run = store.get_run(run_id)
        query = log_query(run, asset=asset, partition_key=partition_key, level=level)
        partitioned = partitioned_assets(run)
        console = cli_console()

        def show(lines: Sequence[StoredLogLine]) -> None:
            for stored in lines:
                line = stored.line
                _print(console, line, _prefix(line.asset, stored.partition_key, line.index, line.asset in partitioned))

        if follow:
            try:
                _follow(store, run.run_id, query, show)
            except KeyboardInterrupt:
                raise SystemExit(EXIT_INTERRUPTED) from None
            return
        lines = sorted_for_reading(store.attempt_logs(run.run_id, query))
    if as_json:
        emit_document("attempt-logs", attempt_logs_body(run.run_id, lines))
        return
    if not lines:
        filtered = asset is not None or partition_key is not None or level is not None
        cli_console(stderr=True).print(
            f"run {run.run_id} kept no log lines{' that match' if filtered else ''}", highlight=False
        )
        return
    show(lines)
