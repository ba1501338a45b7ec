"""Lifecycle callbacks (SPEC §7, §14).

Asset callbacks (`on_success`, `on_failure`, `on_retry`) and flow callbacks
(`on_success`, `on_failure`, `on_complete`) take one positional
`CallbackContext`. A callback that raises is recorded in
`RunResult.callback_errors` and never changes the outcome it reports on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]


class Calls:
    """Thread-safe list of what callbacks received (sync callbacks run on worker threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list = []

    def add(self, item) -> None:
        with self._lock:
            self.items.append(item)


def _retry_flow(registry, **flow_options):
    return p.Flow(["flaky"], registry=registry, clock=p.FastForwardClock(), **flow_options)


# -- asset callbacks ----------------------------------------------------------


def test_asset_on_success_receives_one_positional_callback_context_per_attempt():
    registry = p.AssetRegistry()
    calls = Calls()

    def on_success(*args, **kwargs):
        calls.add((args, kwargs))

    @p.asset(partition_def=DAYS, registry=registry, on_success=on_success)
    def daily(context):
        return context.partition_key.day

    result = p.Flow(["daily"], registry=registry).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert result.callback_errors == ()
    assert len(calls.items) == 3
    for args, kwargs in calls.items:
        assert kwargs == {}
        assert len(args) == 1
        assert isinstance(args[0], p.CallbackContext)
    contexts = sorted((args[0] for args, _ in calls.items), key=lambda c: c.partition_key)
    assert [c.partition_key for c in contexts] == [dt.date(2026, 8, d) for d in (8, 9, 10)]
    for context in contexts:
        assert context.run_id == result.run_id
        assert context.asset_name == "daily"
        assert context.partition_key_present is True
        assert context.exception is None
        assert context.invocation_number == 1
        assert context.result is None


def test_asset_callback_of_an_unpartitioned_asset_has_no_key():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(registry=registry, on_success=calls.add)
    def settings():
        return {}

    result = p.Flow(["settings"], registry=registry).run()

    (context,) = calls.items
    assert context.asset_name == "settings"
    assert context.partition_key is None
    assert context.partition_key_present is False
    assert context.run_id == result.run_id


class AnyKey(p.PartitionDef):
    """A custom definition with identity normalization: every value is a key."""

    @property
    def domain(self) -> str:
        return "custom:any"


def test_falsey_partition_keys_reach_callbacks_as_present_keys():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(partition_def=AnyKey(), registry=registry, on_success=calls.add)
    def anything(context):
        return context.partition_key

    p.Flow(["anything"], registry=registry).run({"partition_keys": [0, "", "x"]})

    keys = sorted((repr(c.partition_key), c.partition_key_present) for c in calls.items)
    assert keys == [("''", True), ("'x'", True), ("0", True)]


def test_asset_on_failure_receives_the_exception_and_the_final_invocation_number():
    registry = p.AssetRegistry()
    calls = Calls()
    boom = RuntimeError("boom")

    @p.asset(partition_def=DAYS, registry=registry, on_failure=calls.add, on_success=calls.add)
    def daily(context):
        if context.partition_key.day == 9:
            raise boom
        return 1

    result = p.Flow(["daily"], registry=registry).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.FAILED
    failures = [c for c in calls.items if c.exception is not None]
    successes = [c for c in calls.items if c.exception is None]
    assert len(successes) == 2
    (failure,) = failures
    assert failure.exception is boom
    assert failure.asset_name == "daily"
    assert failure.partition_key == dt.date(2026, 8, 9)
    assert failure.partition_key_present is True
    assert failure.invocation_number == 1
    assert failure.run_id == result.run_id


def test_asset_on_retry_runs_for_each_retried_invocation_then_on_success_once():
    registry = p.AssetRegistry()
    retries, successes, failures = Calls(), Calls(), Calls()
    errors = [ValueError("first"), ValueError("second")]

    @p.asset(
        registry=registry,
        retry=p.RetryPolicy(max_attempts=3, delay=1.0),
        on_retry=retries.add,
        on_success=successes.add,
        on_failure=failures.add,
    )
    def flaky(context):
        if context.invocation_number <= 2:
            raise errors[context.invocation_number - 1]
        return "ok"

    result = _retry_flow(registry).run()

    assert result.status is p.RunStatus.SUCCESS
    assert sorted((c.invocation_number, c.exception) for c in retries.items) == [(1, errors[0]), (2, errors[1])]
    assert all(c.asset_name == "flaky" and c.run_id == result.run_id for c in retries.items)
    (success,) = successes.items
    assert success.invocation_number == 3
    assert success.exception is None
    assert failures.items == []


def test_asset_on_failure_runs_once_after_retries_are_exhausted():
    registry = p.AssetRegistry()
    retries, failures = Calls(), Calls()

    @p.asset(
        registry=registry,
        retry=p.RetryPolicy(max_attempts=2),
        on_retry=retries.add,
        on_failure=failures.add,
    )
    def flaky(context):
        raise RuntimeError(f"invocation {context.invocation_number}")

    result = _retry_flow(registry).run()

    assert result.status is p.RunStatus.FAILED
    assert [c.invocation_number for c in retries.items] == [1]
    (failure,) = failures.items
    assert failure.invocation_number == 2
    assert str(failure.exception) == "invocation 2"


def test_skipped_attempts_do_not_trigger_asset_callbacks():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(partition_def=DAYS, registry=registry)
    def upstream(context):
        raise RuntimeError("no data")

    @p.asset(partition_def=DAYS, registry=registry, on_success=calls.add, on_failure=calls.add, on_retry=calls.add)
    def downstream(upstream):
        return upstream

    result = p.Flow(["downstream"], registry=registry).run({"partition_keys": KEYS})

    assert all(a.status is p.AttemptStatus.SKIPPED for a in result.tasks["downstream"].attempts)
    assert calls.items == []


# -- flow callbacks -------------------------------------------------------------


def _flow_with_callbacks(registry, targets, calls):
    def record(label):
        def callback(*args, **kwargs):
            calls.add((label, args, kwargs))

        return callback

    return p.Flow(
        targets,
        registry=registry,
        on_success=record("on_success"),
        on_failure=record("on_failure"),
        on_complete=record("on_complete"),
    )


def test_flow_on_success_and_on_complete_receive_the_runs_result():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(partition_def=DAYS, registry=registry)
    def daily(context):
        return context.partition_key.day

    result = _flow_with_callbacks(registry, ["daily"], calls).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert [label for label, _, _ in calls.items] == ["on_success", "on_complete"]
    for _, args, kwargs in calls.items:
        assert kwargs == {}
        (context,) = args
        assert isinstance(context, p.CallbackContext)
        assert context.run_id == result.run_id
        assert context.asset_name is None
        assert context.partition_key is None
        assert context.exception is None
        assert isinstance(context.result, p.RunResult)
        assert context.result.run_id == result.run_id
        assert context.result.status is p.RunStatus.SUCCESS
        assert [a.output for a in context.result.tasks["daily"].attempts] == [8, 9, 10]


def test_flow_on_failure_and_on_complete_run_for_a_failed_run():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(partition_def=DAYS, registry=registry)
    def daily(context):
        if context.partition_key.day == 10:
            raise RuntimeError("late data")
        return 1

    result = _flow_with_callbacks(registry, ["daily"], calls).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.FAILED
    assert [label for label, _, _ in calls.items] == ["on_failure", "on_complete"]
    for _, (context,), _ in calls.items:
        assert context.result.status is p.RunStatus.FAILED
        assert context.result.failed_partition_keys("daily") == (dt.date(2026, 8, 10),)
        assert context.asset_name is None


def test_flow_callbacks_see_every_attempt_terminal():
    registry = p.AssetRegistry()
    seen = Calls()

    @p.asset(partition_def=DAYS, registry=registry)
    def a(context):
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def b(a):
        return a + 1

    def on_complete(context):
        seen.add(sum(len(task.attempts) for task in context.result.tasks.values()))

    p.Flow(["b"], registry=registry, on_complete=on_complete).run({"partition_keys": KEYS})

    assert seen.items == [6]


def test_module_level_run_accepts_flow_callbacks():
    registry = p.AssetRegistry()
    calls = Calls()

    @p.asset(registry=registry)
    def single():
        return 1

    result = p.run(["single"], registry=registry, on_complete=calls.add)

    (context,) = calls.items
    assert context.result.run_id == result.run_id


# -- raising callbacks ------------------------------------------------------------


def _raise(message):
    def callback(context):
        raise RuntimeError(message)

    return callback


def _async_raise(message):
    async def callback(context):
        await asyncio.sleep(0)
        raise RuntimeError(message)

    return callback


@pytest.mark.parametrize("make", [_raise, _async_raise], ids=["sync", "async"])
def test_a_raising_on_success_is_recorded_and_the_attempt_stays_successful(make):
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry, on_success=make("callback broke"))
    def daily(context):
        return context.partition_key.day

    @p.asset(partition_def=DAYS, registry=registry)
    def downstream(daily):
        return daily * 2

    result = p.Flow(["downstream"], registry=registry).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert [a.status for a in result.tasks["daily"].attempts] == [p.AttemptStatus.SUCCESS] * 3
    assert [a.output for a in result.tasks["downstream"].attempts] == [16, 18, 20]
    assert len(result.callback_errors) == 3
    for error in result.callback_errors:
        assert isinstance(error, p.CallbackError)
        assert error.callback == "on_success"
        assert error.asset_name == "daily"
        assert error.partition_key_present is True
        assert isinstance(error.exception, RuntimeError)
        assert error.failure.message == "callback broke"
        assert "RuntimeError" in error.failure.type
        assert "callback broke" in error.failure.traceback


