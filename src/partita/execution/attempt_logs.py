"""The attempt logs of one run: each attempt's lines, bounded, and the store's share of them.

An `AttemptLog` is written by its body only (one invocation runs at a time,
on one thread or task), so adding a line takes no lock. Every line also
goes to the run's pending queue in the order it was logged; the journal's
flusher drains that queue (deque operations are atomic) and writes the lines
in the same transaction as the attempts' progress. A line that the tail
window pushed out before it was written is never written; one written and
cut later is deleted by the range the cut marker covers, in the same
transaction that writes the marker.
"""

from __future__ import annotations

import collections
import contextvars
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from partita.results.logs import LogCapture, LogLine, LogStream

__all__ = ["AttemptLog", "LogBatch", "LogCut", "LogListener", "RunLogs", "current_attempt_log"]

_log = logging.getLogger("partita.execution")

#: The attempt whose body runs in this thread or task (set by the body wrappers of `log_capture`).
current_attempt_log: contextvars.ContextVar[AttemptLog | None] = contextvars.ContextVar(
    "partita_attempt_log", default=None
)


@runtime_checkable
class LogListener(Protocol):
    """Sees each line as it is kept (the CLI prints them live); called on the body's thread, so it must be quick.

    ``key_text`` is the attempt's canonical key text (None for an unpartitioned asset).
    """

    def on_log(self, line: LogLine, key_text: str | None) -> None: ...


@dataclass(frozen=True, slots=True)
class LogCut:
    """An attempt's cut so far: lines ``first_seq..last_seq`` are gone; ``marker`` says how many."""

    asset: str
    index: int
    first_seq: int
    last_seq: int
    marker: LogLine


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Lines to insert, and cuts whose range is deleted (and whose marker is inserted) before them."""

    lines: Sequence[LogLine]
    cuts: Sequence[LogCut] = ()

    def __bool__(self) -> bool:
        return bool(self.lines or self.cuts)


def _shortened(message: str, limit: int) -> str:
    cut = len(message) - limit
    return f"{message[:limit]} … [{cut} characters cut]"


class AttemptLog:
    """One attempt's lines across its invocations: the first ``head``, the last ``tail``, and a count between."""

    __slots__ = (
        "asset", "index", "partition_key", "invocation", "_format", "_key_text", "output", "seq", "head", "tail", "cut", "first_cut_at",
        "_run", "_limit", "_head_size", "_partial",
    )

    def __init__(
        self, run: RunLogs, asset: str, index: int, partition_key: Any, format_key: Callable[[Any], str] | None
    ) -> None:
        capture = run.capture
        self.asset = asset
        self.index = index
        self.partition_key = partition_key
        self._format = format_key
        self._key_text: str | None = None
        self.invocation = 1
        #: Whether the body's stdout and stderr lines are kept (else they pass through).
        self.output = capture.output
        self.seq = 0
        self.head: list[LogLine] = []
        self.tail: collections.deque[LogLine] = collections.deque(maxlen=capture.tail or None)
        self.cut = 0
        self.first_cut_at = 0.0
        self._run = run
        self._limit = capture.line_chars
        self._head_size = capture.head
        self._partial: dict[LogStream, str] = {}

    @property
    def key_text(self) -> str | None:
        """The key's canonical text, for showing lines live (None for an unpartitioned asset)."""
        if self._key_text is None and self._format is not None:
            try:
                self._key_text = self._format(self.partition_key)
            except Exception:  # noqa: BLE001 - a key that cannot be shown still has its lines kept
                self._key_text = "?"
        return self._key_text

    @property
    def echo_warnings(self) -> bool:
        return self._run.echo_warnings

    def add(self, stream: LogStream, level: int | None, logger: str | None, message: str, at: float) -> None:
        if len(message) > self._limit:
            message = _shortened(message, self._limit)
        seq = self.seq = self.seq + 1
        line = LogLine(self.asset, self.index, self.invocation, seq, at, stream, level, logger, message)
        if seq <= self._head_size:
            self.head.append(line)
        else:
            tail = self.tail
            if tail.maxlen is None:  # no tail window: every line after the head is cut
                self._count_cut(line)
            else:
                if len(tail) == tail.maxlen:
                    self._count_cut(tail[0])
                tail.append(line)
        self._run.kept(self, line)

    def _count_cut(self, line: LogLine) -> None:
        if not self.cut:
            self.first_cut_at = line.at
        self.cut += 1

    def skip(self, count: int, at: float) -> None:
        """``count`` lines were cut elsewhere (a worker process): they, and the tail so far, are cut here."""
        if not self.cut:
            self.first_cut_at = self.tail[0].at if self.tail else at
        self.cut += len(self.tail) + count
        self.tail.clear()
        self.seq += count

    def write(self, stream: LogStream, text: str, at: float) -> None:
        """Output text: each complete line is kept; a partial one waits for its end or the invocation's."""
        pending = self._partial.pop(stream, "") + text
        *lines, rest = pending.split("\n")
        for line in lines:
            self.add(stream, None, None, line, at)
        if rest:
            self._partial[stream] = rest

    def end_invocation(self, at: float) -> None:
        """Keep what an invocation wrote without a final newline."""
        while self._partial:
            stream, rest = self._partial.popitem()
            self.add(stream, None, None, rest, at)

    def marker(self) -> LogLine | None:
        """The cut marker, numbered as the first line it replaces; None while nothing is cut."""
        if not self.cut:
            return None
        lines = "line" if self.cut == 1 else "lines"
        return LogLine(
            self.asset, self.index, self.invocation, self._head_size + 1, self.first_cut_at, LogStream.CUT, None,
            None, f"{self.cut} {lines} cut",
        )

    def lines(self) -> tuple[LogLine, ...]:
        marker = self.marker()
        return (*self.head, *(() if marker is None else (marker,)), *self.tail)


