"""The attempt logs of one run: each attempt's lines, bounded, and the store's share of them.

An `AttemptLog` is written by its body only (one invocation runs at a time,
on one thread or task), so adding a line takes no lock. Every line also
goes to the run's pending queue in the order it was logged; the journal's
flusher drains that queue (deque operations are atomic) and writes the lines
in the same transaction as the attempts' progress. A line that the tail
window pushed out before it was written is never written; one written and
cut later is deleted by the range the cut marker covers, in the same
transaction that writes the marker.

Lines are kept as plain `LogRow` tuples, and an attempt whose invocation
ended with every line in its head is kept as that tuple of lines alone (its
`AttemptLog` is dropped, and rebuilt by a retry): a run keeps no object per
logged line, or per attempt, that the garbage collector must visit again in
each full collection. Those collections, over a heap that grows with the
run, cost more than keeping the line itself.
"""

from __future__ import annotations

import collections
import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from partita.events.active import active_emitter
from partita.results.logs import LogCapture, LogLine, LogRow, LogStream

__all__ = [
    "OUTSIDE_ATTEMPTS", "AttemptLog", "LogBatch", "LogCut", "LogListener", "LogScope", "RunLogs", "current_attempt_log",
    "current_log",
]  # fmt: skip

_log = logging.getLogger("partita.execution")

#: Set as `current_attempt_log` where nothing written belongs to an attempt, even on a body's thread.
OUTSIDE_ATTEMPTS: Any = object()
#: The log of the attempt whose body runs in this task or worker process (set by the body wrappers of
#: `log_capture`). None: ask the thread's attempt scope (`attempt_scope.current_log`); or `OUTSIDE_ATTEMPTS`.
current_attempt_log: contextvars.ContextVar[Any] = contextvars.ContextVar("partita_attempt_log", default=None)


class LogScope:
    """What a thread's active emitter is when it also names its attempt's log (`attempt_scope.AttemptScope`)."""

    __slots__ = ()

    def attempt_log(self) -> AttemptLog:
        raise NotImplementedError


def current_log() -> AttemptLog | None:
    """The log of the attempt whose body runs in this thread or task; None outside any."""
    log = current_attempt_log.get()
    if log is None:
        scope = active_emitter()
        return scope.attempt_log() if isinstance(scope, LogScope) else None
    return None if log is OUTSIDE_ATTEMPTS else log


@runtime_checkable
class LogListener(Protocol):
    """Sees each line as it is kept (the CLI prints them live); called on the body's thread, so it must be quick.

    ``key_text`` is the attempt's canonical key text (None for an unpartitioned asset).
    """

    def on_log(self, line: LogLine, key_text: str | None) -> None: ...


