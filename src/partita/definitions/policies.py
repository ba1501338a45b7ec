"""Resource and retry policies: pure, validated values (SPEC §5).

`ResourcePolicy` governs every asset naming that resource: how many bodies
run at once, how many may start per time window, how many invocations one
attempt may use, and how failures are classified (`Fail`, `Retry`,
`OpenCircuit`). `RetryPolicy` is the per-asset alternative: retry any failure
with exponential backoff.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from partita.errors import DefinitionError
from partita.partitions.base import storable_text_problem

__all__ = [
    "Fail",
    "FailureAction",
    "OpenCircuit",
    "RateLimit",
    "ResourcePolicy",
    "Retry",
    "RetryPolicy",
    "check_pool_name",
]

#: The longest pool name a store keeps (the lease table's key column).
POOL_NAME_MAX_LENGTH = 200


def check_pool_name(field_name: str, name: Any) -> str:
    """``name`` unchanged when every store can key a pool by it, else DefinitionError naming ``field_name``.

    The message never repeats the name: it may be undecodable bytes.
    """
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError(f"{field_name} must be a non-empty string")
    if len(name) > POOL_NAME_MAX_LENGTH:
        raise DefinitionError(f"{field_name} must be at most {POOL_NAME_MAX_LENGTH} characters long")
    problem = storable_text_problem(name)
    if problem is None and any(ord(character) < 32 or ord(character) == 127 for character in name):
        problem = "contains a control character"
    if problem is not None:
        raise DefinitionError(f"{field_name} {problem}; a pool name is kept in the store as text")
    return name


def _positive_int(owner: str, field_name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionError(f"{owner} {field_name} must be a positive integer")
    if value < 1:
        raise DefinitionError(f"{owner} {field_name} must be at least 1")
    return value


def _seconds(owner: str, field_name: str, value: Any, *, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DefinitionError(f"{owner} {field_name} must be a number of seconds")
    try:
        finite = math.isfinite(float(value))
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise DefinitionError(f"{owner} {field_name} must be finite")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "greater than zero"
        raise DefinitionError(f"{owner} {field_name} must be {bound}")
    return float(value)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``requests`` invocation starts in any window of ``per_seconds``."""

    requests: int
    per_seconds: float

    def __post_init__(self) -> None:
        _positive_int("RateLimit", "requests", self.requests)
        object.__setattr__(self, "per_seconds", _seconds("RateLimit", "per_seconds", self.per_seconds, allow_zero=False))


@dataclass(frozen=True, slots=True)
class Fail:
    """Classification: fail the attempt now, without retrying."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Classification: invoke again after ``after_seconds``.

    With ``cooldown_resource=True`` every invocation on the resource pauses
    for the same time (a rate-limited API asking everyone to back off).
    """

    after_seconds: float = 0.0
    cooldown_resource: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "after_seconds", _seconds("Retry", "after_seconds", self.after_seconds, allow_zero=True))
        if not isinstance(self.cooldown_resource, bool):
            raise DefinitionError("Retry cooldown_resource must be True or False")


@dataclass(frozen=True, slots=True)
class OpenCircuit:
    """Classification: fail the attempt and skip pending body work on the resource."""


FailureAction = Fail | Retry | OpenCircuit


@dataclass(frozen=True, slots=True)
class ResourcePolicy:
    """Limits shared by every asset that names this resource.

    ``max_attempts`` bounds the invocations of one attempt when
    ``classify_failure`` answers `Retry` (without a classifier, failures are
    retried immediately up to ``max_attempts``).

    With ``shared=True``, ``max_concurrency`` holds across every run and
    process using the same store, through leased slots in the store (a
    *pool*). The pool is named ``pool``, or the resource's name when that is
    None, so two flows naming one resource share it without repeating a name.
    A flag on the policy, rather than a separate pool object, keeps the one
    limit in one place: the same policy is local or shared.
    """

    max_concurrency: int | None = None
    rate_limit: RateLimit | None = None
    max_attempts: int = 1
    classify_failure: Callable[[BaseException], FailureAction] | None = None
    shared: bool = False
    pool: str | None = None

    def __post_init__(self) -> None:
        if self.max_concurrency is not None:
            _positive_int("ResourcePolicy", "max_concurrency", self.max_concurrency)
        if not isinstance(self.shared, bool):
            raise DefinitionError("ResourcePolicy shared must be True or False")
        if self.shared and self.max_concurrency is None:
            raise DefinitionError(
                "ResourcePolicy max_concurrency must be set when shared=True: a shared pool needs a slot count"
            )
        if self.pool is not None:
            if not self.shared:
                raise DefinitionError("ResourcePolicy pool names a shared pool; set shared=True with it")
            check_pool_name("ResourcePolicy pool", self.pool)
        if self.rate_limit is not None and not isinstance(self.rate_limit, RateLimit):
            raise DefinitionError("ResourcePolicy rate_limit must be a RateLimit")
        _positive_int("ResourcePolicy", "max_attempts", self.max_attempts)
        if self.classify_failure is not None and not callable(self.classify_failure):
            raise DefinitionError("ResourcePolicy classify_failure must be a callable taking the exception")

    def pool_name(self, resource: str) -> str | None:
        """The shared pool this policy draws slots from when it governs ``resource`` (None: not shared)."""
        if not self.shared:
            return None
        return self.pool if self.pool is not None else resource


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry any failure of an asset, waiting ``delay * backoff**(n-1)`` seconds.

    The wait is capped at ``max_delay`` and, with ``jitter`` (a fraction from
    0 to 1), shortened by a random share so that many retries spread out.
    """

    max_attempts: int = 3
    delay: float = 0.0
    backoff: float = 2.0
    max_delay: float | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        _positive_int("RetryPolicy", "max_attempts", self.max_attempts)
        object.__setattr__(self, "delay", _seconds("RetryPolicy", "delay", self.delay, allow_zero=True))
        backoff = _seconds("RetryPolicy", "backoff", self.backoff, allow_zero=False)
        if backoff < 1:
            raise DefinitionError("RetryPolicy backoff must be at least 1 (a growing or constant delay)")
        object.__setattr__(self, "backoff", backoff)
        if self.max_delay is not None:
            object.__setattr__(self, "max_delay", _seconds("RetryPolicy", "max_delay", self.max_delay, allow_zero=True))
        jitter = _seconds("RetryPolicy", "jitter", self.jitter, allow_zero=True)
        if jitter > 1:
            raise DefinitionError("RetryPolicy jitter must be a fraction between 0 and 1")
        object.__setattr__(self, "jitter", jitter)

    def delay_before(self, invocation: int, rng: random.Random | Callable[[], float] | None = None) -> float:
        """Seconds to wait before invocation number ``invocation`` (2 or more)."""
        if self.delay == 0:
            return 0.0
        exponent = max(0, invocation - 2)
        try:
            wait = self.delay * self.backoff**exponent
        except OverflowError:
            wait = math.inf
        if self.max_delay is not None:
            wait = min(wait, self.max_delay)
        if math.isinf(wait):
            wait = float(2**31)  # an absurd but finite wait; cancellation still ends it
        if self.jitter and wait:
            draw = rng() if callable(rng) else (rng or random).random()
            wait *= 1 - self.jitter * draw
        return wait
