"""The daemon's log lines on stderr: one line per record, as text or as one JSON object.

``partita serve`` and ``partita trigger`` choose with ``--log-format``. Both
formats carry the same fields (flow, run id, outcome ...); JSON keeps a bug's
traceback inside its one line, text keeps only the exception's last line, so
neither prints a raw traceback across lines.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["LOG_FIELDS", "LogFormat", "daemon_logging", "json_log_handler", "log_handler"]

#: Record attributes (passed with ``extra=``) that both formats print when present.
LOG_FIELDS = (
    "flow",
    "request",
    "run_id",
    "asset",
    "partition_key",
    "status",
    "duration",
    "failed_attempts",
    "skipped_attempts",
    "daemon",
    "wakeup",
)


class LogFormat(enum.Enum):
    TEXT = "text"
    JSON = "json"


def _timestamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {key: getattr(record, key) for key in LOG_FIELDS if hasattr(record, key)}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "at": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:  # a bug's traceback, kept inside the one line
            document["traceback"] = self.formatException(record.exc_info)
        return json.dumps(document)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{key}={value}" for key, value in _fields(record).items())
        message = " ".join(record.getMessage().splitlines())
        line = f"{_timestamp(record)} {record.levelname.lower()} {message}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line += f" ({type(exc).__name__}: {' '.join(str(exc).splitlines())})"
        return f"{line} [{fields}]" if fields else line


def log_handler(log_format: LogFormat) -> logging.Handler:
    """A handler writing one line per record on the current stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format is LogFormat.JSON else _TextFormatter())
    return handler


def json_log_handler() -> logging.Handler:
    """Structured logs: one JSON object per line on stderr."""
    return log_handler(LogFormat.JSON)


@contextlib.contextmanager
def daemon_logging(log_format: LogFormat, level: int = logging.INFO) -> Iterator[logging.Handler]:
    """Route ``partita``'s log records to stderr in ``log_format`` for the block, then restore the logger."""
    logger = logging.getLogger("partita")
    handler = log_handler(log_format)
    previous_level = logger.level
    logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
        handler.flush()
