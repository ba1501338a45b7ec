"""Resource policies at run time: concurrency, rate windows, cooldowns, circuits, statistics (SPEC §5, §6)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pytest

import partita as p

WAIT = 10.0  # seconds a synchronisation primitive may wait before the test gives up


class AnyKey(p.PartitionDef):
    """Identity normalization: every hashable value (falsey ones too) is a key."""

    @property
    def domain(self) -> str:
        return "custom:resources-test"


ANY = AnyKey()


class Boom(Exception):
    pass


class Recorder:
    """Keeps every event, with the clock's time when it was delivered."""

    def __init__(self, clock=None) -> None:
        self.clock = clock
        self.events: list[tuple[float | None, p.ExecutionEvent]] = []
        self.hooks: list = []

    def on_event(self, event) -> None:
        now = self.clock.monotonic() if self.clock is not None else None
        self.events.append((now, event))
        for hook in self.hooks:
            hook(event)

    def of(self, kind):
        return [event for _, event in self.events if isinstance(event, kind)]

    def starts(self, asset_name=None):
        """(time, key, invocation, position) of every AttemptStarted, in delivery order."""
        return [
            (now, event.partition_key, event.invocation, position)
            for position, (now, event) in enumerate(self.events)
            if isinstance(event, p.AttemptStarted) and (asset_name is None or event.asset_name == asset_name)
        ]


def _assert_rate(times, requests, per_seconds):
    times = sorted(times)
    for index, start in enumerate(times):
        in_window = [t for t in times[index:] if t < start + per_seconds]
        assert len(in_window) <= requests, (start, times)


def _statuses(result, asset_name):
    return [(attempt.status, attempt.reason) for attempt in result.tasks[asset_name].attempts]


# -- max_concurrency -------------------------------------------------------------------


def test_resource_max_concurrency_bounds_its_bodies_while_other_assets_proceed():
    registry = p.AssetRegistry()
    lock = threading.Lock()
    active = peak = 0
    saturated = threading.Event()
    other_ran = threading.Event()
    pair = threading.Barrier(2, timeout=WAIT)

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
            if active == 2:
                saturated.set()
        try:
            pair.wait()  # two bodies on the resource are inside at the same time
            assert other_ran.wait(WAIT), "an asset off the resource could not run while the resource was full"
        finally:
            with lock:
                active -= 1
        return context.partition_key

    @p.asset(registry=registry)
    def free():
        assert saturated.wait(WAIT), "the resource never reached its limit"
        other_ran.set()
        return "free"

    result = p.Flow(
        ["limited", "free"],
        registry=registry,
        max_concurrency=8,
        resources={"api": p.ResourcePolicy(max_concurrency=2)},
    ).run({"partition_keys": [1, 2, 3, 4, 5, 6]})

    assert result.status is p.RunStatus.SUCCESS, [a.exception for a in result.attempts()]
    assert peak == 2
    assert [attempt.output for attempt in result.tasks["limited"].attempts] == [1, 2, 3, 4, 5, 6]


def test_each_resource_has_its_own_concurrency_limit():
    registry = p.AssetRegistry()
    both = threading.Barrier(2, timeout=WAIT)
    lock = threading.Lock()
    active = {"api": 0, "db": 0}
    peak = {"api": 0, "db": 0}

    def body(resource):
        def run(context):
            with lock:
                active[resource] += 1
                peak[resource] = max(peak[resource], active[resource])
            try:
                both.wait()  # one body of each resource runs at once
            finally:
                with lock:
                    active[resource] -= 1
            return context.partition_key

        return run

    p.asset(name="on_api", partition_def=ANY, resource="api", registry=registry)(body("api"))
    p.asset(name="on_db", partition_def=ANY, resource="db", registry=registry)(body("db"))

    result = p.Flow(
        ["on_api", "on_db"],
        registry=registry,
        max_concurrency=4,
        resources={"api": p.ResourcePolicy(max_concurrency=1), "db": p.ResourcePolicy(max_concurrency=1)},
    ).run({"partition_keys": [1, 2, 3]})
    assert result.succeeded, [a.exception for a in result.attempts()]
    assert peak == {"api": 1, "db": 1}