@pytest.mark.parametrize("make", [_raise, _async_raise], ids=["sync", "async"])
def test_a_raising_on_failure_is_recorded_and_the_attempt_stays_failed(make):
    registry = p.AssetRegistry()
    original = ValueError("body failed")

    @p.asset(registry=registry, on_failure=make("callback broke"))
    def fragile():
        raise original

    result = p.Flow(["fragile"], registry=registry).run()

    assert result.status is p.RunStatus.FAILED
    (attempt,) = result.tasks["fragile"].attempts
    assert attempt.status is p.AttemptStatus.FAILED
    assert attempt.exception is original
    (error,) = result.callback_errors
    assert error.callback == "on_failure"
    assert error.asset_name == "fragile"
    assert error.partition_key_present is False
    assert error.failure.message == "callback broke"


@pytest.mark.parametrize("make", [_raise, _async_raise], ids=["sync", "async"])
def test_a_raising_on_retry_is_recorded_and_the_retry_still_happens(make):
    registry = p.AssetRegistry()

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2), on_retry=make("callback broke"))
    def flaky(context):
        if context.invocation_number == 1:
            raise RuntimeError("transient")
        return "recovered"

    result = _retry_flow(registry).run()

    assert result.status is p.RunStatus.SUCCESS
    (attempt,) = result.tasks["flaky"].attempts
    assert attempt.output == "recovered"
    assert len(attempt.invocations) == 2
    (error,) = result.callback_errors
    assert error.callback == "on_retry"
    assert error.asset_name == "flaky"


