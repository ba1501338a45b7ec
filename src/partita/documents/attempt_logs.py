"""The ``partita.attempt-logs`` document: the log lines a run's attempts kept, as ``runs logs --json`` prints them.

The filters are checked against the run before the store is read: a key
filter needs a run that recorded keys (otherwise no line could match, and
the empty answer would mislead), and an asset filter must name an asset of
the run's plan. The messages name the filter as its caller spells it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partita.errors import ConfigurationError
from partita.store.attempt_log_rows import sorted_for_reading
from partita.store.protocol import LogQuery, StoredLogLine, StoredRun

__all__ = ["CLI_LOG_FIELDS", "LOG_LEVELS", "LogFields", "attempt_logs_body", "log_query", "partitioned_assets"]

#: The level names a filter accepts (case-insensitive).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, slots=True)
class LogFields:
    """How a caller names the asset and key filters in its messages (``--asset`` on the CLI, ``asset`` in HTTP)."""

    asset: str
    partition_key: str


CLI_LOG_FIELDS = LogFields("--asset", "--key")


def log_query(
    run: StoredRun,
    *,
    asset: str | None = None,
    partition_key: str | None = None,
    level: str | None = None,
    after_id: int = 0,
    limit: int | None = None,
    fields: LogFields = CLI_LOG_FIELDS,
) -> LogQuery:
    """The query for ``run``'s lines; ConfigurationError naming the filter for one the run cannot answer."""
    if partition_key is not None and not run.record_partition_keys:
        raise ConfigurationError(
            f"{fields.partition_key} needs a run that recorded partition keys (record_partition_keys); this run did "
            f"not: use {fields.asset}, or record keys in later runs"
        )
    if asset is not None and asset not in {task["name"] for task in run.plan.get("tasks", ())}:
        raise ConfigurationError(f"{fields.asset} names no asset of run {run.run_id}; `partita runs show` lists them")
    min_level = None if level is None else logging.getLevelName(level.upper())
    return LogQuery(asset=asset, partition_key=partition_key, min_level=min_level, after_id=after_id, limit=limit)


def partitioned_assets(run: StoredRun) -> set[str]:
    """The run's partitioned assets (a line of one without a recorded key is named by its attempt index)."""
    return {task["name"] for task in run.plan.get("tasks", ()) if task.get("partitioned")}


def _line_document(stored: StoredLogLine) -> dict[str, Any]:
    return {"id": stored.id, **stored.line.to_dict(), "partition_key": stored.partition_key}


def attempt_logs_body(run_id: str, lines: Sequence[StoredLogLine]) -> dict[str, Any]:
    """The document's body: ``lines`` in the order they were logged (a cut marker where its lines were)."""
    return {"run_id": run_id, "lines": [_line_document(line) for line in sorted_for_reading(lines)]}
