"""What happens after a failed invocation: one small decision function.

A resource's ``classify_failure``, when present, decides (`Fail`, `Retry`
bounded by the resource's ``max_attempts``, `OpenCircuit`); otherwise the
asset's `RetryPolicy` retries with backoff; otherwise a resource's
``max_attempts`` allows immediate retries. Errors that are not ``Exception``
subclasses (``KeyboardInterrupt``, ``SystemExit`` raised by a body) are never
retried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from partita.definitions.policies import Fail, OpenCircuit, ResourcePolicy, Retry, RetryPolicy
from partita.errors import PolicyError

__all__ = ["FailNow", "OpenCircuitNow", "RetryLater", "decide_after_failure"]


@dataclass(frozen=True, slots=True)
class FailNow:
    """The attempt fails; ``exception`` replaces the body's when the policy broke."""

    exception: BaseException | None = None


@dataclass(frozen=True, slots=True)
class RetryLater:
    delay: float
    cooldown_resource: bool = False


@dataclass(frozen=True, slots=True)
class OpenCircuitNow:
    pass


Decision = FailNow | RetryLater | OpenCircuitNow


def decide_after_failure(
    exc: BaseException,
    invocation: int,
    *,
    retry: RetryPolicy | None,
    resource_name: str | None,
    resource: ResourcePolicy | None,
    random: Callable[[], float] | None = None,
) -> Decision:
    """Decide the fate of an attempt whose invocation number ``invocation`` failed."""
    if not isinstance(exc, Exception):
        return FailNow()
    if resource is not None and resource.classify_failure is not None:
        return _classified(exc, invocation, resource_name or "?", resource)
    if retry is not None:
        if invocation < retry.max_attempts:
            return RetryLater(retry.delay_before(invocation + 1, random))
        return FailNow()
    if resource is not None and invocation < resource.max_attempts:
        return RetryLater(0.0)
    return FailNow()


def _classified(exc: Exception, invocation: int, name: str, resource: ResourcePolicy) -> Decision:
    assert resource.classify_failure is not None
    try:
        action = resource.classify_failure(exc)
    except Exception as classifier_error:  # noqa: BLE001 - reported as the attempt's failure
        error = PolicyError(
            f"resource {name!r}: classify_failure raised {type(classifier_error).__name__}: {classifier_error}"
        )
        error.__cause__ = classifier_error
        error.__context__ = exc
        return FailNow(error)
    if isinstance(action, Fail):
        return FailNow()
    if isinstance(action, OpenCircuit):
        return OpenCircuitNow()
    if isinstance(action, Retry):
        if invocation < resource.max_attempts:
            return RetryLater(action.after_seconds, action.cooldown_resource)
        return FailNow()
    error = PolicyError(
        f"resource {name!r}: classify_failure returned {type(action).__name__}; "
        "return Fail(), Retry(...) or OpenCircuit()"
    )
    error.__context__ = exc
    return FailNow(error)