@pytest.mark.parametrize("make", [_raise, _async_raise], ids=["sync", "async"])
@pytest.mark.parametrize("label", ["on_success", "on_complete"])
def test_a_raising_flow_callback_is_recorded_and_the_run_stays_successful(make, label):
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def single():
        return 1

    result = p.Flow(["single"], registry=registry, **{label: make("flow callback broke")}).run()

    assert result.status is p.RunStatus.SUCCESS
    assert result.tasks["single"].attempts[0].output == 1
    (error,) = result.callback_errors
    assert label in error.callback
    assert error.asset_name is None
    assert error.failure.message == "flow callback broke"


@pytest.mark.parametrize("make", [_raise, _async_raise], ids=["sync", "async"])
def test_a_raising_flow_on_failure_is_recorded_and_the_run_stays_failed(make):
    registry = p.AssetRegistry()
    completed = Calls()

    @p.asset(registry=registry)
    def single():
        raise RuntimeError("body failed")

    result = p.Flow(
        ["single"], registry=registry, on_failure=make("flow callback broke"), on_complete=completed.add
    ).run()

    assert result.status is p.RunStatus.FAILED
    (error,) = result.callback_errors
    assert "on_failure" in error.callback
    assert error.asset_name is None
    # A raising callback does not keep the later ones from running.
    assert len(completed.items) == 1


def test_asset_and_flow_callback_errors_are_both_recorded():
    registry = p.AssetRegistry()

    @p.asset(registry=registry, on_success=_raise("asset callback"))
    def single():
        return 1

    result = p.Flow(["single"], registry=registry, on_complete=_raise("flow callback")).run()

    assert result.status is p.RunStatus.SUCCESS
    messages = sorted((error.asset_name or "", error.failure.message) for error in result.callback_errors)
    assert messages == [("", "flow callback"), ("single", "asset callback")]


def test_a_callback_raising_a_base_exception_is_recorded_too():
    registry = p.AssetRegistry()

    def on_success(context):
        raise KeyboardInterrupt

    @p.asset(registry=registry, on_success=on_success)
    def single():
        return 1

    result = p.Flow(["single"], registry=registry).run()

    assert result.status is p.RunStatus.SUCCESS
    (error,) = result.callback_errors
    assert isinstance(error.exception, KeyboardInterrupt)


