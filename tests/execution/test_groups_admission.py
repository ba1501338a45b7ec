"""Partition groups bound how many selected keys progress through a chain (SPEC §4, §5; seed 003).

Ordering is read from execution events, which the scheduler emits at the
moment it starts or settles an attempt, so the assertions do not depend on
thread timing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

import partita as p

DAYS = p.DatePartitionDef()


class Recorder:
    """An observer keeping (kind, asset, key, invocation/status) tuples in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.retrying: list[tuple] = []

    def on_event(self, event) -> None:
        if isinstance(event, p.AttemptStarted):
            self.events.append(("start", event.asset_name, event.partition_key, event.invocation))
        elif isinstance(event, p.AttemptFinished):
            attempt = event.attempt
            self.events.append(("finish", attempt.asset_name, attempt.partition_key, attempt.status))
        elif isinstance(event, p.AttemptRetrying):
            self.events.append(("retrying", event.asset_name, event.partition_key, event.invocation))

    def starts(self, asset_name: str | None = None) -> list[tuple]:
        return [e for e in self.events if e[0] == "start" and (asset_name is None or e[1] == asset_name)]


def peak_active_keys(events: list[tuple], first: str, last: str) -> int:
    """Most keys between their first member's start and their last member's terminal outcome."""
    active: set = set()
    peak = 0
    for kind, asset_name, key, _ in events:
        if kind == "start" and asset_name == first:
            active.add(key)
            peak = max(peak, len(active))
        elif kind == "finish" and asset_name == last:
            active.discard(key)
    return peak


def peak_running(events: list[tuple], assets: set[str] | None = None) -> int:
    """Most invocations running at once (a skipped attempt finishes without running)."""
    running: set = set()
    peak = 0
    for kind, asset_name, key, _ in events:
        if assets is not None and asset_name not in assets:
            continue
        if kind == "start":
            running.add((asset_name, key))
            peak = max(peak, len(running))
        else:
            running.discard((asset_name, key))
    return peak


def _days(count: int, start: str = "2026-01-01") -> list[str]:
    first = DAYS.normalize_key(start)
    return [DAYS.format_key(first + dt.timedelta(days=offset)) for offset in range(count)]


_BODY = """
{prefix}def {name}({parameters}):
    {pause}
    if fail is not None:
        fail({name!r}, context)
    return ({name!r}, context.partition_key)
"""


def chain(registry, *, members=("extract", "transform", "publish"), fail=None, is_async=False, **options):
    """Register a linear chain of partitioned assets, each taking its predecessor's output.

    ``fail(asset_name, context)`` may raise to fail an invocation; ``options``
    maps a member to extra ``@asset`` keyword options.
    """
    previous = None
    for name in members:
        source = _BODY.format(
            prefix="async " if is_async else "",
            name=name,
            parameters="context" if previous is None else f"context, {previous}",
            pause="await asyncio.sleep(0)" if is_async else "pass",
        )
        namespace = {"asyncio": asyncio, "fail": fail}
        exec(source, namespace)  # noqa: S102 - a body whose parameter names its upstream
        p.asset(partition_def=DAYS, registry=registry, **options.get(name, {}))(namespace[name])
        previous = name
    return members


def test_default_group_lets_the_first_key_finish_every_member_before_the_next_key_starts():
    registry = p.AssetRegistry()
    members = chain(registry)
    recorder = Recorder()
    keys = _days(4)
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=16)

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    expected = []
    for key in (DAYS.normalize_key(k) for k in keys):
        for member in members:
            expected.append(("start", member, key, 1))
            expected.append(("finish", member, key, p.AttemptStatus.SUCCESS))
    assert recorder.events == expected


def test_without_a_group_the_same_chain_interleaves_keys():
    registry = p.AssetRegistry()
    chain(registry)
    recorder = Recorder()
    keys = _days(4)

    result = p.Flow(["publish"], registry=registry, max_concurrency=16).run(
        {"partition_keys": keys}, observers=[recorder]
    )

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "extract", "publish") > 1
    # Every key's first member is admitted before the first key's chain is done.
    first_publish_finish = recorder.events.index(("finish", "publish", DAYS.normalize_key(keys[0]), p.AttemptStatus.SUCCESS))
    extract_starts = [i for i, e in enumerate(recorder.events) if e[0] == "start" and e[1] == "extract"]
    assert len(extract_starts) == 4
    assert all(index < first_publish_finish for index in extract_starts)


