"""A run's resource policies hold on every executor: the gate and the circuit live in the driver (SPEC §5, §11).

A run-local ``max_concurrency=1`` never has two bodies inside at once,
however many workers the executor has; a classifier that answers
`OpenCircuit` fails the attempt and skips the resource's pending work with
reason ``resource_circuit_open`` without running it. Bodies leave marks in
the `marks` folder: where they ran, when they entered and left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import partita as p

MARKS = "PARTITA_TEST_DASK_MARKS"
CALLS = p.StaticPartitionDef("contract_calls", ["c0", "c1", "c2", "c3"])
QUOTA = p.StaticPartitionDef("contract_quota", ["q0", "q1", "q2", "q3", "q4", "q5"])
REGISTRY = p.AssetRegistry()


class QuotaExhausted(Exception):
    """The API refused a call."""


class OpenAfterFailures:
    """A breaker: fail each refused call until ``limit`` calls have failed, then open the circuit.

    It counts in the driver, where every executor's failures are classified.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.failures = 0

    def __call__(self, exc: BaseException) -> p.Fail | p.OpenCircuit:
        self.failures += 1
        return p.OpenCircuit() if self.failures >= self.limit else p.Fail()


def _mark(name: str, text: str = "") -> None:
    (Path(os.environ[MARKS]) / name).write_text(text)


@p.asset(partition_def=CALLS, registry=REGISTRY, resource="api")
def one_at_a_time(context):
    entered = time.time()
    time.sleep(0.05)  # the call itself: long enough for a second body to overlap if the gate let it in
    left = time.time()
    _mark(f"inside-{context.partition_key}", f"{entered} {left} {os.getpid()}")
    return context.partition_key


@p.asset(partition_def=QUOTA, registry=REGISTRY, resource="quota")
def quota_call(context):
    _mark(f"call-{context.partition_key}")
    if context.partition_key != "q0":
        raise QuotaExhausted("the daily quota is used up")
    return context.partition_key


def _intervals(folder: Path) -> list[tuple[float, float]]:
    marks = [path.read_text().split() for path in folder.glob("inside-*")]
    return sorted((float(entered), float(left)) for entered, left, _ in marks)


def test_a_resource_limit_of_one_never_has_two_bodies_inside_at_once(executor_kind, marks):
    flow = p.Flow(
        ["one_at_a_time"], registry=REGISTRY, executor=executor_kind, max_concurrency=4,
        resources={"api": p.ResourcePolicy(max_concurrency=1)},
    )

    result = flow.run({"partition_keys": CALLS.keys})

    assert result.status is p.RunStatus.SUCCESS
    assert [result.output("one_at_a_time", key) for key in CALLS.keys] == list(CALLS.keys)
    intervals = _intervals(marks)
    assert len(intervals) == 4
    for (_, left), (entered, _) in zip(intervals, intervals[1:], strict=False):
        assert entered >= left, intervals
    statistics = result.resources["api"]
    assert (statistics.invocations, statistics.succeeded, statistics.wait_count) == (4, 4, 3)
    pids = {int(path.read_text().split()[2]) for path in marks.glob("inside-*")}
    assert (pids == {os.getpid()}) is (executor_kind == "thread")


def test_a_circuit_opened_after_three_failures_skips_the_resources_pending_work(executor_kind, marks):
    breaker = OpenAfterFailures(3)
    flow = p.Flow(
        ["quota_call"], registry=REGISTRY, executor=executor_kind, max_concurrency=4,
        resources={"quota": p.ResourcePolicy(max_concurrency=1, classify_failure=breaker)},
    )

    result = flow.run({"partition_keys": QUOTA.keys})

    assert result.status is p.RunStatus.FAILED
    success, failed = (p.AttemptStatus.SUCCESS, None), (p.AttemptStatus.FAILED, None)
    circuit = (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN)
    attempts = result.tasks["quota_call"].attempts
    assert [(a.status, a.reason) for a in attempts] == [success, failed, failed, failed, circuit, circuit]
    assert [a.failure.type for a in attempts[1:4]] == [f"{__name__}.QuotaExhausted"] * 3
    assert [(a.invocations, a.blocked_by) for a in attempts[4:]] == [((), ())] * 2
    assert result.failed_partition_keys("quota_call") == ("q1", "q2", "q3")
    assert result.circuit_skipped_partition_keys("quota_call") == ("q4", "q5")
    assert breaker.failures == 3
    # No body ran on the open circuit.
    assert sorted(path.name for path in marks.glob("call-*")) == ["call-q0", "call-q1", "call-q2", "call-q3"]
    statistics = result.resources["quota"]
    assert (statistics.invocations, statistics.succeeded, statistics.failed) == (4, 1, 3)
