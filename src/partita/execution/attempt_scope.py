"""The attempt whose sync body runs on a worker thread: its emitter and its log, each made on first use.

A body needs two things bound to its attempt while it runs: the producer
that `partita.emit` and ``context.emit`` publish through, and the log its
records and output go to. Most bodies use neither. For an in-process sync
body one object stands for both: the worker activates it as the thread's
emitter (one context variable), and the attempt's log is made at its first
line. Wrapping each body in a log scope of its own (a wrapper call, a
second context variable and a log object per attempt) cost about 2 µs of
a no-op attempt's 12.

Async bodies, bodies in worker processes and bodies that another executor
runs keep a log scope of their own (`log_capture`): `current_attempt_log`
names their log, and `attempt_logs.current_log` asks it first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from partita.events.emission import Emitter, LazyEmitter
from partita.execution.attempt_logs import AttemptLog, LogScope, RunLogs

__all__ = ["AttemptScope", "key_formatter"]


def key_formatter(definition: Any) -> Callable[[Any], str] | None:
    """How an asset's keys become canonical text (None: unpartitioned)."""
    return None if definition.partition_def is None else definition.partition_def.format_key


class AttemptScope(LazyEmitter, LogScope):
    """An attempt's emitter (made on first emit) and log (made at its first line), for a sync body on a worker."""

    __slots__ = ("_logs", "_opened", "log")

    def __init__(
        self, factory: Callable[..., Emitter], logs: RunLogs, task: Any, key_index: int, invocation: int
    ) -> None:
        # Set here rather than through LazyEmitter's constructor: one call fewer per attempt.
        self._factory = factory
        self._arguments = (task, key_index, invocation)
        self._emitter = None
        self._logs = logs
        #: The logs made for this scope, in the order made (the first is its log); None: the body ended first.
        self._opened: list[AttemptLog | None] = []
        #: The attempt's log once a line was written.
        self.log: AttemptLog | None = None

    def attempt_log(self) -> AttemptLog:
        """The attempt's log, made now if this is its invocation's first line.

        Threads in the body's context (copied) share the log. No lock: with
        one, a worker that lost the processor while holding it stalled every
        other worker's first line (2.5 times slower runs of logging bodies).
        Two threads that make a log at once each append theirs, and both
        take the first: a list's append is atomic, and making one changes
        nothing in the run's logs.
        """
        log = self.log
        if log is None:
            opened = self._opened
            if not opened or (len(opened) == 1 and opened[0] is None):
                opened.append(self._make(ended=bool(opened)))
            # [log, …] (the worker's None may follow it), or [None, log, …] when the body ended first.
            log = self.log = opened[0] if opened[0] is not None else opened[1]
        return log

    def _make(self, ended: bool) -> AttemptLog:
        """The invocation's log; once the body has ended, a log of its own for a thread the body left running.

        The attempt's log may by then be a later invocation's (a retry): a
        late writer must not take it over and number the retry's lines as its own.
        """
        task, key_index, invocation = self._arguments
        key, format_key = task.keys[key_index], key_formatter(task.definition)
        if ended:
            log = AttemptLog(self._logs, task.name, key_index, key, format_key)
            log.invocation = invocation
            return log
        return self._logs.for_attempt(task.name, key_index, key, invocation, format_key)

    def end(self, clock: Callable[[], float]) -> None:
        """The body returned or raised: end its invocation's log, if a line made one."""
        log = self.log
        if log is None:
            self._opened.append(None)
        else:
            log.end_invocation(clock)