@pytest.mark.parametrize("where", ["flow", "config"])
def test_global_max_concurrency_is_separate_from_the_resource_limit(where):
    registry = p.AssetRegistry()
    lock = threading.Lock()
    active = peak = 0
    pair = threading.Barrier(2, timeout=WAIT)

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            pair.wait()
        finally:
            with lock:
                active -= 1
        return context.partition_key

    flow_limit = 2 if where == "flow" else None
    config = {"partition_keys": [1, 2, 3, 4]}
    if where == "config":
        config["max_concurrency"] = 2
    result = p.Flow(
        ["limited"],
        registry=registry,
        max_concurrency=flow_limit,
        resources={"api": p.ResourcePolicy(max_concurrency=10)},
    ).run(config)
    assert result.succeeded, [a.exception for a in result.attempts()]
    assert peak == 2  # the global limit binds; the looser resource limit does not widen it


def test_global_limit_of_one_serializes_a_resource_with_a_higher_limit():
    registry = p.AssetRegistry()
    lock = threading.Lock()
    active = peak = 0

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        with lock:
            active -= 1
        return 1

    result = p.Flow(
        ["limited"], registry=registry, max_concurrency=1, resources={"api": p.ResourcePolicy(max_concurrency=5)}
    ).run({"partition_keys": list(range(20))})
    assert result.succeeded
    assert peak == 1


# -- rate limits ----------------------------------------------------------------------------


def test_rate_limit_spaces_starts_so_no_window_holds_more_than_requests():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock()
    body_times: list[float] = []

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    async def limited(context):
        body_times.append(clock.monotonic())
        return context.partition_key

    @p.asset(partition_def=ANY, resource="db", registry=registry)
    async def unlimited(context):
        return context.partition_key

    recorder = Recorder(clock)
    keys = list(range(7))
    result = p.Flow(
        ["limited", "unlimited"],
        registry=registry,
        clock=clock,
        max_concurrency=16,
        resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(2, 10.0)), "db": p.ResourcePolicy()},
    ).run({"partition_keys": keys}, observers=[recorder])

    assert result.succeeded
    start_times = [start[0] for start in recorder.starts("limited")]
    assert len(start_times) == len(body_times) == 7
    _assert_rate(start_times, 2, 10.0)
    _assert_rate(body_times, 2, 10.0)
    assert sorted(start_times) == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0]  # and no slower than needed
    assert [start[0] for start in recorder.starts("unlimited")] == [0.0] * 7  # another resource is not throttled


def test_rate_limit_holds_with_sync_bodies_and_a_clock_not_starting_at_zero():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock(start=500.0)

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        return context.partition_key

    recorder = Recorder(clock)
    result = p.Flow(
        ["limited"],
        registry=registry,
        clock=clock,
        resources={"api": p.ResourcePolicy(max_concurrency=3, rate_limit=p.RateLimit(3, 2.5))},
    ).run({"partition_keys": list(range(10))}, observers=[recorder])
    assert result.succeeded
    times = [start[0] for start in recorder.starts("limited")]
    assert len(times) == 10
    assert min(times) == 500.0
    _assert_rate(times, 3, 2.5)


def test_rate_limit_counts_every_invocation_including_retries():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock()

    @p.asset(resource="api", registry=registry)
    def flaky(context):
        if context.invocation_number < 3:
            raise Boom("again")
        return "ok"

    recorder = Recorder(clock)
    result = p.Flow(
        ["flaky"],
        registry=registry,
        clock=clock,
        resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(1, 5.0), max_attempts=3)},
    ).run(observers=[recorder])
    assert result.succeeded
    times = [start[0] for start in recorder.starts("flaky")]
    assert len(times) == 3
    _assert_rate(times, 1, 5.0)


