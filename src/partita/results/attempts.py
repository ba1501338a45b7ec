"""The outcome of one attempt and its parts: statuses, skip reasons, failures, invocations.

Values only: `RunResult` (in `partita.results.model`) and the portable records
(in `partita.results.record`) both build on them without depending on each other.
"""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AttemptResult",
    "AttemptStatus",
    "FailureInfo",
    "Invocation",
    "Resolution",
    "RunStatus",
    "SkipReason",
    "attempt_never_started",
    "task_never_started",
]


class AttemptStatus(enum.Enum):
    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class SkipReason(enum.Enum):
    DEPENDENCY_FAILED = "dependency_failed"
    NO_PARTITION_KEYS = "no_partition_keys"
    RESOURCE_CIRCUIT_OPEN = "resource_circuit_open"
    PARTITION_NOT_DISCOVERED = "partition_not_discovered"
    CANCELLED = "cancelled"


def _text(value: enum.Enum | str | None) -> str | None:
    return value.value if isinstance(value, enum.Enum) else value


def attempt_never_started(status: AttemptStatus | str, invocation_count: int) -> bool:
    """Whether an attempt never began: its run stopped before any invocation of its body started.

    The one definition, for live results and records alike (``status`` as
    an `AttemptStatus` or its text): such an attempt is ``cancelled`` with
    no invocation, while one the cancellation cut short lists the
    invocation it cut (and one waiting for a retry lists its earlier ones).
    """
    return invocation_count == 0 and _text(status) == AttemptStatus.CANCELLED.value


def task_never_started(
    attempts: Iterable[tuple[AttemptStatus | str, int]],
    skip_reason: SkipReason | str | None,
    *,
    run_unfinished: bool = False,
) -> bool:
    """Whether none of a task's attempts began: each (status, invocation count) never started.

    A task without attempts never started when the discovery that would
    have made them was cancelled (reason ``cancelled``) or, while its run is
    unfinished (``run_unfinished``: a record of a run still running, or
    whose owner is gone), when no attempt is recorded yet.
    """
    pairs = list(attempts)
    if not pairs:
        reason = _text(skip_reason)
        return reason == SkipReason.CANCELLED.value or (run_unfinished and reason is None)
    return all(attempt_never_started(status, count) for status, count in pairs)


class Resolution(enum.Enum):
    """How a successful attempt got its output."""

    EXECUTED = "executed"
    MATERIALIZED = "materialized"


class RunStatus(enum.Enum):
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class FailureInfo:
    """A portable description of an exception: type, message and traceback text.

    Messages and tracebacks are application text and may repeat sensitive
    values; treat them as such.
    """

    type: str
    message: str
    traceback: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> FailureInfo:
        try:
            message = str(exc)
        except Exception:  # noqa: BLE001 - a broken __str__ must not lose the failure
            message = f"<{type(exc).__name__} whose str() raised>"
        return cls(
            type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            message=_storable(message),
            traceback=_storable("".join(traceback.format_exception(exc))),
        )


def _storable(text: str) -> str:
    """Application text as every store can keep it: NUL and lone surrogates written as escapes.

    PostgreSQL text cannot hold NUL and UTF-8 cannot encode a lone surrogate;
    a failure whose message held either could not be recorded, and the run
    stayed ``running``.
    """
    text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


@dataclass(frozen=True, slots=True)
class Invocation:
    """One call of an asset body within an attempt (retries add more)."""

    number: int
    started_at: float
    finished_at: float
    succeeded: bool
    failure: FailureInfo | None = None

    @property
    def duration(self) -> float:
        return self.finished_at - self.started_at


@dataclass(frozen=True, slots=True, eq=False)
class AttemptResult:
    """The terminal outcome of one (asset, key) attempt.

    ``blocked_by`` holds the upstream attempts whose failure or skip kept this
    one from running. ``partition_key`` is the original normalized key object.
    """

    asset_name: str
    partition_key: Any
    partition_key_present: bool
    status: AttemptStatus
    reason: SkipReason | None = None
    blocked_by: tuple[AttemptResult, ...] = ()
    output: Any = field(default=None, repr=False)
    exception: BaseException | None = field(default=None, repr=False)
    failure: FailureInfo | None = field(default=None, repr=False)
    invocations: tuple[Invocation, ...] = ()
    resolution: Resolution | None = None
    materialization_id: str | None = None
    #: Position of the key in the run's selection (0 for unpartitioned assets):
    #: a portable identity for the attempt within its task.
    index: int = 0

    @property
    def started_at(self) -> float | None:
        return self.invocations[0].started_at if self.invocations else None

    @property
    def finished_at(self) -> float | None:
        return self.invocations[-1].finished_at if self.invocations else None

    @property
    def duration(self) -> float:
        return sum(invocation.duration for invocation in self.invocations)
