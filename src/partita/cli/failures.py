"""The failed and dependency-skipped keys of a finished run, listed for people.

The live `RunResult` holds every attempt's original key even when the store
records none (``record_partition_keys`` off), so the process that ran the work
is the one place that can say which day failed. This listing is human text
only: the portable ``--json`` documents keep omitting raw keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from partita.results.model import AttemptResult, AttemptStatus, RunResult, SkipReason, TaskResult

__all__ = ["KEYS_PER_ASSET", "LINE_WIDTH", "failure_lines", "render_failures"]

#: Keys listed per asset; the rest are counted ("... and N more").
KEYS_PER_ASSET = 20
#: The listing fits an 80-column terminal, and a pipe (whose width rich guesses).
LINE_WIDTH = 80
_INDENT = "  "
_MIN_ERROR_WIDTH = 24  # below this the error moves to its own line under the key


@dataclass(frozen=True, slots=True)
class _Listed:
    """One failed or skipped attempt: its key text and the reason, both unstyled."""

    key: str | None
    reason: str


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else ""


def _error_text(attempt: AttemptResult) -> str:
    failure = attempt.failure
    if failure is None:
        return "failed (no error recorded)"
    short_type = failure.type.rsplit(".", 1)[-1]
    message = _first_line(failure.message)
    return f"{short_type}: {message}" if message else short_type


def _skip_text(attempt: AttemptResult) -> str:
    upstream = list(dict.fromkeys(blocker.asset_name for blocker in attempt.blocked_by))
    return f"skipped, upstream failed: {', '.join(upstream)}" if upstream else "skipped, upstream failed"


def _is_listed(attempt: AttemptResult) -> bool:
    return attempt.status is AttemptStatus.FAILED or (
        attempt.status is AttemptStatus.SKIPPED and attempt.reason is SkipReason.DEPENDENCY_FAILED
    )


def _key_formatter(result: RunResult, task: TaskResult) -> Callable[[Any], str]:
    for planned in result.plan.tasks:
        partition_def = planned.definition.partition_def
        if planned.name == task.asset_name and partition_def is not None:
            return partition_def.format_key
    return str


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _attempt_lines(listed: _Listed, width: int) -> Iterator[str]:
    """The key is never cut: the reason is truncated to the width, or moves under a long key."""
    if listed.key is None:
        yield _truncate(f"{_INDENT}{listed.reason}", width)
        return
    head = f"{_INDENT}{listed.key}  "
    if width - len(head) >= _MIN_ERROR_WIDTH:
        yield head + _truncate(listed.reason, width - len(head))
        return
    yield f"{_INDENT}{listed.key}"
    yield _truncate(f"{_INDENT * 2}{listed.reason}", width)


def _heading(task: TaskResult, failed: int, skipped: int) -> str:
    parts = [f"{failed} failed"] if failed else []
    if skipped:
        parts.append(f"{skipped} skipped (dependency failed)")
    return f"{task.asset_name}: {', '.join(parts)}"


def failure_lines(result: RunResult, *, limit: int = KEYS_PER_ASSET, width: int = LINE_WIDTH) -> list[str]:
    """Plain lines: per asset a heading, then up to ``limit`` keys with their reasons; empty when none failed."""
    lines: list[str] = []
    for task in result.tasks.values():
        chosen = [attempt for attempt in task.attempts if _is_listed(attempt)]
        if not chosen:
            continue
        failed = sum(attempt.status is AttemptStatus.FAILED for attempt in chosen)
        lines.append(_heading(task, failed, len(chosen) - failed))
        format_key = _key_formatter(result, task)
        for attempt in chosen[:limit]:
            key = format_key(attempt.partition_key) if attempt.partition_key_present else None
            reason = _error_text(attempt) if attempt.status is AttemptStatus.FAILED else _skip_text(attempt)
            lines.extend(_attempt_lines(_Listed(key, reason), width))
        if len(chosen) > limit:
            lines.append(f"{_INDENT}... and {len(chosen) - limit} more")
    return lines


def render_failures(console: Console, result: RunResult) -> None:
    """Print `failure_lines` (nothing for a run without failures); never wrapped by rich."""
    width = min(LINE_WIDTH, console.width) if console.width >= _MIN_ERROR_WIDTH else LINE_WIDTH
    for line in failure_lines(result, width=width):
        style = "" if line.startswith(_INDENT) else "red"
        console.print(escape(line), style=style or None, highlight=False, soft_wrap=True)
