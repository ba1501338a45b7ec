"""Results of plain successes, built for the engine's hot path: one invocation, nothing else to tell.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``:
1.3 µs for an `AttemptResult` and 0.6 µs for an `Invocation`, a large part of
a no-op attempt. A plain success also kept three objects the cyclic garbage
collector tracks (the result, its invocations tuple and the invocation); a run
of 100,000 keys holds every one, and each full collection scanned them again,
about 3 µs per attempt in all.

`succeeded_attempt` builds a private `AttemptResult` subclass instead. What
every plain success shares (its status, resolution, no failure …) is read from
the class, so building one sets only the slots that vary, through their
descriptors. Its one invocation is two float slots, and its ``invocations``
are made only when first read. It is one tracked object, and it behaves as
the `AttemptResult` the constructor gives: same fields, repr and frozenness;
copying, pickling and ``dataclasses.replace`` give that plain `AttemptResult`.
Two differences no caller should meet: ``object.__setattr__`` of a shared
field is refused (a frozen result's fields are not for setting anyway), and
two threads reading ``invocations`` for the first time at once may each get
their own, equal, tuple.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from partita.results.attempts import AttemptResult, AttemptStatus, Invocation, Resolution

__all__ = ["plain_success_times", "succeeded_attempt", "succeeded_invocation"]

_new = object.__new__


def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """Each named field's slot setter; refused unless ``names`` are fields of ``cls``."""
    unknown = set(names) - {f.name for f in fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)} for its fast builder to set")
    return tuple(getattr(cls, name).__set__ for name in names)


def _check_covers(cls: type, set_: tuple[str, ...], shared: tuple[str, ...]) -> None:
    """Refuse a builder that would leave a field of ``cls`` neither set nor shared (one added later, say)."""
    missing = [f.name for f in fields(cls) if f.name not in set_ and f.name not in shared]
    if missing:
        raise TypeError(f"{cls.__name__}'s fast builder leaves its fields {missing} unset")


_INVOCATION_FIELDS = ("number", "started_at", "finished_at", "succeeded", "failure")
_check_covers(Invocation, _INVOCATION_FIELDS, ())
(_i_number, _i_started, _i_finished, _i_succeeded, _i_failure) = _slot_setters(Invocation, _INVOCATION_FIELDS)


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
    """A plain success: its shared fields on the class, its one invocation as two times until first read.

    Only `succeeded_attempt` makes one; its constructor gives a plain `AttemptResult`.
    """

    __slots__ = ("_started", "_finished")

    # Read from the class: the same for every plain success, never set on one.
    status = AttemptStatus.SUCCESS
    reason = None
    blocked_by = ()
    exception = None
    failure = None
    resolution = Resolution.EXECUTED
    materialization_id = None

    def __new__(cls, *args: Any, **kwargs: Any) -> AttemptResult:  # type: ignore[misc]
        return AttemptResult(*args, **kwargs)  # dataclasses.replace calls it

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


_SHARED = ("status", "reason", "blocked_by", "exception", "failure", "resolution", "materialization_id")
_VARYING = ("asset_name", "partition_key", "partition_key_present", "output", "index")
_check_covers(AttemptResult, (*_VARYING, "invocations"), _SHARED)
(_a_asset, _a_key, _a_present, _a_output, _a_index) = _slot_setters(AttemptResult, _VARYING)
_a_started = _PlainSuccess._started.__set__  # type: ignore[attr-defined]
_a_finished = _PlainSuccess._finished.__set__  # type: ignore[attr-defined]


def succeeded_attempt(
    asset_name: str,
    partition_key: Any,
    partition_key_present: bool,
    output: Any,
    started_at: float,
    finished_at: float,
    index: int,
) -> AttemptResult:
    """An executed success whose one invocation ran from ``started_at`` to ``finished_at``."""
    attempt = _new(_PlainSuccess)
    _a_asset(attempt, asset_name)
    _a_key(attempt, partition_key)
    _a_present(attempt, partition_key_present)
    _a_output(attempt, output)
    _a_index(attempt, index)
    _a_started(attempt, started_at)
    _a_finished(attempt, finished_at)
    return attempt


def plain_success_times(attempt: AttemptResult) -> tuple[float, float] | None:
    """A plain success's start and end (one invocation, no failure); None for any other attempt.

    Reads a `succeeded_attempt`'s times without making its ``invocations``.
    """
    if type(attempt) is _PlainSuccess:
        return attempt._started, attempt._finished  # type: ignore[attr-defined]  # noqa: SLF001
    if attempt.status is not AttemptStatus.SUCCESS or len(attempt.invocations) != 1:
        return None
    only = attempt.invocations[0]
    return None if only.failure is not None else (only.started_at, only.finished_at)