def test_cancelling_a_run_held_by_a_huge_rate_window_ends_promptly():
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    async def limited(context):
        return context.partition_key

    flow = p.Flow(
        ["limited"], registry=registry, resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(1, 1e9))}
    )
    recorder = Recorder()

    async def main() -> float:
        first_finished = asyncio.Event()
        recorder.hooks.append(lambda event: isinstance(event, p.AttemptFinished) and first_finished.set())
        task = asyncio.create_task(flow.run_async({"partition_keys": [1, 2, 3, 4]}, observers=[recorder]))
        await asyncio.wait_for(first_finished.wait(), WAIT)
        await asyncio.sleep(0)
        assert not task.done()  # held by the rate window
        began = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)
        return time.monotonic() - began

    elapsed = asyncio.run(main())
    assert elapsed < 5.0
    (finished,) = recorder.of(p.RunFinished)
    result = finished.result
    assert result.status is p.RunStatus.CANCELLED
    assert _statuses(result, "limited") == [
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED),
        (p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED),
        (p.AttemptStatus.CANCELLED, p.SkipReason.CANCELLED),
    ]


def test_a_wait_for_timeout_cancels_a_run_held_by_a_huge_rate_window():
    registry = p.AssetRegistry()
    ran: list[int] = []

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        ran.append(context.partition_key)
        return context.partition_key

    flow = p.Flow(
        ["limited"], registry=registry, resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(2, 1e9))}
    )
    recorder = Recorder()

    async def main() -> float:
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(flow.run_async({"partition_keys": [1, 2, 3, 4, 5]}, observers=[recorder]), 0.5)
        return time.monotonic() - began

    assert asyncio.run(main()) < 5.0
    assert sorted(ran) == [1, 2]
    (finished,) = recorder.of(p.RunFinished)
    counts = finished.result.counts()
    assert counts[p.AttemptStatus.SUCCESS] == 2
    assert counts[p.AttemptStatus.CANCELLED] == 3


# -- cooldowns ----------------------------------------------------------------------------------


def _cooldown_flow(registry, clock, *, cooldown):
    calls: list[tuple[int, int]] = []

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def work(context):
        calls.append((context.partition_key, context.invocation_number))
        if context.partition_key == 1 and context.invocation_number == 1:
            raise Boom("429: slow down")
        return context.partition_key

    policy = p.ResourcePolicy(
        max_concurrency=1,
        max_attempts=2,
        classify_failure=lambda exc: p.Retry(after_seconds=30.0, cooldown_resource=cooldown),
    )
    return p.Flow(["work"], registry=registry, clock=clock, resources={"api": policy}), calls


def test_a_cooldown_pauses_every_invocation_on_the_resource_for_after_seconds():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock()
    flow, calls = _cooldown_flow(registry, clock, cooldown=True)
    recorder = Recorder(clock)

    result = flow.run({"partition_keys": [1, 2, 3, 4]}, observers=[recorder])

    assert result.succeeded
    failed_at = [now for now, event in recorder.events if isinstance(event, p.AttemptRetrying)]
    assert len(failed_at) == 1
    failure_time = failed_at[0]
    retry_position = next(i for i, (_, event) in enumerate(recorder.events) if isinstance(event, p.AttemptRetrying))
    later_starts = [start for start in recorder.starts("work") if start[3] > retry_position]
    assert len(later_starts) == 4  # keys 2, 3, 4 and the retry of key 1
    for now, key, invocation, _ in later_starts:
        assert now >= failure_time + 30.0, (key, invocation, now)
    assert sorted(calls) == [(1, 1), (1, 2), (2, 1), (3, 1), (4, 1)]
    api = result.resources["api"]
    assert api.retries == 1
    assert api.wait_count >= 1
    assert api.wait_duration >= 30.0  # key 2 waited out the cooldown


def test_without_cooldown_a_retry_delay_pauses_only_its_own_attempt():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock()
    flow, _ = _cooldown_flow(registry, clock, cooldown=False)
    recorder = Recorder(clock)

    result = flow.run({"partition_keys": [1, 2, 3, 4]}, observers=[recorder])
    assert result.succeeded
    by_key = {(key, invocation): now for now, key, invocation, _ in recorder.starts("work")}
    assert by_key[(2, 1)] == 0.0  # the next key starts right after the failure
    assert by_key[(1, 2)] >= 30.0


