"""Dependencies per key, gathering, retries and emission give the same outcomes on threads, processes and Dask.

One module of the engine contract (tests/dask/contract/): the same flows
over the in-process, process and Dask executors (`executor_kind`). Assets
are module level so worker processes find them.
"""

from __future__ import annotations

import os

import partita as p

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]
REGISTRY = p.AssetRegistry()


def _flow(targets, executor, **options):
    return p.Flow(targets, registry=REGISTRY, executor=executor, **options)


@p.asset(partition_def=DAYS, registry=REGISTRY)
def day_number(context):
    return context.partition_key.day


@p.asset(partition_def=DAYS, registry=REGISTRY)
def fails_on_the_ninth(context, day_number):
    if day_number == 9:
        raise ValueError("no data for the ninth")
    return day_number * 10


@p.asset(partition_def=DAYS, registry=REGISTRY)
def after_the_failure(fails_on_the_ninth):
    return fails_on_the_ninth + 1


@p.asset(registry=REGISTRY)
def gathered(day_number):
    return sorted(day_number.values())


@p.asset(registry=REGISTRY, retry=p.RetryPolicy(max_attempts=2))
def retried_once(context):
    if context.invocation_number == 1:
        raise ConnectionError("the source hung up")
    return context.invocation_number


@p.asset(registry=REGISTRY)
def signal():
    return None


@p.asset(partition_def=DAYS, registry=REGISTRY)
def emits_once_per_key(context):
    receipt = context.emit("signal", extra={"day": context.partition_key.day}, dedupe_key=f"d{context.partition_key.day}")
    again = context.emit("signal", extra={"day": context.partition_key.day}, dedupe_key=f"d{context.partition_key.day}")
    return (receipt.duplicate, again.duplicate, again.id == receipt.id, os.getpid())


def test_each_key_gets_its_own_upstream_output_and_a_failure_skips_only_its_own_downstream(executor_kind):
    result = _flow(["after_the_failure"], executor_kind).run({"partition_keys": KEYS})

    statuses = {(a.asset_name, a.partition_key.day): a.status for a in result.attempts()}
    assert statuses[("fails_on_the_ninth", 9)] is p.AttemptStatus.FAILED
    assert statuses[("after_the_failure", 9)] is p.AttemptStatus.SKIPPED
    assert [result.output("after_the_failure", key) for key in (KEYS[0], KEYS[2])] == [81, 101]
    (skipped,) = [a for a in result.tasks["after_the_failure"].attempts if a.status is p.AttemptStatus.SKIPPED]
    assert skipped.reason is p.SkipReason.DEPENDENCY_FAILED
    assert result.status is p.RunStatus.FAILED


def test_an_unpartitioned_consumer_gathers_every_selected_key(executor_kind):
    result = _flow(["gathered"], executor_kind).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    assert result.output("gathered") == [8, 9, 10]


def test_a_failing_body_is_retried_per_its_policy(executor_kind):
    result = _flow(["retried_once"], executor_kind).run()

    (attempt,) = result.tasks["retried_once"].attempts
    assert [invocation.succeeded for invocation in attempt.invocations] == [False, True]
    assert attempt.invocations[0].failure.type == "builtins.ConnectionError"
    assert result.output("retried_once") == 2


def test_emission_returns_receipts_and_dedupes_on_every_executor(executor_kind, tmp_path):
    store_url = f"sqlite:///{tmp_path}/contract.db"
    result = _flow(["emits_once_per_key"], executor_kind, store=store_url).run({"partition_keys": KEYS})

    assert result.status is p.RunStatus.SUCCESS
    for key in KEYS:
        first_duplicate, second_duplicate, same_id, _ = result.output("emits_once_per_key", key)
        assert (first_duplicate, second_duplicate, same_id) == (False, True, True)
    assert sorted(event.extra["day"] for event in result.events) == [8, 9, 10]
