"""Retries: RetryPolicy backoff, resource classification and recorded invocations (SPEC §5–§7)."""

from __future__ import annotations

import threading
import time

import pytest

import partita as p

LETTERS = p.StaticPartitionDef("letters", ["a", "b", "c", "d"])


class Recorder:
    """An execution observer that keeps every event."""

    def __init__(self) -> None:
        self.events: list[p.ExecutionEvent] = []

    def on_event(self, event) -> None:
        self.events.append(event)

    def of(self, kind):
        return [event for event in self.events if isinstance(event, kind)]


class Boom(Exception):
    pass


def _failing_times(times: int, *, output="ok", exc_type=Boom):
    """A body factory: the first ``times`` calls raise, later calls return ``output``."""
    calls: list[int] = []
    raised: list[BaseException] = []

    def body():
        calls.append(1)
        if len(calls) <= times:
            error = exc_type(f"failure {len(calls)}")
            raised.append(error)
            raise error
        return output

    return body, calls, raised


# -- RetryPolicy ---------------------------------------------------------------


def test_retry_policy_recovers_a_failing_body_into_one_successful_attempt_with_every_invocation():
    registry = p.AssetRegistry()
    body, calls, raised = _failing_times(2, output=42)
    p.asset(name="flaky", retry=p.RetryPolicy(max_attempts=5), registry=registry)(body)

    result = p.Flow(["flaky"], registry=registry, clock=p.FastForwardClock()).run()

    assert result.status is p.RunStatus.SUCCESS
    task = result.tasks["flaky"]
    assert len(task.attempts) == 1
    attempt = task.attempts[0]
    assert attempt.status is p.AttemptStatus.SUCCESS
    assert attempt.output == 42
    assert attempt.exception is None and attempt.failure is None
    assert len(calls) == 3
    invocations = attempt.invocations
    assert all(isinstance(invocation, p.Invocation) for invocation in invocations)
    assert [invocation.number for invocation in invocations] == [1, 2, 3]
    assert [invocation.succeeded for invocation in invocations] == [False, False, True]
    for invocation, error in zip(invocations[:2], raised, strict=True):
        assert isinstance(invocation.failure, p.FailureInfo)
        assert invocation.failure.type.endswith("Boom")
        assert invocation.failure.message == str(error)
        assert "Boom" in invocation.failure.traceback
    assert invocations[2].failure is None
    for invocation in invocations:
        assert invocation.started_at <= invocation.finished_at
        assert invocation.duration >= 0
    assert invocations[0].finished_at <= invocations[1].started_at <= invocations[2].started_at
    assert attempt.started_at == invocations[0].started_at
    assert attempt.finished_at == invocations[-1].finished_at