class RunLogs:
    """Every attempt log of one run, the listeners that see lines live, and the lines the store has not got yet."""

    __slots__ = ("capture", "_attempts", "_listeners", "_pending", "_stored_cuts", "echo_warnings", "_store")

    def __init__(self, capture: LogCapture, listeners: Iterable[LogListener] = (), *, store: bool = False) -> None:
        self.capture = capture
        self._attempts: dict[tuple[str, int], AttemptLog] = {}
        self._listeners = tuple(listeners)
        #: With no listener, WARNING and up still reach stderr when nothing else handles them (as before capture).
        self.echo_warnings = not self._listeners
        self._store = store
        self._pending: collections.deque[LogLine] = collections.deque()
        self._stored_cuts: dict[tuple[str, int], int] = {}

    def for_attempt(
        self,
        asset: str,
        index: int,
        partition_key: Any,
        invocation: int,
        format_key: Callable[[Any], str] | None = None,
    ) -> AttemptLog:
        """The attempt's log (one per attempt, shared by its retries), set to this invocation."""
        log = self._attempts.get((asset, index))
        if log is None:
            log = self._attempts[(asset, index)] = AttemptLog(self, asset, index, partition_key, format_key)
        log.invocation = invocation
        return log

    def keep_for_store(self) -> None:
        """Queue lines for a journal to drain (without one, lines stay in memory only)."""
        self._store = True

    def kept(self, log: AttemptLog, line: LogLine) -> None:
        if self._store:
            self._pending.append(line)
        if self._listeners:
            # Outside the attempt while showing it: what a listener writes is not the body's output.
            token = current_attempt_log.set(None)
            try:
                for listener in self._listeners:
                    try:
                        listener.on_log(line, log.key_text)
                    except Exception:  # noqa: BLE001 - showing a line must not fail the body that logged it
                        _log.exception("log listener %r raised; the line is kept", listener)
            finally:
                current_attempt_log.reset(token)

    def merge(self, asset: str, index: int, lines: Sequence[LogLine]) -> None:
        """Lines a worker process kept, added to the attempt's log here (numbered and bounded anew)."""
        log = self._attempts.get((asset, index))
        if log is None:
            return
        for line in lines:
            if line.stream is LogStream.CUT:
                log.skip(int(line.message.split(" ", 1)[0]), line.at)
            else:
                log.invocation = line.invocation
                log.add(line.stream, line.level, line.logger, line.message, line.at)

    def drain(self) -> LogBatch:
        """The lines logged since the last drain that are still kept, and the cuts that grew."""
        pending = self._pending
        if not pending:
            return LogBatch(())
        taken = [pending.popleft() for _ in range(len(pending))]
        head = self.capture.head
        attempts = self._attempts
        cuts: list[LogCut] = []
        cut_now: dict[tuple[str, int], int] = {}
        for line in taken:
            key = (line.asset, line.index)
            if key not in cut_now:
                log = attempts[key]
                cut_now[key] = count = log.cut
                if count > self._stored_cuts.get(key, 0):
                    self._stored_cuts[key] = count
                    marker = log.marker()
                    assert marker is not None
                    cuts.append(LogCut(line.asset, line.index, head + 1, head + count, marker))
        kept = [line for line in taken if not head < line.seq <= head + cut_now[(line.asset, line.index)]]
        return LogBatch(kept, cuts)

    def snapshot(self) -> dict[tuple[str, int], tuple[LogLine, ...]]:
        """Each attempt's kept lines, for the `RunResult`."""
        return {key: log.lines() for key, log in self._attempts.items() if log.seq}