class HeldClock(p.FastForwardClock):
    """Virtual time that does not move until the test lets positive sleeps through."""

    def __init__(self) -> None:
        super().__init__()
        self._released: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._released is None:
            self._released = asyncio.Event()
        return self._released

    def release(self) -> None:
        self._event().set()

    async def sleep(self, seconds: float) -> None:
        if seconds > 0:
            try:
                await asyncio.wait_for(self._event().wait(), WAIT)
            except TimeoutError:
                pass  # give up holding; the test's assertions report what happened
        await super().sleep(seconds)


def test_a_cooldown_on_one_resource_lets_other_resources_continue():
    registry = p.AssetRegistry()
    clock = HeldClock()
    recorder = Recorder(clock)
    failure_seen = asyncio.Event()
    recorder.hooks.append(lambda event: isinstance(event, p.AttemptRetrying) and failure_seen.set())

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    async def work(context):
        if context.partition_key == 1 and context.invocation_number == 1:
            raise Boom("429: slow down")
        return context.partition_key

    @p.asset(partition_def=ANY, resource="db", registry=registry)
    async def other(context):
        await asyncio.wait_for(failure_seen.wait(), WAIT)
        if context.partition_key == 3:
            clock.release()  # the other resource finished its work while "api" was cooling down
        return context.partition_key

    result = p.Flow(
        ["work", "other"],
        registry=registry,
        clock=clock,
        resources={
            "api": p.ResourcePolicy(
                max_concurrency=1,
                max_attempts=2,
                classify_failure=lambda exc: p.Retry(after_seconds=30.0, cooldown_resource=True),
            ),
            "db": p.ResourcePolicy(max_concurrency=1),
        },
    ).run({"partition_keys": [1, 2, 3]}, observers=[recorder])

    assert result.succeeded, [a.exception for a in result.attempts()]
    retry_position = next(i for i, (_, event) in enumerate(recorder.events) if isinstance(event, p.AttemptRetrying))
    other_after = [start for start in recorder.starts("other") if start[3] > retry_position]
    assert [key for _, key, _, _ in other_after] == [2, 3]
    assert all(now < 30.0 for now, _, _, _ in other_after)  # during the api cooldown
    work_after = [start for start in recorder.starts("work") if start[3] > retry_position]
    assert len(work_after) == 3
    assert all(now >= 30.0 for now, _, _, _ in work_after)
    last_other = max(start[3] for start in other_after)
    assert all(start[3] > last_other for start in work_after)


# -- circuits -----------------------------------------------------------------------------------


def test_open_circuit_fails_the_attempt_and_skips_pending_work_on_that_resource():
    registry = p.AssetRegistry()
    calls: list[tuple[str, int]] = []

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def fetch(context):
        calls.append(("fetch", context.partition_key))
        if context.partition_key == 1:
            raise Boom("quota exhausted")
        return context.partition_key

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def enrich(fetch):
        calls.append(("enrich", fetch))
        return fetch

    @p.asset(partition_def=ANY, registry=registry)
    def report(enrich):
        return enrich

    @p.asset(partition_def=ANY, resource="db", registry=registry)
    def unrelated(context):
        return context.partition_key

    result = p.Flow(
        ["report", "unrelated"],
        registry=registry,
        resources={
            "api": p.ResourcePolicy(max_concurrency=1, classify_failure=lambda exc: p.OpenCircuit()),
            "db": p.ResourcePolicy(),
        },
    ).run({"partition_keys": [0, 1, 2, 3]})

    circuit = (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN)
    dependency = (p.AttemptStatus.SKIPPED, p.SkipReason.DEPENDENCY_FAILED)
    assert result.status is p.RunStatus.FAILED
    assert _statuses(result, "fetch") == [(p.AttemptStatus.SUCCESS, None), (p.AttemptStatus.FAILED, None), circuit, circuit]
    assert isinstance(result.tasks["fetch"].attempts[1].exception, Boom)
    # Later assets start first: key 0's enrich ran before fetch 1 opened the circuit.
    assert _statuses(result, "enrich") == [(p.AttemptStatus.SUCCESS, None), dependency, dependency, dependency]
    assert _statuses(result, "report") == [(p.AttemptStatus.SUCCESS, None)] + [dependency] * 3
    assert _statuses(result, "unrelated") == [(p.AttemptStatus.SUCCESS, None)] * 4
    assert calls == [("fetch", 0), ("enrich", 0), ("fetch", 1)]  # no body ran on the open circuit
    for attempt in result.attempts():
        if attempt.reason is p.SkipReason.RESOURCE_CIRCUIT_OPEN:
            assert attempt.invocations == ()
            assert attempt.blocked_by == ()

    assert result.failed_partition_keys("fetch") == (1,)
    assert result.circuit_skipped_partition_keys("fetch") == (2, 3)
    assert result.circuit_skipped_partition_keys("enrich") == ()  # key 0 ran; the others waited on a failed fetch
    assert result.circuit_skipped_partition_keys("report") == ()  # dependency skips are not circuit skips
    assert result.circuit_skipped_partition_keys("unrelated") == ()
    assert isinstance(result.circuit_skipped_partition_keys("fetch"), tuple)


