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
    """One attempt's lines across its invocations: the first ``head``, the last ``tail``, and a count between.

    Built for every attempt that runs a body, so its construction is kept to
    a few attribute stores: the bounds are read from the run, and the tail
    window and partial output lines are made only when needed.
    """

    __slots__ = (
        "asset", "index", "partition_key", "invocation", "seq", "head", "tail", "cut", "first_cut_at",
        "run", "_format", "_key_text", "_partial",
    )

    def __init__(
        self, run: RunLogs, asset: str, index: int, partition_key: Any, format_key: Callable[[Any], str] | None
    ) -> None:
        self.asset = asset
        self.index = index
        self.partition_key = partition_key
        self.invocation = 1
        self.seq = 0
        self.head: tuple[LogLine, ...] = ()
        self.tail: collections.deque[LogLine] | None = None
        self.cut = 0
        self.run = run
        self._format = format_key
        self._key_text: str | None = None
        self._partial: dict[str, str] | None = None

    @property
    def has_partial_output(self) -> bool:
        """Whether output without its final newline waits for the invocation's end."""
        return bool(self._partial)

    @property
    def output(self) -> bool:
        """Whether the body's stdout and stderr lines are kept (else they pass through)."""
        return self.run.capture.output

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
        return self.run.echo_warnings

    def add(self, stream: str, level: int | None, logger: str | None, message: str, at: float) -> None:
        run = self.run
        if len(message) > run.line_chars:
            message = _shortened(message, run.line_chars)
        seq = self.seq = self.seq + 1
        if seq == 1:  # the attempt's first line: from now on the run keeps its log
            run._attempts.setdefault((self.asset, self.index), self)
        line = LogLine(self.asset, self.index, self.invocation, seq, at, stream, level, logger, message)
        if seq <= run.head:
            # A tuple, not a list: once its lines are, it is no object for the garbage collector to visit.
            self.head += (line,)
        else:
            tail = self.tail
            if tail is None:
                tail = self.tail = collections.deque(maxlen=run.tail or None)
            if tail.maxlen is None:  # no tail window: every line after the head is cut
                self._count_cut(line)
            else:
                if len(tail) == tail.maxlen:
                    self._count_cut(tail[0])
                tail.append(line)
        pending = run.pending
        if pending is not None:
            pending.append(line)
        if run.listeners:
            run.show(self, line)

    def _count_cut(self, line: LogLine) -> None:
        if not self.cut:
            self.first_cut_at = line.at
            self.run.any_cut = True
        self.cut += 1

    def skip(self, count: int, at: float) -> None:
        """``count`` lines were cut elsewhere (a worker process): they, and the tail so far, are cut here."""
        tail = self.tail or ()
        if not self.cut:
            self.first_cut_at = tail[0].at if tail else at
            self.run.any_cut = True
        self.cut += len(tail) + count
        if self.tail is not None:
            self.tail.clear()
        self.seq += count

    def write(self, stream: str, text: str, at: float) -> None:
        """Output text: each complete line is kept; a partial one waits for its end or the invocation's."""
        partial = self._partial
        if partial is None:
            partial = self._partial = {}
        pending = partial.pop(stream, "") + text
        *lines, rest = pending.split("\n")
        for line in lines:
            self.add(stream, None, None, line, at)
        if rest:
            partial[stream] = rest

    def end_invocation(self, at: float) -> None:
        """Keep what an invocation wrote without a final newline."""
        partial = self._partial
        while partial:
            stream, rest = partial.popitem()
            self.add(stream, None, None, rest, at)

    def marker(self) -> LogLine | None:
        """The cut marker, numbered as the first line it replaces; None while nothing is cut."""
        if not self.cut:
            return None
        lines = "line" if self.cut == 1 else "lines"
        return LogLine(
            self.asset, self.index, self.invocation, self.run.head + 1, self.first_cut_at, LogStream.CUT.value, None,
            None, f"{self.cut} {lines} cut",
        )

    def lines(self) -> tuple[LogLine, ...]:
        if self.tail is None:
            return self.head
        marker = self.marker()
        return (*self.head, *(() if marker is None else (marker,)), *self.tail)


class RunLogs:
    """Every attempt log of one run, the listeners that see lines live, and the lines the store has not got yet."""

    __slots__ = (
        "capture", "head", "tail", "line_chars", "listeners", "pending", "echo_warnings", "any_cut", "annotate",
        "_attempts", "_stored_cuts",
    )

    def __init__(self, capture: LogCapture, listeners: Iterable[LogListener] = ()) -> None:
        self.capture = capture
        # The bounds, read by every line: plain attributes, not through the capture.
        self.head, self.tail, self.line_chars = capture.head, capture.tail, capture.line_chars
        self.listeners = tuple(listeners)
        #: Lines a journal has not drained yet; None when nothing drains them (no store).
        self.pending: collections.deque[LogLine] | None = None
        #: With no listener, WARNING and up still reach stderr when nothing else handles them (as before capture).
        self.echo_warnings = not self.listeners
        #: Whether any attempt has cut lines: until then a drain keeps every line as it is.
        self.any_cut = False
        #: Whether records are named by asset and key for other handlers (set when the run starts:
        #: only when another handler sees them, since the key's text costs a format per attempt).
        self.annotate = False
        self._attempts: dict[tuple[str, int], AttemptLog] = {}
        self._stored_cuts: dict[tuple[str, int], int] = {}

    def for_attempt(
        self,
        asset: str,
        index: int,
        partition_key: Any,
        invocation: int,
        format_key: Callable[[Any], str] | None = None,
    ) -> AttemptLog:
        """The attempt's log (one per attempt, shared by its retries), set to this invocation.

        The run keeps a log only from its first line on: most bodies log
        nothing, and a log kept per attempt would double a run's memory.
        """
        log = self._attempts.get((asset, index))
        if log is None:
            log = AttemptLog(self, asset, index, partition_key, format_key)
        log.invocation = invocation
        return log

    def keep_for_store(self) -> None:
        """Queue lines for a journal to drain (without one, lines stay in memory only)."""
        if self.pending is None:
            self.pending = collections.deque()

    def show(self, log: AttemptLog, line: LogLine) -> None:
        """Hand a kept line to the listeners."""
        if self.listeners:
            # Outside the attempt while showing it: what a listener writes is not the body's output.
            token = current_attempt_log.set(None)
            try:
                for listener in self.listeners:
                    try:
                        listener.on_log(line, log.key_text)
                    except Exception:  # noqa: BLE001 - showing a line must not fail the body that logged it
                        _log.exception("log listener %r raised; the line is kept", listener)
            finally:
                current_attempt_log.reset(token)

    def merge(self, log: AttemptLog, lines: Sequence[LogLine]) -> None:
        """Lines a worker process kept, added to the attempt's log here (numbered and bounded anew)."""
        for line in lines:
            if line.stream == LogStream.CUT:
                log.skip(int(line.message.split(" ", 1)[0]), line.at)
            else:
                log.invocation = line.invocation
                log.add(line.stream, line.level, line.logger, line.message, line.at)
        if log.seq:  # a cut alone (no head kept) registers no line: the log is kept all the same
            self._attempts.setdefault((log.asset, log.index), log)

    def drain(self) -> LogBatch:
        """The lines logged since the last drain that are still kept, and the cuts that grew."""
        pending = self.pending
        if not pending:
            return LogBatch(())
        taken = [pending.popleft() for _ in range(len(pending))]
        if not self.any_cut:
            return LogBatch(taken)
        head = self.head
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
        return {
            key: log.head if log.tail is None else log.lines() for key, log in self._attempts.items() if log.seq
        }
