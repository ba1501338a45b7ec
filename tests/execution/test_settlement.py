"""Settlement transitions: what one failed invocation does to its attempt, decided by `after_failure`."""

from __future__ import annotations

from types import SimpleNamespace

from partita.definitions.policies import OpenCircuit, ResourcePolicy, Retry, RetryPolicy
from partita.errors import PolicyError
from partita.execution.admission import ResourceGate
from partita.execution.settlement import CircuitOpened, Failed, RetryScheduled, Skipped, after_failure
from partita.results.model import FailureInfo, Invocation, SkipReason


class Boom(Exception):
    pass


def _task(retry: RetryPolicy | None = None, resource: ResourcePolicy | None = None) -> SimpleNamespace:
    gate = None if resource is None else ResourceGate("api", resource)
    definition = SimpleNamespace(retry=retry, resource=None if gate is None else "api")
    return SimpleNamespace(definition=definition, gate=gate)


def _failed_invocation(exc: BaseException, number: int = 1) -> Invocation:
    return Invocation(number, 1.0, 2.0, False, FailureInfo.from_exception(exc))


def _decide(task: SimpleNamespace, exc: BaseException, earlier: list[Invocation] | None = None, *, cancelling=False):
    earlier = earlier or []
    invocation = _failed_invocation(exc, len(earlier) + 1)
    return after_failure(task, exc, earlier, invocation, cancelling=cancelling, random=None), invocation  # type: ignore[arg-type]


def test_a_failure_with_attempts_left_schedules_a_retry_that_keeps_every_invocation() -> None:
    exc = Boom("first")
    transition, invocation = _decide(_task(retry=RetryPolicy(max_attempts=2, delay=1.5)), exc)
    assert transition == RetryScheduled([invocation], 1.5, False)


def test_the_last_allowed_failure_fails_the_attempt_with_the_body_error() -> None:
    exc = Boom("second")
    earlier = [_failed_invocation(Boom("first"))]
    transition, invocation = _decide(_task(retry=RetryPolicy(max_attempts=2)), exc, earlier)
    assert isinstance(transition, Failed)
    assert transition.exception is exc
    assert transition.failure is invocation.failure
    assert transition.invocations == (*earlier, invocation)


def test_a_cancelling_run_fails_instead_of_retrying() -> None:
    transition, _ = _decide(_task(retry=RetryPolicy(max_attempts=5)), Boom("late"), cancelling=True)
    assert isinstance(transition, Failed)


def test_a_retry_on_a_resource_whose_circuit_is_open_is_skipped() -> None:
    task = _task(resource=ResourcePolicy(max_attempts=3))
    task.gate.circuit_open = True
    transition, invocation = _decide(task, Boom("flaky"))
    assert transition == Skipped(SkipReason.RESOURCE_CIRCUIT_OPEN, [invocation])


def test_a_classifier_that_opens_the_circuit_fails_the_attempt_and_says_so() -> None:
    task = _task(resource=ResourcePolicy(classify_failure=lambda exc: OpenCircuit()))
    transition, _ = _decide(task, Boom("down"))
    assert isinstance(transition, CircuitOpened)
    assert transition.gate is task.gate
    assert transition.failed.failure.message == "down"


def test_a_classifier_retry_can_ask_the_resource_to_cool_down() -> None:
    task = _task(resource=ResourcePolicy(max_attempts=2, classify_failure=lambda exc: Retry(3.0, cooldown_resource=True)))
    transition, invocation = _decide(task, Boom("slow down"))
    assert transition == RetryScheduled([invocation], 3.0, True)


def test_a_broken_classifier_fails_the_attempt_with_a_policy_error_but_keeps_the_body_failure_on_the_invocation() -> None:
    def classify(exc: BaseException):
        raise RuntimeError("classifier bug")

    exc = Boom("body")
    transition, invocation = _decide(_task(resource=ResourcePolicy(classify_failure=classify)), exc)
    assert isinstance(transition, Failed)
    assert isinstance(transition.exception, PolicyError)
    assert transition.failure.type != invocation.failure.type  # type: ignore[union-attr]
    assert transition.invocations == (invocation,)


def test_errors_that_are_not_exceptions_are_never_retried() -> None:
    transition, _ = _decide(_task(retry=RetryPolicy(max_attempts=5)), KeyboardInterrupt())
    assert isinstance(transition, Failed)