def test_work_that_becomes_ready_after_the_circuit_opened_is_skipped_without_running():
    registry = p.AssetRegistry()
    circuit_opened = threading.Event()
    ran: list[int] = []

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def opener(context):
        raise Boom("down")

    @p.asset(partition_def=ANY, registry=registry)
    def slow_source(context):
        assert circuit_opened.wait(WAIT)
        return context.partition_key

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def consumer(slow_source):
        ran.append(slow_source)
        return slow_source

    recorder = Recorder()
    recorder.hooks.append(
        lambda event: isinstance(event, p.AttemptFinished)
        and event.attempt.asset_name == "opener"
        and circuit_opened.set()
    )
    result = p.Flow(
        ["opener", "consumer"],
        registry=registry,
        max_concurrency=4,
        resources={"api": p.ResourcePolicy(max_concurrency=1, classify_failure=lambda exc: p.OpenCircuit())},
    ).run({"partition_keys": [7]}, observers=[recorder])

    assert _statuses(result, "slow_source") == [(p.AttemptStatus.SUCCESS, None)]
    assert _statuses(result, "consumer") == [(p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN)]
    assert ran == []
    assert result.circuit_skipped_partition_keys("consumer") == (7,)


def test_circuit_queries_return_original_falsey_keys_in_attempt_order():
    registry = p.AssetRegistry()

    @dataclasses.dataclass(frozen=True)
    class Tenant:
        name: str

    opener = Tenant("opener")
    tenant = Tenant("acme")
    keys = [opener, 0, "", False, 0.0, (), frozenset(), tenant, 5]

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def tenants(context):
        if context.partition_key is opener:
            raise Boom("tenant api down")
        return context.partition_key

    result = p.Flow(
        ["tenants"],
        registry=registry,
        resources={"api": p.ResourcePolicy(max_concurrency=1, classify_failure=lambda exc: p.OpenCircuit())},
    ).run({"partition_keys": keys})

    skipped = result.circuit_skipped_partition_keys("tenants")
    assert skipped == tuple(keys[1:])
    assert [type(key) for key in skipped] == [type(key) for key in keys[1:]]
    assert skipped[6] is tenant
    assert result.failed_partition_keys("tenants")[0] is opener
    with pytest.raises((TypeError, AttributeError)):
        skipped.append(1)  # type: ignore[attr-defined]


def test_failed_keys_include_falsey_keys_in_attempt_order():
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def picky(context):
        if context.partition_key in ("ok",):
            return 1
        raise Boom("no")

    result = p.Flow(
        ["picky"], registry=registry, resources={"api": p.ResourcePolicy(classify_failure=lambda exc: p.Fail())}
    ).run({"partition_keys": [0, "ok", "", False, None]})
    failed = result.failed_partition_keys("picky")
    assert failed == (0, "", False, None)
    assert [type(key) for key in failed] == [int, str, bool, type(None)]
    assert result.circuit_skipped_partition_keys("picky") == ()


def test_outcome_queries_reject_unknown_and_unpartitioned_assets():
    registry = p.AssetRegistry()

    @p.asset(resource="api", registry=registry)
    def single():
        return 1

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def keyed(context):
        return context.partition_key

    @p.asset(registry=registry)
    def not_in_run():
        return 0

    result = p.Flow(["single", "keyed"], registry=registry, resources={"api": p.ResourcePolicy()}).run(
        {"partition_keys": [1]}
    )
    for query in (result.circuit_skipped_partition_keys, result.failed_partition_keys):
        with pytest.raises(KeyError):
            query("missing")
        with pytest.raises(KeyError):
            query("not_in_run")
        with pytest.raises(ValueError):
            query("single")
        assert query("keyed") == ()


