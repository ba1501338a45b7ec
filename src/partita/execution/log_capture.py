"""Routing a body's log records and output to its attempt's log.

The attempt whose body runs in this thread or task names its log: a sync
body's worker thread activates the attempt's `AttemptScope` (its log is made
at the first line), and the body wrappers here set a context variable around
async bodies and bodies in worker processes. Several bodies at once thus
each keep their own lines. One handler on the ``partita.asset`` logger
finds the log (`current_log`); records logged outside any attempt are left
to the user's handlers, untouched. Handlers the user attached still get
every record: the handler only adds a copy.

With output capture, ``sys.stdout`` and ``sys.stderr`` are wrapped while a
capturing run runs; a write from a body is kept as lines of its attempt, any
other write goes to the real stream.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import pickle
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from partita.execution.attempt_logs import OUTSIDE_ATTEMPTS, AttemptLog, RunLogs, current_attempt_log, current_log
from partita.execution.worker_async import run_coroutine
from partita.results.logs import LogCapture, LogRow, LogStream

__all__ = ["RemoteOutcome", "install", "uninstall", "wrap_body"]

ASSET_LOGGER = "partita.asset"
#: The same object for the life of the process (`logging.getLogger`), which every run's start configures.
_asset_logger = logging.getLogger(ASSET_LOGGER)

_format_exception = logging.Formatter().formatException
_lock = threading.Lock()
_LOG = LogStream.LOG.value
_output_users = 0


def _message(record: logging.LogRecord) -> str:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string must not fail the body
        message = f"{record.msg!r} {record.args!r}"
    if record.exc_info:
        message = f"{message}\n{_format_exception(record.exc_info)}"
    elif record.exc_text:
        message = f"{message}\n{record.exc_text}"
    if record.stack_info:
        message = f"{message}\n{record.stack_info}"
    return message


def _handled_elsewhere(logger: logging.Logger | None) -> bool:
    """Whether a handler besides ours sees records of ``logger`` (else `logging.lastResort` would)."""
    while logger is not None:
        for handler in logger.handlers:  # a loop, not any() over a generator: every run's start asks
            if handler is not _handler:
                return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


class _AttemptHandler(logging.Handler):
    """Copies each record of a running body into its attempt's log."""

    def handle(self, record: logging.LogRecord) -> bool:  # type: ignore[override]
        # No handler lock: an attempt's log has one writer, the body's own thread or task.
        log = current_log()
        if log is not None:
            # Named for handlers further up (the daemon's lines print them): which attempt logged this.
            fields = record.__dict__
            if log.run.annotate and "asset" not in fields:  # a value the caller passed with extra= wins
                fields["asset"] = log.asset
                fields["partition_key"] = log.key_text
            if record.exc_info or record.exc_text or record.stack_info or not isinstance(record.msg, str):
                message = _message(record)
            else:  # the common record, formatted inline: this runs once per logged line
                try:
                    message = record.msg % record.args if record.args else record.msg
                except Exception:  # noqa: BLE001 - a bad format string must not fail the body
                    message = _message(record)
            log.add(_LOG, record.levelno, record.name, message, record.created)
        last_resort = logging.lastResort
        if (
            last_resort is not None
            and record.levelno >= last_resort.level
            and (log is None or log.echo_warnings)
            and not _handled_elsewhere(logging.getLogger(record.name))
        ):
            # Without capture, this record would have reached stderr bare; it still does,
            # to the real stderr (never kept as the body's own output).
            token = current_attempt_log.set(OUTSIDE_ATTEMPTS)
            try:
                last_resort.handle(record)
            finally:
                current_attempt_log.reset(token)
        return log is not None

    def emit(self, record: logging.LogRecord) -> None:  # pragma: no cover - handle() does the work
        self.handle(record)


_handler = _AttemptHandler()


class _RoutedStream:
    """``sys.stdout``/``sys.stderr`` while a run captures output: a body's writes are kept, others pass."""

    def __init__(self, original: TextIO, stream: str) -> None:
        self._original = original
        self._stream = stream

    def write(self, text: str) -> int:
        log = current_log()
        if log is None or not log.output:
            return self._original.write(text)
        log.write(self._stream, text, time.time())
        return len(text)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