def test_async_bodies_obey_the_group_too():
    registry = p.AssetRegistry()
    members = chain(registry, is_async=True)
    recorder = Recorder()
    keys = _days(5)
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=16)

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "extract", "publish") == 1
    assert [e[2] for e in recorder.starts("extract")] == [DAYS.normalize_key(k) for k in keys]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_max_active_keys_two_allows_two_keys_at_once_but_never_three(is_async):
    registry = p.AssetRegistry()
    members = chain(registry, is_async=is_async)
    recorder = Recorder()
    keys = _days(9)
    flow = p.Flow(
        ["publish"],
        registry=registry,
        partition_groups=[p.PartitionGroup(members, max_active_keys=2)],
        max_concurrency=16,
    )

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "extract", "publish") == 2
    assert len(recorder.starts()) == 27


@pytest.mark.parametrize("max_active_keys", [1, 2])
def test_keys_are_admitted_in_selection_order(max_active_keys):
    registry = p.AssetRegistry()
    members = chain(registry)
    recorder = Recorder()
    keys = ["2026-08-10", "2026-08-08", "2026-08-12", "2026-08-09", "2026-08-11"]
    flow = p.Flow(
        ["publish"],
        registry=registry,
        partition_groups=[p.PartitionGroup(members, max_active_keys=max_active_keys)],
        max_concurrency=16,
    )

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert [e[2] for e in recorder.starts("extract")] == [DAYS.normalize_key(k) for k in keys]


def test_range_selection_is_admitted_in_ascending_key_order():
    registry = p.AssetRegistry()
    members = chain(registry)
    recorder = Recorder()
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=8)

    flow.run({"partition_range": ("2026-08-01", "2026-08-06")}, observers=[recorder])

    started = [e[2] for e in recorder.starts("extract")]
    assert started == sorted(started)
    assert len(started) == 6


@pytest.mark.parametrize("retrying_member", ["extract", "transform", "publish"])
def test_a_key_keeps_its_slot_while_a_member_waits_for_a_retry(retrying_member):
    registry = p.AssetRegistry()
    keys = _days(3)
    first_key = DAYS.normalize_key(keys[0])

    def fail(asset_name, context):
        if asset_name == retrying_member and context.partition_key == first_key and context.invocation_number < 3:
            raise RuntimeError("transient")

    retry = {"retry": p.RetryPolicy(max_attempts=3, delay=30.0, backoff=2.0)}
    members = chain(registry, fail=fail, **{retrying_member: retry})
    clock = p.FastForwardClock()
    recorder = Recorder()
    flow = p.Flow(
        ["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=16, clock=clock
    )

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert clock.sleeps == [30.0, 60.0]
    retried = next(a for a in result.tasks[retrying_member].attempts if a.partition_key == first_key)
    assert len(retried.invocations) == 3
    # Nothing of the second key happens before the first key has left the group.
    second_key = DAYS.normalize_key(keys[1])
    done = recorder.events.index(("finish", "publish", first_key, p.AttemptStatus.SUCCESS))
    assert all(e[2] != second_key for e in recorder.events[:done])
    assert [e for e in recorder.events[:done] if e[0] == "retrying"] == [
        ("retrying", retrying_member, first_key, 1),
        ("retrying", retrying_member, first_key, 2),
    ]
    assert peak_active_keys(recorder.events, "extract", "publish") == 1


@pytest.mark.parametrize(("max_concurrency", "max_active_keys"), [(1, 3), (3, 2)])
def test_the_group_limit_is_separate_from_max_concurrency(max_concurrency: int, max_active_keys: int):
    registry = p.AssetRegistry()
    members = chain(registry)
    recorder = Recorder()
    keys = _days(7)
    flow = p.Flow(
        ["publish"],
        registry=registry,
        partition_groups=[p.PartitionGroup(members, max_active_keys=max_active_keys)],
        max_concurrency=max_concurrency,
    )

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    # Each limit holds on its own: the tighter one binds, and the group never admits more keys than it allows.
    assert peak_running(recorder.events) == min(max_concurrency, max_active_keys)
    assert peak_active_keys(recorder.events, "extract", "publish") <= max_active_keys


def test_run_config_max_concurrency_does_not_change_the_group_limit():
    registry = p.AssetRegistry()
    members = chain(registry)
    recorder = Recorder()
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members, max_active_keys=2)])

    result = flow.run({"partition_keys": _days(6), "max_concurrency": 32}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "extract", "publish") == 2