def test_a_retry_waiting_when_the_circuit_opens_is_skipped_with_its_invocations():
    registry = p.AssetRegistry()
    calls: list[tuple[int, int]] = []

    class Fatal(Exception):
        pass

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def work(context):
        calls.append((context.partition_key, context.invocation_number))
        if context.partition_key == 0:
            raise Boom("try later")
        if context.partition_key == 1:
            raise Fatal("give up on this API")
        return context.partition_key

    def classify(exc):
        return p.OpenCircuit() if isinstance(exc, Fatal) else p.Retry(after_seconds=1000.0)

    flow = p.Flow(
        ["work"],
        registry=registry,  # the real clock: the 1000 s retry must be abandoned, not awaited
        resources={"api": p.ResourcePolicy(max_concurrency=1, max_attempts=5, classify_failure=classify)},
    )
    began = time.monotonic()
    result = asyncio.run(asyncio.wait_for(flow.run_async({"partition_keys": [0, 1, 2]}), WAIT))
    assert time.monotonic() - began < 5.0

    first, second, third = result.tasks["work"].attempts
    assert (first.status, first.reason) == (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN)
    assert [(i.number, i.succeeded) for i in first.invocations] == [(1, False)]
    assert second.status is p.AttemptStatus.FAILED
    assert (third.status, third.reason) == (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN)
    assert calls == [(0, 1), (1, 1)]
    assert result.circuit_skipped_partition_keys("work") == (0, 2)
    assert result.failed_partition_keys("work") == (1,)


def test_invocations_running_when_the_circuit_opens_finish_but_are_not_retried():
    registry = p.AssetRegistry()
    all_started = threading.Barrier(3, timeout=WAIT)
    circuit_opened = threading.Event()
    calls: list[tuple[int, int]] = []
    lock = threading.Lock()

    class Fatal(Exception):
        pass

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def work(context):
        with lock:
            calls.append((context.partition_key, context.invocation_number))
        if context.partition_key == 3:
            return 3
        all_started.wait()
        if context.partition_key == 0:
            raise Fatal("API is gone")
        assert circuit_opened.wait(WAIT)
        if context.partition_key == 1:
            raise Boom("transient")  # would be retried, but the circuit is open
        return context.partition_key

    recorder = Recorder()
    recorder.hooks.append(
        lambda event: isinstance(event, p.AttemptFinished)
        and event.attempt.partition_key == 0
        and circuit_opened.set()
    )

    def classify(exc):
        return p.OpenCircuit() if isinstance(exc, Fatal) else p.Retry()

    result = p.Flow(
        ["work"],
        registry=registry,
        max_concurrency=8,
        resources={"api": p.ResourcePolicy(max_concurrency=3, max_attempts=5, classify_failure=classify)},
    ).run({"partition_keys": [0, 1, 2, 3]}, observers=[recorder])

    assert _statuses(result, "work") == [
        (p.AttemptStatus.FAILED, None),
        (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN),
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN),
    ]
    assert len(result.tasks["work"].attempts[1].invocations) == 1
    assert sorted(calls) == [(0, 1), (1, 1), (2, 1)]


def test_thousands_of_keys_behind_an_early_open_circuit_finish_quickly():
    registry = p.AssetRegistry()
    count = 5_000

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def fetch(context):
        if context.partition_key == 0:
            raise Boom("quota exhausted")
        return context.partition_key

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def store(fetch):
        return fetch

    began = time.monotonic()
    result = p.Flow(
        ["store"],
        registry=registry,
        resources={"api": p.ResourcePolicy(max_concurrency=1, classify_failure=lambda exc: p.OpenCircuit())},
    ).run({"partition_keys": list(range(count))})
    elapsed = time.monotonic() - began

    assert elapsed < 30.0, elapsed
    assert result.failed_partition_keys("fetch") == (0,)
    assert result.circuit_skipped_partition_keys("fetch") == tuple(range(1, count))
    assert result.resources["api"].invocations == 1


