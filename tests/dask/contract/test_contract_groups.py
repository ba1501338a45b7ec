"""Partition groups admit keys the same way on every executor (SPEC §4, §5; seed 003).

A group of assets holds a key from its first member's start to its last
member's outcome, also while a member waits for a retry; ``max_active_keys``
bounds how many keys are inside at once, whatever runs the bodies.
Admission is the driver's: the order is read from the execution events it
emits when it starts or settles an attempt.
"""

from __future__ import annotations

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]
REGISTRY = p.AssetRegistry()
MEMBERS = ("grouped_extract", "grouped_transform", "grouped_publish")


@p.asset(partition_def=DAYS, registry=REGISTRY)
def grouped_extract(context):
    return context.partition_key.day


@p.asset(partition_def=DAYS, registry=REGISTRY)
def grouped_transform(context, grouped_extract):
    if grouped_extract == 9:
        raise ValueError("no data for the ninth")
    return grouped_extract * 10


@p.asset(partition_def=DAYS, registry=REGISTRY)
def grouped_publish(grouped_transform):
    return grouped_transform + 1


@p.asset(partition_def=DAYS, registry=REGISTRY)
def retried_extract(context):
    return context.partition_key.day


@p.asset(partition_def=DAYS, registry=REGISTRY, retry=p.RetryPolicy(max_attempts=3, delay=30.0, backoff=2.0))
def retried_load(context, retried_extract):
    if retried_extract == 8 and context.invocation_number < 3:
        raise ConnectionError("the warehouse hung up")
    return (retried_extract, context.invocation_number)


class Recorder:
    """(kind, asset, day, invocation or status) per execution event, in the driver's order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_event(self, event) -> None:
        if isinstance(event, p.AttemptStarted):
            self.events.append(("start", event.asset_name, event.partition_key.day, event.invocation))
        elif isinstance(event, p.AttemptFinished):
            attempt = event.attempt
            self.events.append(("finish", attempt.asset_name, attempt.partition_key.day, attempt.status))
        elif isinstance(event, p.AttemptRetrying):
            self.events.append(("retrying", event.asset_name, event.partition_key.day, event.invocation))


def _peak_active_keys(events: list[tuple]) -> int:
    """Most keys between their first member's start and their last member's outcome."""
    active: set[int] = set()
    peak = 0
    for kind, asset_name, day, _ in events:
        if kind == "start" and asset_name == MEMBERS[0]:
            active.add(day)
            peak = max(peak, len(active))
        elif kind == "finish" and asset_name == MEMBERS[-1]:
            active.discard(day)
    return peak


def _run(executor, keys, group, target="grouped_publish", **options):
    recorder = Recorder()
    flow = p.Flow([target], registry=REGISTRY, executor=executor, partition_groups=[group], max_concurrency=8, **options)
    return flow.run({"partition_keys": keys}, observers=[recorder]), recorder.events


def _key_through(day, *outcomes):
    """The events of one key that starts and finishes each member in turn (a skipped member only finishes)."""
    events = []
    for member, outcome in zip(MEMBERS, outcomes, strict=True):
        if outcome is not p.AttemptStatus.SKIPPED:
            events.append(("start", member, day, 1))
        events.append(("finish", member, day, outcome))
    return events


def test_a_group_takes_one_key_through_every_member_and_a_failed_key_leaves_it(executor_kind):
    result, events = _run(executor_kind, KEYS, p.PartitionGroup(MEMBERS))

    success, failed, skipped = p.AttemptStatus.SUCCESS, p.AttemptStatus.FAILED, p.AttemptStatus.SKIPPED
    # The ninth's transform fails and its publish is skipped; then the tenth enters the group.
    expected = _key_through(8, success, success, success) + _key_through(9, success, failed, skipped)
    expected += _key_through(10, success, success, success)
    assert events == expected
    assert result.status is p.RunStatus.FAILED
    (blocked,) = [a for a in result.tasks["grouped_publish"].attempts if a.status is skipped]
    assert blocked.reason is p.SkipReason.DEPENDENCY_FAILED
    assert [result.output("grouped_publish", key) for key in (KEYS[0], KEYS[2])] == [81, 101]


def test_max_active_keys_admits_that_many_keys_in_selection_order_and_never_more(executor_kind):
    keys = ["2026-08-12", "2026-08-10", "2026-08-13", "2026-08-11", "2026-08-14"]
    result, events = _run(executor_kind, keys, p.PartitionGroup(MEMBERS, max_active_keys=2))

    assert result.status is p.RunStatus.SUCCESS
    assert _peak_active_keys(events) == 2
    assert [day for kind, name, day, _ in events if kind == "start" and name == MEMBERS[0]] == [12, 10, 13, 11, 14]
    assert sum(1 for event in events if event[0] == "start") == 15
    assert [result.output("grouped_publish", key) for key in keys] == [121, 101, 131, 111, 141]


def test_a_key_keeps_its_group_slot_while_a_member_waits_for_its_retry(executor_kind):
    clock = p.FastForwardClock()
    group = p.PartitionGroup(("retried_extract", "retried_load"))
    result, events = _run(executor_kind, KEYS[:2], group, target="retried_load", clock=clock)

    assert result.status is p.RunStatus.SUCCESS
    assert clock.sleeps == [30.0, 60.0]
    success = p.AttemptStatus.SUCCESS
    assert events == [
        ("start", "retried_extract", 8, 1), ("finish", "retried_extract", 8, success),
        ("start", "retried_load", 8, 1), ("retrying", "retried_load", 8, 1),
        ("start", "retried_load", 8, 2), ("retrying", "retried_load", 8, 2),
        ("start", "retried_load", 8, 3), ("finish", "retried_load", 8, success),
        ("start", "retried_extract", 9, 1), ("finish", "retried_extract", 9, success),
        ("start", "retried_load", 9, 1), ("finish", "retried_load", 9, success),
    ]
    assert [result.output("retried_load", key) for key in KEYS[:2]] == [(8, 3), (9, 1)]
