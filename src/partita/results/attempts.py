"""The outcome of one attempt and its parts: statuses, skip reasons, failures, invocations.

Values only: `RunResult` (in `partita.results.model`) and the portable records
(in `partita.results.record`) both build on them without depending on each other.
"""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
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
    "plain_success_times",
    "succeeded_attempt",
    "succeeded_invocation",
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


# -- the engine's hot path ------------------------------------------------------------
# A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``:
# 1.3 µs for an `AttemptResult` and 0.6 µs for an `Invocation`. Worse, a plain
# success kept three objects the cyclic garbage collector tracks (the result, its
# invocations tuple and the invocation), and a run of 100,000 keys holds all of
# them: each full collection scans them again, 3 µs per attempt in all. A plain
# success built here is one tracked object: its single invocation's times sit in
# two slots, and its ``invocations`` are made only when first read.

_new = object.__new__


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """Each named slot's setter, after checking that ``names`` are ``cls``'s fields, all of them, in order."""
    declared = tuple(f.name for f in fields(cls))
    if declared != names:
        raise TypeError(f"{cls.__name__}'s fast builder sets {names}, but its fields are {declared}")
    return tuple(getattr(cls, name).__set__ for name in names)


(_i_number, _i_started, _i_finished, _i_succeeded, _i_failure) = _slot_setters(
    Invocation, ("number", "started_at", "finished_at", "succeeded", "failure")
)


def succeeded_invocation(number: int, started_at: float, finished_at: float) -> Invocation:
    """``Invocation(number, started_at, finished_at, True)``, built faster."""
    invocation = _new(Invocation)
    _i_number(invocation, number)
    _i_started(invocation, started_at)
    _i_finished(invocation, finished_at)
    _i_succeeded(invocation, True)
    _i_failure(invocation, None)
    return invocation


class _PlainSuccess(AttemptResult):
    """A success with one invocation, that invocation kept as two times until ``invocations`` is read.

    Only `succeeded_attempt` makes one. Its constructor (``dataclasses.replace``
    calls it) gives a plain `AttemptResult`, and so do copying and pickling.
    """

    __slots__ = ("_started", "_finished")

    def __new__(cls, *args: Any, **kwargs: Any) -> AttemptResult:  # type: ignore[misc]
        return AttemptResult(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # only for a slot left unset: ``invocations``, until first read
        if name != "invocations":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)
        invocations = (succeeded_invocation(1, self._started, self._finished),)
        object.__setattr__(self, "invocations", invocations)
        return invocations

    @property
    def started_at(self) -> float:
        return self._started

    @property
    def finished_at(self) -> float:
        return self._finished

    @property
    def duration(self) -> float:
        return self._finished - self._started

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"AttemptResult({shown})"

    def __reduce__(self) -> tuple[Any, ...]:  # copied or unpickled as the plain `AttemptResult` it stands for
        return AttemptResult, tuple(getattr(self, f.name) for f in fields(self))


_set = dict(
    zip(
        _ATTEMPT_FIELDS := (
            "asset_name", "partition_key", "partition_key_present", "status", "reason", "blocked_by", "output",
            "exception", "failure", "invocations", "resolution", "materialization_id", "index",
        ),
        _slot_setters(AttemptResult, _ATTEMPT_FIELDS),
        strict=True,
    )
)  # fmt: skip
_a_asset, _a_key, _a_present, _a_status = _set["asset_name"], _set["partition_key"], _set["partition_key_present"], _set["status"]
_a_reason, _a_blocked, _a_output, _a_exception = _set["reason"], _set["blocked_by"], _set["output"], _set["exception"]
_a_failure, _a_resolution, _a_materialization = _set["failure"], _set["resolution"], _set["materialization_id"]
_a_index = _set["index"]
_p_started = _PlainSuccess._started.__set__  # type: ignore[attr-defined]
_p_finished = _PlainSuccess._finished.__set__  # type: ignore[attr-defined]


def succeeded_attempt(
    asset_name: str,
    partition_key: Any,
    partition_key_present: bool,
    output: Any,
    started_at: float,
    finished_at: float,
    resolution: Resolution,
    materialization_id: str | None,
    index: int,
) -> AttemptResult:
    """A success whose one invocation ran from ``started_at`` to ``finished_at`` (the other fields at their defaults).

    The very `AttemptResult` the constructor would give, built faster and
    tracked as one object until its ``invocations`` are read.
    """
    attempt = _new(_PlainSuccess)
    _a_asset(attempt, asset_name)
    _a_key(attempt, partition_key)
    _a_present(attempt, partition_key_present)
    _a_status(attempt, AttemptStatus.SUCCESS)
    _a_reason(attempt, None)
    _a_blocked(attempt, ())
    _a_output(attempt, output)
    _a_exception(attempt, None)
    _a_failure(attempt, None)
    _a_resolution(attempt, resolution)
    _a_materialization(attempt, materialization_id)
    _a_index(attempt, index)
    _p_started(attempt, started_at)
    _p_finished(attempt, finished_at)
    return attempt


def plain_success_times(attempt: AttemptResult) -> tuple[float, float] | None:
    """A success's one invocation's start and end, or None when it is not a plain success (one invocation, no failure).

    Reads a `succeeded_attempt`'s times without making its ``invocations``.
    """
    if type(attempt) is _PlainSuccess:
        return attempt._started, attempt._finished  # type: ignore[attr-defined]  # noqa: SLF001
    if attempt.status is not AttemptStatus.SUCCESS or len(attempt.invocations) != 1:
        return None
    only = attempt.invocations[0]
    return None if only.failure is not None else (only.started_at, only.finished_at)