def test_an_async_callback_raising_cancelled_error_is_recorded_and_the_run_still_ends():
    registry = p.AssetRegistry()

    async def on_success(context):
        raise asyncio.CancelledError("gave up inside the callback")

    @p.asset(registry=registry, on_success=on_success)
    def single():
        return 1

    async def main():
        return await asyncio.wait_for(p.Flow(["single"], registry=registry).run_async(), timeout=3)

    result = asyncio.run(main())

    assert result.status is p.RunStatus.SUCCESS
    assert result.tasks["single"].attempts[0].status is p.AttemptStatus.SUCCESS
    assert len(result.callback_errors) == 1


# -- async callbacks and volume ------------------------------------------------------


def test_async_asset_and_flow_callbacks_run_on_the_event_loop():
    registry = p.AssetRegistry()
    calls = Calls()

    async def on_success(context):
        await asyncio.sleep(0)
        calls.add(("asset", context.asset_name, context.partition_key, asyncio.get_running_loop()))

    async def on_complete(context):
        await asyncio.sleep(0)
        calls.add(("flow", context.asset_name, context.result.status, asyncio.get_running_loop()))

    @p.asset(partition_def=DAYS, registry=registry, on_success=on_success)
    def daily(context):
        return 1

    result = p.Flow(["daily"], registry=registry, on_complete=on_complete).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert result.callback_errors == ()
    asset_calls = [c for c in calls.items if c[0] == "asset"]
    assert sorted(c[2] for c in asset_calls) == [dt.date(2026, 8, d) for d in (8, 9, 10)]
    assert calls.items[-1][:3] == ("flow", None, p.RunStatus.SUCCESS)
    assert len({id(c[3]) for c in calls.items}) == 1


def test_async_callbacks_run_from_run_async():
    registry = p.AssetRegistry()
    calls = Calls()

    async def on_success(context):
        calls.add(context.partition_key)

    @p.asset(partition_def=DAYS, registry=registry, on_success=on_success)
    async def daily(context):
        await asyncio.sleep(0)
        return 1

    async def main():
        return await p.Flow(["daily"], registry=registry).run_async({"partition_keys": KEYS})

    result = asyncio.run(main())

    assert result.status is p.RunStatus.SUCCESS
    assert len(calls.items) == 3


def test_every_callback_has_finished_before_the_run_returns():
    registry = p.AssetRegistry()
    release = threading.Event()
    finished = Calls()

    def slow_callback(context):
        release.wait(10)
        finished.add(context.partition_key)

    @p.asset(partition_def=DAYS, registry=registry, on_success=slow_callback)
    def daily(context):
        if context.partition_key.day == 10:
            release.set()  # the last body lets every waiting callback proceed
        return 1

    result = p.Flow(["daily"], registry=registry, max_concurrency=1).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert len(finished.items) == 3


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_callbacks_for_thousands_of_attempts_all_run(is_async):
    registry = p.AssetRegistry()
    successes, failures = Calls(), Calls()
    count = 3000

    if is_async:

        async def on_success(context):
            successes.add(context.partition_key)

        async def on_failure(context):
            failures.add(context.partition_key)

    else:
        on_success, on_failure = successes.add, failures.add

    @p.asset(partition_def=DAYS, registry=registry, on_success=on_success, on_failure=on_failure)
    def daily(context):
        if context.partition_key.day % 2:
            raise RuntimeError("odd day")
        return 1

    first = dt.date(2010, 1, 1)
    keys = [first + dt.timedelta(days=offset) for offset in range(count)]
    result = p.Flow(["daily"], registry=registry).run({"partition_keys": keys})

    odd = [key for key in keys if key.day % 2]
    assert len(result.failed_partition_keys("daily")) == len(odd)
    assert sorted(failures.items if is_async else (c.partition_key for c in failures.items)) == odd
    succeeded = successes.items if is_async else [c.partition_key for c in successes.items]
    assert len(succeeded) == count - len(odd)
    assert len(set(succeeded)) == len(succeeded)


def test_thousands_of_raising_callbacks_are_all_recorded():
    registry = p.AssetRegistry()
    count = 2000

    @p.asset(partition_def=DAYS, registry=registry, on_success=_raise("nope"))
    def daily(context):
        return 1

    first = dt.date(2010, 1, 1)
    keys = [first + dt.timedelta(days=offset) for offset in range(count)]
    result = p.Flow(["daily"], registry=registry).run({"partition_keys": keys})

    assert result.status is p.RunStatus.SUCCESS
    assert len(result.callback_errors) == count