def test_the_group_limit_is_separate_from_a_resource_policy():
    registry = p.AssetRegistry()
    members = chain(registry, extract={"resource": "api"})
    recorder = Recorder()
    flow = p.Flow(
        ["publish"],
        registry=registry,
        resources={"api": p.ResourcePolicy(max_concurrency=1)},
        partition_groups=[p.PartitionGroup(members, max_active_keys=3)],
        max_concurrency=16,
    )

    result = flow.run({"partition_keys": _days(6)}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    # The resource still allows one extract at a time...
    assert peak_running(recorder.events, {"extract"}) == 1
    # ...while the group admits three keys, which wait on the resource holding their slots.
    assert peak_active_keys(recorder.events, "extract", "publish") == 3
    assert result.resources["api"].invocations == 6
    assert result.resources["api"].wait_count >= 1


def test_a_permissive_resource_policy_does_not_widen_the_group():
    registry = p.AssetRegistry()
    members = chain(registry, extract={"resource": "api"})
    recorder = Recorder()
    flow = p.Flow(
        ["publish"],
        registry=registry,
        resources={"api": p.ResourcePolicy(max_concurrency=5)},
        partition_groups=[p.PartitionGroup(members)],
        max_concurrency=16,
    )

    result = flow.run({"partition_keys": _days(5)}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "extract", "publish") == 1


@pytest.mark.parametrize("failing_member", ["extract", "transform"])
def test_a_key_whose_member_fails_releases_its_slot_and_skips_its_downstream_members(failing_member):
    registry = p.AssetRegistry()
    keys = _days(4)
    bad_key = DAYS.normalize_key(keys[1])

    def fail(asset_name, context):
        if asset_name == failing_member and context.partition_key == bad_key:
            raise RuntimeError("boom")

    members = chain(registry, fail=fail)
    recorder = Recorder()
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=16)

    result = flow.run({"partition_keys": keys}, observers=[recorder])

    assert result.status is p.RunStatus.FAILED
    assert result.failed_partition_keys(failing_member) == (bad_key,)
    downstream = members[members.index(failing_member) + 1 :]
    for member in downstream:
        (skipped,) = [a for a in result.tasks[member].attempts if a.partition_key == bad_key]
        assert skipped.status is p.AttemptStatus.SKIPPED
        assert skipped.reason is p.SkipReason.DEPENDENCY_FAILED
        assert len(skipped.blocked_by) == 1
    first_downstream = next(a for a in result.tasks[downstream[0]].attempts if a.partition_key == bad_key)
    assert first_downstream.blocked_by[0].asset_name == failing_member
    assert first_downstream.blocked_by[0].status is p.AttemptStatus.FAILED
    # The other keys all complete, in order, one at a time.
    for member in members:
        others = [a for a in result.tasks[member].attempts if a.partition_key != bad_key]
        assert [a.status for a in others] == [p.AttemptStatus.SUCCESS] * 3
    assert [e[2] for e in recorder.starts("extract")] == [DAYS.normalize_key(k) for k in keys]
    assert peak_active_keys(recorder.events, "extract", "publish") == 1


def test_keys_skipped_before_entering_the_group_do_not_hold_slots():
    registry = p.AssetRegistry()
    keys = _days(4)
    bad_key = DAYS.normalize_key(keys[0])

    @p.asset(partition_def=DAYS, registry=registry)
    def source(context):
        if context.partition_key == bad_key:
            raise RuntimeError("no source today")
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def extract(context, source):
        return source

    @p.asset(partition_def=DAYS, registry=registry)
    def publish(context, extract):
        return extract

    flow = p.Flow(
        ["publish"], registry=registry, partition_groups=[p.PartitionGroup(("extract", "publish"))], max_concurrency=8
    )

    result = flow.run({"partition_keys": keys})

    assert result.status is p.RunStatus.FAILED
    for member in ("extract", "publish"):
        statuses = [a.status for a in result.tasks[member].attempts]
        assert statuses == [p.AttemptStatus.SKIPPED] + [p.AttemptStatus.SUCCESS] * 3