@dataclass(frozen=True, slots=True)
class LogCut:
    """An attempt's cut grew: the rows ``gone`` (its earlier marker, lines written before they were cut) go.

    ``marker`` replaces them, counting every line cut so far.
    """

    gone: tuple[int, ...]
    marker: LogRow


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Rows to write, numbered from ``first_id`` in the run's write order: the cuts' markers, then ``lines``.

    The writer assigns the numbers (one writer per run: the journal of the
    process that runs it), so a replayed batch writes the same rows again.
    """

    lines: Sequence[LogRow]
    cuts: Sequence[LogCut] = ()
    first_id: int = 1

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
        "run", "kept", "_format", "_key_text", "_partial",
    )

    def __init__(
        self,
        run: RunLogs,
        asset: str,
        index: int,
        partition_key: Any,
        format_key: Callable[[Any], str] | None,
        head: tuple[LogRow, ...] = (),
    ) -> None:
        self.asset = asset
        self.index = index
        self.partition_key = partition_key
        self.invocation = 1
        self.seq = len(head)
        self.head = head
        self.tail: collections.deque[LogRow] | None = None
        self.cut = 0
        self.run = run
        #: Whether the run holds this log (from its first line on) rather than its head alone, or nothing.
        self.kept = False
        self._format = format_key
        self._key_text: str | None = None
        self._partial: dict[str, str] | None = None

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
        if not self.kept:  # the invocation's first line: from now on the run keeps this log
            run.keep(self)
        line = (self.asset, self.index, self.invocation, seq, at, stream, level, logger, message)
        if seq <= run.head:
            # A tuple, not a list: once its lines are, it is no object for the garbage collector to visit.
            self.head += (line,)
        else:
            tail = self.tail
            if tail is None:
                tail = self.tail = collections.deque(maxlen=run.tail or None)
                run.any_tail = True  # before the line is queued: a drain that takes it sees the flag
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

    def _count_cut(self, line: LogRow) -> None:
        if not self.cut:
            self.first_cut_at = line[4]
        self.cut += 1

    def skip(self, count: int, at: float) -> None:
        """``count`` lines were cut elsewhere (a worker process): they, and the tail so far, are cut here."""
        tail = self.tail or ()
        if not self.cut:
            self.first_cut_at = tail[0][4] if tail else at
        self.run.any_tail = True  # a cut, with or without a tail: drains must look
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

    def end_invocation(self, at: Callable[[], float]) -> None:
        """Keep what the invocation wrote without a final newline, and let the run keep its head alone if it can."""
        partial = self._partial
        if partial:
            now = at()
            while partial:
                stream, rest = partial.popitem()
                self.add(stream, None, None, rest, now)
        if self.kept and self.tail is None and not self.cut:
            self.run.compact(self)

    def marker(self) -> LogRow | None:
        """The cut marker, numbered as the first line it replaces; None while nothing is cut."""
        if not self.cut:
            return None
        lines = "line" if self.cut == 1 else "lines"
        return (
            self.asset, self.index, self.invocation, self.run.head + 1, self.first_cut_at, LogStream.CUT.value, None,
            None, f"{self.cut} {lines} cut",
        )

    def lines(self) -> tuple[LogRow, ...]:
        marker = self.marker()
        if marker is None and self.tail is None:
            return self.head
        # A cut without a tail window (or of a worker's lines) has a marker and no tail.
        return (*self.head, *(() if marker is None else (marker,)), *(self.tail or ()))


class RunLogs:
    """Every attempt log of one run, the listeners that see lines live, and the lines the store has not got yet.

    An attempt that logged is held as its `AttemptLog` while it may still
    grow past its head, and as its head's lines alone once an invocation
    ended within the head.
    """

    __slots__ = (
        "capture", "head", "tail", "line_chars", "listeners", "pending", "echo_warnings", "any_tail", "annotate",
        "_attempts", "_written", "_tail_ids", "_stored_cuts",
    )

    def __init__(self, capture: LogCapture, listeners: Iterable[LogListener] = ()) -> None:
        self.capture = capture
        # The bounds, read by every line: plain attributes, not through the capture.
        self.head, self.tail, self.line_chars = capture.head, capture.tail, capture.line_chars
        self.listeners = tuple(listeners)
        #: Lines a journal has not drained yet; None when nothing drains them (no store).
        self.pending: collections.deque[LogRow] | None = None
        #: With no listener, WARNING and up still reach stderr when nothing else handles them (as before capture).
        self.echo_warnings = not self.listeners
        #: Whether any attempt has lines past its head (or a cut): until then a drain writes every line as it is.
        self.any_tail = False
        #: Whether records are named by asset and key for other handlers (set when the run starts:
        #: only when another handler sees them, since the key's text costs a format per attempt).
        self.annotate = False
        self._attempts: dict[tuple[str, int], AttemptLog | tuple[LogRow, ...]] = {}
        # The drains' own state (one drainer, the journal's flusher): rows numbered so far, the
        # (seq, id) of rows written past an attempt's head (a cut may delete them later), and
        # each attempt's stored cut as (lines cut, its marker's id).
        self._written = 0
        self._tail_ids: dict[tuple[str, int], collections.deque[tuple[int, int]]] = {}
        self._stored_cuts: dict[tuple[str, int], tuple[int, int]] = {}

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
        held = self._attempts.get((asset, index))
        if isinstance(held, AttemptLog):
            log = held
        else:  # a retry of an attempt held as its head goes on from there
            log = AttemptLog(self, asset, index, partition_key, format_key, held or ())
        log.invocation = invocation
        return log

    def keep(self, log: AttemptLog) -> None:
        """Hold ``log`` from now on (its invocation's first line), unless a later log of its attempt took over.

        A task the body left running can log after its invocation ended;
        its log takes the attempt back only if nothing replaced the head.
        """
        key = (log.asset, log.index)
        held = self._attempts.get(key)
        if held is None or held is log.head:
            self._attempts[key] = log
        log.kept = True

    def compact(self, log: AttemptLog) -> None:
        """Hold the head's lines alone: ``log`` ended an invocation with nothing beyond its head."""
        key = (log.asset, log.index)
        if self._attempts.get(key) is log:
            self._attempts[key] = log.head
        log.kept = False

    def keep_for_store(self) -> None:
        """Queue lines for a journal to drain (without one, lines stay in memory only)."""
        if self.pending is None:
            self.pending = collections.deque()

    def show(self, log: AttemptLog, line: LogRow) -> None:
        """Hand a kept line to the listeners."""
        if self.listeners:
            shown = LogLine._make(line)
            # Outside the attempt while showing it: what a listener writes is not the body's output.
            token = current_attempt_log.set(OUTSIDE_ATTEMPTS)
            try:
                for listener in self.listeners:
                    try:
                        listener.on_log(shown, log.key_text)
                    except Exception:  # noqa: BLE001 - showing a line must not fail the body that logged it
                        _log.exception("log listener %r raised; the line is kept", listener)
            finally:
                current_attempt_log.reset(token)

    def merge(self, log: AttemptLog, lines: Sequence[LogRow]) -> None:
        """Lines a worker process kept, added to the attempt's log here (numbered and bounded anew)."""
        for _, _, invocation, _, at, stream, level, logger, message in lines:
            if stream == LogStream.CUT:
                log.skip(int(message.split(" ", 1)[0]), at)
            else:
                log.invocation = invocation
                log.add(stream, level, logger, message, at)
        if log.seq and not log.kept:  # a cut alone (no head kept) registers no line: the log is kept all the same
            self.keep(log)
        log.end_invocation(time.time)

    def drain(self) -> LogBatch:
        """The lines logged since the last drain that are still kept, and the cuts that grew, numbered."""
        pending = self.pending
        first_id = self._written + 1
        if not pending:
            return LogBatch((), first_id=first_id)
        taken = [pending.popleft() for _ in range(len(pending))]
        if not self.any_tail:  # every line is in its attempt's head: kept, and never cut
            self._written += len(taken)
            return LogBatch(taken, first_id=first_id)
        head = self.head
        cuts: list[LogCut] = []
        cut_now: dict[tuple[str, int], int] = {}
        for line in taken:
            key = (line[0], line[1])
            if key not in cut_now:
                cut_now[key] = self._cut_grown(key, first_id + len(cuts), cuts)
        kept = [line for line in taken if not head < line[3] <= head + cut_now[(line[0], line[1])]]
        line_id = first_id + len(cuts)
        for line in kept:
            if line[3] > head:  # past the head: a later cut may delete it
                key = (line[0], line[1])
                written = self._tail_ids.get(key)
                if written is None:
                    written = self._tail_ids[key] = collections.deque()
                written.append((line[3], line_id))
            line_id += 1
        self._written = line_id - 1
        return LogBatch(kept, cuts, first_id)

    def _cut_grown(self, key: tuple[str, int], marker_id: int, cuts: list[LogCut]) -> int:
        """The attempt's lines cut now; a cut that grew since the last drain joins ``cuts`` with its marker as ``marker_id``."""
        log = self._attempts[key]
        if not isinstance(log, AttemptLog) or not log.cut:  # held as its head alone, or nothing cut yet
            return 0
        count = log.cut
        stored, stored_marker = self._stored_cuts.get(key, (0, 0))
        if count > stored:
            last = self.head + count
            gone = [stored_marker] if stored else []
            written = self._tail_ids.get(key)
            while written and written[0][0] <= last:
                gone.append(written.popleft()[1])
            marker = log.marker()
            assert marker is not None
            cuts.append(LogCut(tuple(gone), marker))
            self._stored_cuts[key] = (count, marker_id)
        return count

    def snapshot(self) -> dict[tuple[str, int], tuple[LogRow, ...]]:
        """Each attempt's kept lines, for the `RunResult` (which names their fields when they are read)."""
        kept: dict[tuple[str, int], tuple[LogRow, ...]] = {}
        for key, log in self._attempts.items():
            if not isinstance(log, AttemptLog):
                kept[key] = log
            elif log.seq:
                kept[key] = log.lines()
        return kept