def test_thousands_of_keys_on_a_limited_resource_finish_quickly():
    registry = p.AssetRegistry()
    count = 5_000

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def fetch(context):
        return context.partition_key

    began = time.monotonic()
    result = p.Flow(
        ["fetch"], registry=registry, resources={"api": p.ResourcePolicy(max_concurrency=2)}
    ).run({"partition_keys": list(range(count))})
    assert time.monotonic() - began < 30.0
    assert result.succeeded
    assert result.resources["api"].invocations == count


# -- statistics -------------------------------------------------------------------------------------


def test_resource_statistics_count_invocations_outcomes_and_retries():
    registry = p.AssetRegistry()
    counts: dict[str, int] = {}
    lock = threading.Lock()

    @p.asset(partition_def=ANY, resource="api", retry=p.RetryPolicy(max_attempts=3), registry=registry)
    def fetch(context):
        key = context.partition_key
        with lock:
            counts[key] = counts.get(key, 0) + 1
            n = counts[key]
        if key == "a" and n < 3:
            raise Boom("flaky")
        if key == "c":
            raise Boom("broken")
        return key

    @p.asset(partition_def=ANY, resource="db", registry=registry)
    def save(context):
        return context.partition_key

    result = p.Flow(
        ["fetch", "save"],
        registry=registry,
        clock=p.FastForwardClock(),
        resources={"api": p.ResourcePolicy(), "db": p.ResourcePolicy()},
    ).run({"partition_keys": ["a", "b", "c"]})

    api = result.resources["api"]
    assert isinstance(api, p.ResourceStatistics)
    assert api.name == "api"
    assert (api.invocations, api.succeeded, api.failed, api.retries) == (7, 2, 5, 4)
    assert (api.wait_count, api.wait_duration) == (0, 0.0)
    durations = [i.duration for a in result.tasks["fetch"].attempts for i in a.invocations]
    assert len(durations) == 7
    assert api.invocation_duration == pytest.approx(sum(durations))
    assert api.invocation_duration >= 0

    db = result.resources["db"]
    assert (db.name, db.invocations, db.succeeded, db.failed, db.retries) == ("db", 3, 3, 0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        db.invocations = 0  # type: ignore[misc]


def test_resource_statistics_have_the_specified_fields():
    assert [field.name for field in dataclasses.fields(p.ResourceStatistics)] == [
        "name",
        "invocations",
        "succeeded",
        "failed",
        "retries",
        "wait_count",
        "wait_duration",
        "invocation_duration",
    ]


def test_statistics_follow_classifier_retries_and_circuit_skips():
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def fetch(context):
        if context.partition_key == 0:
            raise TimeoutError("slow")
        raise Boom("dead")

    def classify(exc):
        return p.Retry(after_seconds=1.0) if isinstance(exc, TimeoutError) else p.OpenCircuit()

    result = p.Flow(
        ["fetch"],
        registry=registry,
        clock=p.FastForwardClock(),
        resources={"api": p.ResourcePolicy(max_concurrency=1, max_attempts=2, classify_failure=classify)},
    ).run({"partition_keys": [0, 1, 2, 3]})
    api = result.resources["api"]
    called = sum(len(a.invocations) for a in result.tasks["fetch"].attempts)
    assert api.invocations == called
    assert api.failed == called and api.succeeded == 0
    assert api.retries >= 1
    assert 2 in result.circuit_skipped_partition_keys("fetch")
    assert 3 in result.circuit_skipped_partition_keys("fetch")


def test_wait_statistics_time_denials_by_the_rate_limit():
    registry = p.AssetRegistry()
    clock = p.FastForwardClock()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        return context.partition_key

    result = p.Flow(
        ["limited"],
        registry=registry,
        clock=clock,
        resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(1, 10.0))},
    ).run({"partition_keys": [1, 2, 3]})
    api = result.resources["api"]
    assert api.invocations == 3
    assert api.wait_count == 2  # the second and third key were ready and denied
    assert api.wait_duration == pytest.approx(20.0)  # 0 -> 10 and 10 -> 20