def test_exhausted_retries_fail_the_attempt_with_all_invocations_and_the_last_exception():
    registry = p.AssetRegistry()
    body, calls, raised = _failing_times(100)
    p.asset(name="broken", retry=p.RetryPolicy(max_attempts=3), registry=registry)(body)

    result = p.Flow(["broken"], registry=registry, clock=p.FastForwardClock()).run()

    assert result.status is p.RunStatus.FAILED
    (attempt,) = result.tasks["broken"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert len(calls) == 3
    assert attempt.exception is raised[-1]
    assert attempt.failure is not None and attempt.failure.message == "failure 3"
    assert [invocation.number for invocation in attempt.invocations] == [1, 2, 3]
    assert not any(invocation.succeeded for invocation in attempt.invocations)
    assert [invocation.failure.message for invocation in attempt.invocations] == [
        "failure 1",
        "failure 2",
        "failure 3",
    ]


def test_max_attempts_one_means_no_retry():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(1)
    p.asset(name="once", retry=p.RetryPolicy(max_attempts=1), registry=registry)(body)

    result = p.Flow(["once"], registry=registry, clock=p.FastForwardClock()).run()
    assert len(calls) == 1
    assert result.tasks["once"].attempts[0].status is p.AttemptStatus.FAILED
    assert len(result.tasks["once"].attempts[0].invocations) == 1


def test_without_any_policy_a_failure_is_not_retried():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(1)
    p.asset(name="plain", registry=registry)(body)
    recorder = Recorder()

    result = p.Flow(["plain"], registry=registry).run(observers=[recorder])
    assert len(calls) == 1
    assert result.tasks["plain"].attempts[0].status is p.AttemptStatus.FAILED
    assert recorder.of(p.AttemptRetrying) == []


def test_recovered_keys_are_not_failed_keys_and_exhausted_keys_are():
    registry = p.AssetRegistry()
    counts: dict[str, int] = {}
    lock = threading.Lock()

    @p.asset(partition_def=LETTERS, retry=p.RetryPolicy(max_attempts=3), registry=registry)
    def letters(context):
        with lock:
            counts[context.partition_key] = counts.get(context.partition_key, 0) + 1
            n = counts[context.partition_key]
        if context.partition_key == "b" and n < 3:
            raise Boom("b is flaky")
        if context.partition_key == "d":
            raise Boom("d is broken")
        return context.partition_key.upper()

    result = p.Flow(["letters"], registry=registry, clock=p.FastForwardClock()).run(
        {"partition_keys": ["a", "b", "c", "d"]}
    )

    assert result.status is p.RunStatus.FAILED
    assert result.failed_partition_keys("letters") == ("d",)
    by_key = {attempt.partition_key: attempt for attempt in result.tasks["letters"].attempts}
    assert by_key["b"].status is p.AttemptStatus.SUCCESS
    assert by_key["b"].output == "B"
    assert [invocation.succeeded for invocation in by_key["b"].invocations] == [False, False, True]
    assert [len(by_key[key].invocations) for key in "acd"] == [1, 1, 3]
    assert counts == {"a": 1, "b": 3, "c": 1, "d": 3}


def test_invocation_number_grows_with_each_retry_of_the_same_attempt():
    registry = p.AssetRegistry()
    seen: list[tuple[str, int]] = []

    @p.asset(partition_def=LETTERS, retry=p.RetryPolicy(max_attempts=4), registry=registry)
    def numbered(context):
        seen.append((context.partition_key, context.invocation_number))
        if context.invocation_number < 3:
            raise Boom("again")
        return context.invocation_number

    result = p.Flow(["numbered"], registry=registry, clock=p.FastForwardClock(), max_concurrency=1).run(
        {"partition_keys": ["a", "b"]}
    )
    assert result.succeeded
    assert [number for key, number in seen if key == "a"] == [1, 2, 3]
    assert [number for key, number in seen if key == "b"] == [1, 2, 3]
    assert [attempt.output for attempt in result.tasks["numbered"].attempts] == [3, 3]


def test_async_bodies_are_retried_too():
    registry = p.AssetRegistry()
    numbers: list[int] = []

    @p.asset(retry=p.RetryPolicy(max_attempts=3), registry=registry)
    async def remote(context):
        numbers.append(context.invocation_number)
        if context.invocation_number == 1:
            raise Boom("first try")
        return "done"

    result = p.Flow(["remote"], registry=registry, clock=p.FastForwardClock()).run()
    assert result.succeeded
    assert numbers == [1, 2]
    assert [i.succeeded for i in result.tasks["remote"].attempts[0].invocations] == [False, True]


def test_downstream_receives_the_recovered_output_and_skips_after_exhaustion():
    registry = p.AssetRegistry()
    counts: dict[str, int] = {}

    @p.asset(partition_def=LETTERS, retry=p.RetryPolicy(max_attempts=2), registry=registry)
    def source(context):
        counts[context.partition_key] = counts.get(context.partition_key, 0) + 1
        if context.partition_key == "a" and counts["a"] == 1:
            raise Boom("a once")
        if context.partition_key == "b":
            raise Boom("b always")
        return context.partition_key * 2

    @p.asset(partition_def=LETTERS, registry=registry)
    def sink(source):
        return source + "!"

    result = p.Flow(["sink"], registry=registry, clock=p.FastForwardClock(), max_concurrency=1).run(
        {"partition_keys": ["a", "b"]}
    )
    sink_a, sink_b = result.tasks["sink"].attempts
    assert sink_a.status is p.AttemptStatus.SUCCESS and sink_a.output == "aa!"
    assert sink_b.status is p.AttemptStatus.SKIPPED
    assert sink_b.reason is p.SkipReason.DEPENDENCY_FAILED
    assert [blocker.partition_key for blocker in sink_b.blocked_by] == ["b"]
    assert result.failed_partition_keys("sink") == ()


# -- the backoff schedule, observed ------------------------------------------------


def test_backoff_schedule_is_visible_in_clock_sleeps_and_retrying_events():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(100)
    p.asset(
        name="backoff",
        retry=p.RetryPolicy(max_attempts=5, delay=1.0, backoff=3.0, max_delay=20.0),
        registry=registry,
    )(body)
    clock = p.FastForwardClock()
    recorder = Recorder()

    started = time.monotonic()
    result = p.Flow(["backoff"], registry=registry, clock=clock).run(observers=[recorder])
    assert time.monotonic() - started < 5  # 33 virtual seconds, no real waiting

    assert len(calls) == 5
    assert clock.sleeps == [1.0, 3.0, 9.0, 20.0]
    assert clock.monotonic() == pytest.approx(33.0)
    retrying = recorder.of(p.AttemptRetrying)
    assert [event.delay for event in retrying] == [1.0, 3.0, 9.0, 20.0]
    assert [event.invocation for event in retrying] == [1, 2, 3, 4]
    assert all(event.asset_name == "backoff" and event.run_id == result.run_id for event in retrying)
    assert all(event.partition_key_present is False for event in retrying)
    assert [event.failure.message for event in retrying] == ["failure 1", "failure 2", "failure 3", "failure 4"]
    assert [event.invocation for event in recorder.of(p.AttemptStarted)] == [1, 2, 3, 4, 5]
    finished = recorder.of(p.AttemptFinished)
    assert len(finished) == 1
    assert finished[0].attempt.status is p.AttemptStatus.FAILED
    assert len(finished[0].attempt.invocations) == 5


def test_each_retry_waits_on_the_clock_before_the_next_invocation_starts():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock(start=1000.0)
    start_times: list[float] = []

    @p.asset(retry=p.RetryPolicy(max_attempts=4, delay=2.0, backoff=2.0), registry=registry)
    def timed():
        start_times.append(clock.monotonic())
        raise Boom("no")

    p.Flow(["timed"], registry=registry, clock=clock).run()
    assert start_times == [1000.0, 1002.0, 1006.0, 1014.0]


def test_retry_events_carry_the_partition_key():
    registry = p.AssetRegistry()

    @p.asset(partition_def=LETTERS, retry=p.RetryPolicy(max_attempts=2, delay=0.5), registry=registry)
    def keyed(context):
        if context.invocation_number == 1:
            raise Boom(context.partition_key)
        return 1

    recorder = Recorder()
    clock = p.FastForwardClock()
    result = p.Flow(["keyed"], registry=registry, clock=clock).run({"partition_keys": ["c"]}, observers=[recorder])
    assert result.succeeded
    (event,) = recorder.of(p.AttemptRetrying)
    assert event.partition_key == "c" and event.partition_key_present is True
    assert event.delay == 0.5
    assert clock.sleeps == [0.5]


def test_jittered_delays_stay_within_the_jitter_band():
    registry = p.AssetRegistry()
    body, _, _ = _failing_times(100)
    p.asset(name="jittery", retry=p.RetryPolicy(max_attempts=6, delay=10.0, backoff=2.0, jitter=0.5),
            registry=registry)(body)
    recorder = Recorder()
    p.Flow(["jittery"], registry=registry, clock=p.FastForwardClock()).run(observers=[recorder])
    delays = [event.delay for event in recorder.of(p.AttemptRetrying)]
    nominal = [10.0, 20.0, 40.0, 80.0, 160.0]
    assert len(delays) == 5
    for delay, full in zip(delays, nominal, strict=True):
        assert full * 0.5 <= delay <= full


# -- callbacks ---------------------------------------------------------------------


def test_on_retry_receives_the_exception_and_the_failed_invocation_number():
    registry = p.AssetRegistry()
    contexts: list[p.CallbackContext] = []
    successes: list[p.CallbackContext] = []
    lock = threading.Lock()
    body, _, raised = _failing_times(2, output="fine")

    def on_retry(context):
        with lock:
            contexts.append(context)

    def on_success(context):
        successes.append(context)

    p.asset(
        name="flaky",
        partition_def=LETTERS,
        retry=p.RetryPolicy(max_attempts=3),
        on_retry=on_retry,
        on_success=on_success,
        registry=registry,
    )(lambda context: body())

    result = p.Flow(["flaky"], registry=registry, clock=p.FastForwardClock()).run({"partition_keys": ["b"]})

    assert result.succeeded
    assert len(contexts) == 2
    contexts.sort(key=lambda context: context.invocation_number)
    assert [context.invocation_number for context in contexts] == [1, 2]
    assert [context.exception for context in contexts] == raised
    for context in contexts:
        assert isinstance(context, p.CallbackContext)
        assert context.asset_name == "flaky"
        assert context.partition_key == "b"
        assert context.partition_key_present is True
        assert context.run_id == result.run_id
        assert context.result is None
    assert len(successes) == 1 and successes[0].exception is None
    assert result.callback_errors == ()


def test_on_failure_follows_exhausted_retries_and_on_retry_precedes_each_retry():
    registry = p.AssetRegistry()
    order: list[tuple[str, int | None]] = []
    lock = threading.Lock()

    def note(label):
        def callback(context):
            with lock:
                order.append((label, context.invocation_number))

        return callback

    body, _, raised = _failing_times(100)
    p.asset(
        name="doomed",
        retry=p.RetryPolicy(max_attempts=3),
        on_retry=note("retry"),
        on_failure=note("failure"),
        registry=registry,
    )(body)

    failures: list[p.CallbackContext] = []
    p.asset(name="watched", retry=p.RetryPolicy(max_attempts=2),
            on_failure=failures.append, registry=registry)(_failing_times(100)[0])

    result = p.Flow(["doomed", "watched"], registry=registry, clock=p.FastForwardClock()).run()
    assert result.status is p.RunStatus.FAILED
    assert sorted(order) == [("failure", 3), ("retry", 1), ("retry", 2)]
    assert len(failures) == 1
    assert isinstance(failures[0].exception, Boom)
    assert failures[0].exception.args == ("failure 2",)


def test_an_on_retry_callback_that_raises_is_recorded_and_does_not_stop_the_retry():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(1, output=7)

    def on_retry(context):
        raise RuntimeError("callback broke")

    p.asset(name="flaky", retry=p.RetryPolicy(max_attempts=2), on_retry=on_retry, registry=registry)(body)
    result = p.Flow(["flaky"], registry=registry, clock=p.FastForwardClock()).run()

    assert result.succeeded
    assert len(calls) == 2
    assert result.tasks["flaky"].attempts[0].output == 7
    assert [error.callback for error in result.callback_errors] == ["on_retry"]
    assert isinstance(result.callback_errors[0].exception, RuntimeError)


# -- errors that are never retried -------------------------------------------------------


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_keyboard_interrupt_and_system_exit_from_a_body_are_never_retried(exc_type, kind):
    registry = p.AssetRegistry()
    calls: list[int] = []
    classified: list[BaseException] = []

    def classify(exc):
        classified.append(exc)
        return p.Retry()

    if kind == "sync":

        @p.asset(retry=p.RetryPolicy(max_attempts=5), registry=registry)
        def interrupted():
            calls.append(1)
            raise exc_type("stop")

        @p.asset(resource="api", registry=registry)
        def classified_interrupt():
            calls.append(2)
            raise exc_type("stop")

    else:

        @p.asset(retry=p.RetryPolicy(max_attempts=5), registry=registry)
        async def interrupted():
            calls.append(1)
            raise exc_type("stop")

        @p.asset(resource="api", registry=registry)
        async def classified_interrupt():
            calls.append(2)
            raise exc_type("stop")

    recorder = Recorder()
    result = p.Flow(
        ["interrupted", "classified_interrupt"],
        registry=registry,
        clock=p.FastForwardClock(),
        resources={"api": p.ResourcePolicy(max_attempts=5, classify_failure=classify)},
    ).run(observers=[recorder])

    assert sorted(calls) == [1, 2]
    for name in ("interrupted", "classified_interrupt"):
        (attempt,) = result.tasks[name].attempts
        assert attempt.status is p.AttemptStatus.FAILED
        assert isinstance(attempt.exception, exc_type)
        assert len(attempt.invocations) == 1
    assert recorder.of(p.AttemptRetrying) == []
    assert classified == []


# -- resource classification ---------------------------------------------------------------


def _classified_flow(registry, classify, *, max_attempts=5, targets=("work",), clock=None):
    return p.Flow(
        list(targets),
        registry=registry,
        clock=clock or p.FastForwardClock(),
        resources={"api": p.ResourcePolicy(max_attempts=max_attempts, classify_failure=classify)},
    )


def test_classifier_fail_stops_retries_even_with_a_retry_policy():
    registry = p.AssetRegistry()
    seen: list[BaseException] = []
    body, calls, raised = _failing_times(100)
    p.asset(name="work", resource="api", retry=p.RetryPolicy(max_attempts=5), registry=registry)(body)

    def classify(exc):
        seen.append(exc)
        return p.Fail()

    clock = p.FastForwardClock()
    result = _classified_flow(registry, classify, clock=clock).run()
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert len(calls) == 1
    assert seen == raised
    assert attempt.exception is raised[0]
    assert clock.sleeps == []


def test_classifier_retry_waits_after_seconds_and_is_bounded_by_the_resource_max_attempts():
    registry = p.AssetRegistry()
    body, calls, raised = _failing_times(100)
    p.asset(name="work", resource="api", retry=p.RetryPolicy(max_attempts=10), registry=registry)(body)
    clock = p.FastForwardClock()
    recorder = Recorder()

    result = _classified_flow(registry, lambda exc: p.Retry(after_seconds=5), max_attempts=3, clock=clock).run(
        observers=[recorder]
    )
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert len(calls) == 3
    assert [invocation.number for invocation in attempt.invocations] == [1, 2, 3]
    assert attempt.exception is raised[-1]
    assert clock.sleeps == [5.0, 5.0]
    assert [event.delay for event in recorder.of(p.AttemptRetrying)] == [5.0, 5.0]


def test_classifier_retry_with_the_default_max_attempts_of_one_does_not_retry():
    registry = p.AssetRegistry()
    body, calls, raised = _failing_times(100)
    p.asset(name="work", resource="api", registry=registry)(body)
    clock = p.FastForwardClock()

    result = p.Flow(
        ["work"],
        registry=registry,
        clock=clock,
        resources={"api": p.ResourcePolicy(classify_failure=lambda exc: p.Retry(after_seconds=1.0))},
    ).run()
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert attempt.exception is raised[0]
    assert len(calls) == 1
    assert clock.sleeps == []


def test_classifier_retry_can_recover_the_attempt():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(1, output="back")
    p.asset(name="work", resource="api", registry=registry)(body)
    clock = p.FastForwardClock()

    result = _classified_flow(registry, lambda exc: p.Retry(after_seconds=2.5), clock=clock).run()
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.SUCCESS
    assert attempt.output == "back"
    assert [i.succeeded for i in attempt.invocations] == [False, True]
    assert clock.sleeps == [2.5]


def test_classifier_decides_per_exception():
    registry = p.AssetRegistry()
    calls: dict[str, int] = {}

    @p.asset(partition_def=LETTERS, resource="api", registry=registry)
    def work(context):
        key = context.partition_key
        calls[key] = calls.get(key, 0) + 1
        if key == "a":
            raise TimeoutError("slow")
        raise ValueError("bad input")

    def classify(exc):
        return p.Retry() if isinstance(exc, TimeoutError) else p.Fail()

    result = _classified_flow(registry, classify, max_attempts=4).run({"partition_keys": ["a", "b"]})
    assert calls == {"a": 4, "b": 1}
    assert result.failed_partition_keys("work") == ("a", "b")


def test_resource_max_attempts_without_a_classifier_retries_immediately():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(100)
    p.asset(name="work", resource="api", registry=registry)(body)
    clock = p.FastForwardClock()
    recorder = Recorder()

    result = p.Flow(["work"], registry=registry, clock=clock,
                    resources={"api": p.ResourcePolicy(max_attempts=3)}).run(observers=[recorder])
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert len(calls) == 3
    assert [event.delay for event in recorder.of(p.AttemptRetrying)] == [0.0, 0.0]
    assert clock.monotonic() == 0.0
    assert all(seconds == 0.0 for seconds in clock.sleeps)


def test_resource_max_attempts_without_a_classifier_can_recover():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(2, output=5)
    p.asset(name="work", resource="api", registry=registry)(body)

    result = p.Flow(["work"], registry=registry, clock=p.FastForwardClock(),
                    resources={"api": p.ResourcePolicy(max_attempts=3)}).run()
    (attempt,) = result.tasks["work"].attempts
    assert attempt.status is p.AttemptStatus.SUCCESS and attempt.output == 5
    assert len(attempt.invocations) == 3


def test_default_resource_policy_does_not_retry():
    registry = p.AssetRegistry()
    body, calls, _ = _failing_times(1)
    p.asset(name="work", resource="api", registry=registry)(body)
    result = p.Flow(["work"], registry=registry, resources={"api": p.ResourcePolicy()}).run()
    assert len(calls) == 1
    assert result.tasks["work"].attempts[0].status is p.AttemptStatus.FAILED


@pytest.mark.parametrize(
    "classify",
    [
        pytest.param(lambda exc: (_ for _ in ()).throw(RuntimeError("classifier broke")), id="raises"),
        pytest.param(lambda exc: None, id="None"),
        pytest.param(lambda exc: "retry", id="string"),
        pytest.param(lambda exc: p.Retry, id="Retry-class"),
        pytest.param(lambda exc: p.Fail, id="Fail-class"),
        pytest.param(lambda exc: p.OpenCircuit, id="OpenCircuit-class"),
        pytest.param(lambda exc: p.RetryPolicy(), id="RetryPolicy"),
        pytest.param(lambda exc: True, id="True"),
    ],
)
def test_a_broken_classifier_fails_the_attempt_with_a_policy_error_and_the_run_continues(classify):
    registry = p.AssetRegistry()
    calls: list[str] = []

    @p.asset(partition_def=LETTERS, resource="tenant_api", registry=registry)
    def work(context):
        calls.append(context.partition_key)
        raise Boom(f"body failed for {context.partition_key}")

    @p.asset(partition_def=LETTERS, registry=registry)
    def after(work):
        return work

    @p.asset(partition_def=LETTERS, registry=registry)
    def independent(context):
        return context.partition_key

    recorder = Recorder()
    result = p.Flow(
        ["after", "independent"],
        registry=registry,
        clock=p.FastForwardClock(),
        resources={"tenant_api": p.ResourcePolicy(max_attempts=5, classify_failure=classify)},
    ).run({"partition_keys": ["a", "b", "c"]}, observers=[recorder])

    assert result.status is p.RunStatus.FAILED
    assert sorted(calls) == ["a", "b", "c"]  # no retries
    for attempt in result.tasks["work"].attempts:
        assert attempt.status is p.AttemptStatus.FAILED
        assert isinstance(attempt.exception, p.PolicyError)
        assert "tenant_api" in str(attempt.exception)
        assert "classify_failure" in str(attempt.exception)
        assert attempt.failure is not None and attempt.failure.type.endswith("PolicyError")
        assert len(attempt.invocations) == 1
    assert result.failed_partition_keys("work") == ("a", "b", "c")
    assert all(a.reason is p.SkipReason.DEPENDENCY_FAILED for a in result.tasks["after"].attempts)
    assert [a.output for a in result.tasks["independent"].attempts] == ["a", "b", "c"]
    assert recorder.of(p.AttemptRetrying) == []
    assert len(recorder.of(p.RunFinished)) == 1


def test_a_classifier_that_raises_is_named_in_the_policy_error():
    registry = p.AssetRegistry()

    @p.asset(resource="api", registry=registry)
    def work():
        raise Boom("body")

    def classify(exc):
        raise LookupError("no rule for this")

    result = _classified_flow(registry, classify).run()
    error = result.tasks["work"].attempts[0].exception
    assert isinstance(error, p.PolicyError)
    assert "'api'" in str(error)
    assert "LookupError" in str(error) or "no rule for this" in str(error)
