"""Attempt logs as values: one `LogLine` per record or output line, and the `LogCapture` bounds.

Log text is application data: a message can repeat a partition key, a
customer name or a secret. It is kept in memory on the `RunResult` and in the
store's attempt logs, and never in a portable record.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from partita.errors import DefinitionError

__all__ = ["DEFAULT_LOG_CAPTURE", "LogCapture", "LogLine", "LogRow", "LogStream"]


class LogStream(enum.StrEnum):
    """Where a line came from; ``CUT`` marks the lines left out between an attempt's head and tail.

    A string enum: `LogLine.stream` holds the plain value (``"log"``…), which
    compares equal to its member, so a kept line holds no object the garbage
    collector must keep visiting.
    """

    LOG = "log"
    STDOUT = "stdout"
    STDERR = "stderr"
    CUT = "cut"


class LogLine(NamedTuple):
    """One kept line of an attempt (immutable).

    A named tuple rather than a frozen dataclass: a tuple is built in a
    fifth of the time. While a run runs, its lines are kept as plain
    `LogRow` tuples of the same fields, and become `LogLine` values only
    when read (see `LogRow`).
    ``seq`` numbers the attempt's lines from 1 across its invocations; a gap
    in it is where lines were cut (the ``CUT`` line there says how many).
    ``level`` is a `logging` level for records and None for captured output.
    ``message`` is formatted, with the exception's traceback appended when
    the record carried one, and shortened to `LogCapture.line_chars`.
    """

    asset: str
    index: int
    invocation: int
    seq: int
    at: float
    #: A `LogStream` value (``"log"``, ``"stdout"``, ``"stderr"``, ``"cut"``); compare with the members.
    stream: str
    level: int | None
    logger: str | None
    message: str

    @property
    def level_name(self) -> str:
        """``INFO``, ``WARNING``…; the stream's name for captured output and cut markers."""
        if self.level is None:
            return self.stream
        return logging.getLevelName(self.level)

    def to_dict(self) -> dict[str, Any]:
        return {
            "asset": self.asset,
            "index": self.index,
            "invocation": self.invocation,
            "seq": self.seq,
            "at": self.at,
            "stream": self.stream,
            "level": self.level_name if self.level is not None else None,
            "logger": self.logger,
            "message": self.message,
        }


#: A `LogLine`'s fields as a plain tuple: how a run keeps its lines while it runs.
#: The garbage collector stops visiting a plain tuple of strings and numbers
#: after its first pass over it; a named tuple (any tuple subclass) it keeps
#: visiting in every full collection, and a run keeps one per logged line.
#: A `LogLine` is a `LogRow` too; ``LogLine._make(row)`` names one's fields.
LogRow = tuple[str, int, int, int, float, str, int | None, str | None, str]


def _positive(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DefinitionError(f"LogCapture {field} must be an integer of at least {minimum}")
    return value


@dataclass(frozen=True, slots=True)
class LogCapture:
    """What a run keeps of its attempts' logs.

    Every record a body logs through ``context.logger`` is kept; ``output``
    also keeps the lines the body writes to stdout and stderr. Per attempt,
    the first ``head`` and the last ``tail`` lines are kept and the lines
    between are counted in one cut marker: a body that logs in a loop cannot
    fill the store. A line longer than ``line_chars`` characters is shortened
    and says by how much.
    """

    output: bool = False
    head: int = 200
    tail: int = 200
    line_chars: int = 8192

    def __post_init__(self) -> None:
        if not isinstance(self.output, bool):
            raise DefinitionError("LogCapture output must be True or False")
        _positive(self.head, "head", 0)
        _positive(self.tail, "tail", 0)
        _positive(self.line_chars, "line_chars", 16)

    @classmethod
    def coerce(cls, value: Any) -> LogCapture:
        """A `LogCapture` from a Flow's ``log_capture`` option: a `LogCapture`, or a bool for ``output``."""
        if isinstance(value, LogCapture):
            return value
        if value is None:
            return DEFAULT_LOG_CAPTURE
        if isinstance(value, bool):
            return cls(output=value)
        raise DefinitionError("Flow log_capture must be True, False or a LogCapture(...)")


DEFAULT_LOG_CAPTURE = LogCapture()