def test_an_unpartitioned_upstream_failure_skips_every_key_and_the_run_ends():
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def settings():
        raise RuntimeError("no settings")

    @p.asset(partition_def=DAYS, registry=registry)
    def extract(context, settings):
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def publish(context, extract):
        return extract

    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(("extract", "publish"))])

    result = flow.run({"partition_keys": _days(5)})

    assert result.status is p.RunStatus.FAILED
    for member in ("extract", "publish"):
        assert [a.reason for a in result.tasks[member].attempts] == [p.SkipReason.DEPENDENCY_FAILED] * 5


def test_two_groups_each_bound_their_own_chain():
    registry = p.AssetRegistry()
    chain(registry, members=("a1", "a2"))
    chain(registry, members=("b1", "b2"))
    recorder = Recorder()
    flow = p.Flow(
        ["a2", "b2"],
        registry=registry,
        partition_groups=[p.PartitionGroup(("a1", "a2")), p.PartitionGroup(("b1", "b2"), max_active_keys=2)],
        max_concurrency=16,
    )

    result = flow.run({"partition_keys": _days(6)}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert peak_active_keys(recorder.events, "a1", "a2") == 1
    assert peak_active_keys(recorder.events, "b1", "b2") == 2
    # The groups are independent: both chains are active at once.
    first_a_done = next(i for i, e in enumerate(recorder.events) if e[0] == "finish" and e[1] == "a2")
    assert any(e[0] == "start" and e[1] == "b1" for e in recorder.events[:first_a_done])


def test_two_thousand_keys_through_a_three_member_group_finish_quickly():
    registry = p.AssetRegistry()
    members = chain(registry)
    keys = _days(2000, start="2020-01-01")
    flow = p.Flow(["publish"], registry=registry, partition_groups=[p.PartitionGroup(members)], max_concurrency=8)

    started = time.perf_counter()
    result = flow.run({"partition_keys": keys})
    elapsed = time.perf_counter() - started

    assert result.status is p.RunStatus.SUCCESS
    assert sum(len(task.attempts) for task in result.tasks.values()) == 6000
    assert [a.partition_key for a in result.tasks["publish"].attempts] == [DAYS.normalize_key(k) for k in keys]
    assert elapsed < 30, f"2,000 grouped keys took {elapsed:.1f}s"


def test_two_thousand_keys_with_several_active_keys_scale_linearly():
    registry = p.AssetRegistry()
    members = chain(registry)
    flow = p.Flow(
        ["publish"], registry=registry, partition_groups=[p.PartitionGroup(members, max_active_keys=4)], max_concurrency=8
    )

    def timed(count: int) -> float:
        keys = _days(count, start="2020-01-01")
        started = time.perf_counter()
        result = flow.run({"partition_keys": keys})
        assert result.status is p.RunStatus.SUCCESS
        return time.perf_counter() - started

    timed(100)  # warm up threads and imports
    small = timed(500)
    large = timed(2000)
    # Four times the keys: linear work takes about four times as long; quadratic about sixteen.
    assert large < max(small * 10, 2.0), f"500 keys: {small:.2f}s, 2,000 keys: {large:.2f}s"


@pytest.mark.parametrize("resource", [None, "db"])
def test_a_chain_completes_key_by_key_because_later_assets_start_first(resource: str | None):
    registry = p.AssetRegistry()
    options = {} if resource is None else {name: {"resource": resource} for name in ("extract", "transform", "publish")}
    chain(registry, **options)
    recorder = Recorder()
    resources = {} if resource is None else {resource: p.ResourcePolicy(max_concurrency=2)}
    flow = p.Flow(["publish"], registry=registry, resources=resources, max_concurrency=1)

    result = flow.run({"partition_keys": _days(5)}, observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    started = [(asset_name, key) for kind, asset_name, key, _ in recorder.events if kind == "start"]
    keys = [DAYS.normalize_key(day) for day in _days(5)]
    # With one slot, each key runs its whole chain before the next key's first asset starts.
    assert started == [(asset_name, key) for key in keys for asset_name in ("extract", "transform", "publish")]
    assert peak_active_keys(recorder.events, "extract", "publish") == 1