def _set_level() -> None:
    logger = _asset_logger
    if logger.level == logging.NOTSET:
        # INFO is kept (and shown) by default; a level the user set wins, DEBUG included.
        logger.setLevel(logging.INFO)
    if _handler not in logger.handlers:
        logger.addHandler(_handler)


def install(capture: LogCapture) -> bool:
    """Start routing for one run (the handler stays; output wrapping is counted per capturing run).

    Returns whether another handler sees the bodies' records (then they are named by asset and key).
    """
    global _output_users
    with _lock:
        _set_level()
        elsewhere = _handled_elsewhere(_asset_logger)
        if capture.output:
            _output_users += 1
            if _output_users == 1:
                sys.stdout = _RoutedStream(sys.stdout, LogStream.STDOUT.value)  # type: ignore[assignment]
                sys.stderr = _RoutedStream(sys.stderr, LogStream.STDERR.value)  # type: ignore[assignment]
    return elsewhere


def uninstall(capture: LogCapture) -> None:
    """End one run's routing: the last capturing run puts the real streams back."""
    global _output_users
    if not capture.output:
        return
    with _lock:
        _output_users -= 1
        if _output_users == 0:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if isinstance(stream, _RoutedStream):
                    setattr(sys, name, stream._original)


def _capture_sync(log: AttemptLog, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    token = current_attempt_log.set(log)
    try:
        return fn(**kwargs)
    finally:
        current_attempt_log.reset(token)
        log.end_invocation(time.time)


async def _capture_async(log: AttemptLog, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    token = current_attempt_log.set(log)  # the task's own context: other tasks keep theirs
    try:
        return await fn(**kwargs)
    finally:
        current_attempt_log.reset(token)
        log.end_invocation(time.time)


@dataclass(frozen=True, slots=True)
class RemoteOutcome:
    """A worker process's outcome with the lines its body logged: they come back with the completion."""

    value: Any
    raised: bool
    lines: tuple[LogRow, ...]


@dataclass(frozen=True, slots=True)
class _RemoteScope:
    asset: str
    index: int
    invocation: int
    capture: LogCapture
    echo_warnings: bool
    #: The key's text for naming records in the worker (None unless another handler sees them).
    key_text: str | None = None


def _capture_remote(scope: _RemoteScope, fn: Callable[..., Any], /, **kwargs: Any) -> RemoteOutcome:
    """In a worker process: run the body with a log of its own and return its lines with the outcome."""
    local = RunLogs(scope.capture)
    local.echo_warnings = scope.echo_warnings
    key_text = scope.key_text
    log = local.for_attempt(scope.asset, scope.index, None, scope.invocation, lambda _: key_text)  # type: ignore[arg-type,return-value]
    local.annotate = install(scope.capture)
    token = current_attempt_log.set(log)
    try:
        value = fn(**kwargs)
        if asyncio.iscoroutine(value):
            value = run_coroutine(value)
        raised = False
    except BaseException as exc:  # noqa: BLE001 - returned as the attempt's failure, with the lines
        try:
            pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - the worker reports an exception it cannot send, as it always has
            raise exc from None
        value, raised = exc, True
    finally:
        current_attempt_log.reset(token)
        log.end_invocation(time.time)
        uninstall(scope.capture)
    return RemoteOutcome(value, raised, log.lines())


def wrap_body(
    logs: RunLogs, asset: str, index: int, partition_key: Any, invocation: int, fn: Callable[..., Any], *,
    is_async: bool, remote: bool, format_key: Callable[[Any], str] | None = None,
) -> Callable[..., Any]:
    """``fn`` run inside its attempt's log scope: in this process, or in a worker process (``remote``).

    A sync body on partita's own worker threads needs none: the worker activates its `AttemptScope`.
    """
    log = logs.for_attempt(asset, index, partition_key, invocation, format_key)
    if remote:
        key_text = log.key_text if logs.annotate else None
        scope = _RemoteScope(asset, index, invocation, logs.capture, logs.echo_warnings, key_text)
        return functools.partial(_capture_remote, scope, fn)
    return functools.partial(_capture_async if is_async else _capture_sync, log, fn)