def test_wait_statistics_count_denials_by_the_resource_concurrency_limit():
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        return context.partition_key

    @p.asset(registry=registry)
    def alongside():
        return None

    result = p.Flow(
        ["limited", "alongside"],
        registry=registry,
        max_concurrency=4,
        resources={"api": p.ResourcePolicy(max_concurrency=1)},
    ).run({"partition_keys": [1, 2, 3]})
    api = result.resources["api"]
    assert api.invocations == 3
    assert api.wait_count == 2
    assert 0.0 <= api.wait_duration <= result.duration + 1e-6


@pytest.mark.parametrize(
    "policy", [p.ResourcePolicy(), p.ResourcePolicy(max_concurrency=1)], ids=["no-limits", "same-limit"]
)
def test_global_only_queueing_is_not_a_resource_wait(policy):
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def fetch(context):
        return context.partition_key

    @p.asset(partition_def=ANY, registry=registry)
    def other(context):
        return context.partition_key

    result = p.Flow(["fetch", "other"], registry=registry, max_concurrency=1, resources={"api": policy}).run(
        {"partition_keys": list(range(6))}
    )
    assert result.succeeded
    api = result.resources["api"]
    assert api.invocations == 6
    assert (api.wait_count, api.wait_duration) == (0, 0.0)


def test_dependency_delay_is_not_a_resource_wait():
    registry = p.AssetRegistry()

    @p.asset(partition_def=ANY, registry=registry)
    def upstream(context):
        return context.partition_key

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def downstream(upstream):
        return upstream

    result = p.Flow(
        ["downstream"], registry=registry, resources={"api": p.ResourcePolicy(max_concurrency=1)}, max_concurrency=1
    ).run({"partition_keys": [1]})
    assert result.succeeded
    assert result.resources["api"].wait_count == 0
    assert result.resources["api"].wait_duration == 0.0


def test_resources_mapping_lists_only_resources_used_by_planned_assets():
    registry = p.AssetRegistry()

    @p.asset(resource="db", registry=registry)
    def upstream():
        raise Boom("nothing downstream runs")

    @p.asset(resource="api", registry=registry)
    def target(upstream):
        return upstream

    @p.asset(resource="elsewhere", registry=registry)
    def unrelated():
        return 0

    result = p.Flow(
        ["target"],
        registry=registry,
        resources={
            "api": p.ResourcePolicy(),
            "db": p.ResourcePolicy(),
            "elsewhere": p.ResourcePolicy(),
            "declared_only": p.ResourcePolicy(),
        },
    ).run()
    assert set(result.resources) == {"api", "db"}
    assert result.resources["db"].invocations == 1 and result.resources["db"].failed == 1
    api = result.resources["api"]  # planned but never invoked: present, with zeros
    assert (api.invocations, api.succeeded, api.failed, api.retries, api.wait_count) == (0, 0, 0, 0, 0)
    assert api.invocation_duration == 0.0 and api.wait_duration == 0.0
    with pytest.raises(TypeError):
        result.resources["api"] = api  # type: ignore[index]


def test_a_run_without_resources_has_an_empty_resources_mapping():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain():
        return 1

    result = p.Flow(["plain"], registry=registry, resources={"api": p.ResourcePolicy()}).run()
    assert dict(result.resources) == {}


@pytest.mark.parametrize("start, per_seconds", [(0.7, 0.1), (100.1, 0.1), (3.3, 1.3)])
def test_a_rate_window_reopens_at_its_own_reopening_time_under_float_rounding(start, per_seconds):
    registry = p.AssetRegistry()
    clock = p.FastForwardClock(start=start)

    @p.asset(partition_def=ANY, resource="api", registry=registry)
    def limited(context):
        return context.partition_key

    flow = p.Flow(
        ["limited"],
        registry=registry,
        clock=clock,
        resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(1, per_seconds))},
    )

    async def main():
        return await asyncio.wait_for(flow.run_async({"partition_keys": [1, 2, 3]}), 2.0)

    result = asyncio.run(main())  # a livelocked run is cancelled by the timeout: TimeoutError
    assert result.succeeded
    assert clock.monotonic() == pytest.approx(start + 2 * per_seconds)
