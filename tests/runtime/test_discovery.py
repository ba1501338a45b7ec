"""Discovering producers and the fan-out of their keys in the same run (SPEC §9, §14; seed 000).

The discovering producer of a runtime domain runs once per run and declares
keys with ``context.add_partition(key, extra=None)`` or one
``context.partition_keys = [...]`` assignment; every discovered key becomes
one attempt of every downstream asset of the domain, which receives the
producer's output for that key. A violation fails the producer with
`DiscoveryError` and starts no downstream work.

Assets live in explicit registries (the process-executor test needs
module-level ones). Ordering is read from execution events, never from
sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest

import partita as p
from partita.partitions.runtime import MAX_RUNTIME_KEY_LENGTH

WAIT = 10.0
SECRET = "tenant-secret-5be1d0"


class Recorder:
    """An observer keeping (kind, asset, key, invocation/status) tuples in scheduler order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_event(self, event) -> None:
        if isinstance(event, p.AttemptStarted):
            self.events.append(("start", event.asset_name, event.partition_key, event.invocation))
        elif isinstance(event, p.AttemptFinished):
            attempt = event.attempt
            self.events.append(("finish", attempt.asset_name, attempt.partition_key, attempt.status))
        elif isinstance(event, p.AttemptRetrying):
            self.events.append(("retrying", event.asset_name, event.partition_key, event.invocation))

    def starts(self, asset_name: str) -> list[tuple]:
        return [e for e in self.events if e[0] == "start" and e[1] == asset_name]


class Pipeline:
    """tenants (producer) -> load -> publish (runtime domain) -> summary (unpartitioned)."""

    def __init__(self, producer, *, allowed=None, max_keys=None, producer_options=None, load_options=None):
        self.registry = p.AssetRegistry()
        self.domain = p.PartitionAtRuntime("tenants", allowed=allowed, max_keys=max_keys)
        self.calls: list[tuple] = []
        lock = threading.Lock()
        calls = self.calls

        p.asset(partition_def=self.domain, registry=self.registry, name="tenants", **(producer_options or {}))(producer)

        @p.asset(partition_def=self.domain, registry=self.registry, **(load_options or {}))
        def load(context, tenants):
            with lock:
                calls.append(("load", context.partition_key))
            return {"key": context.partition_key, "from_producer": tenants}

        @p.asset(partition_def=self.domain, registry=self.registry)
        def publish(context, load):
            with lock:
                calls.append(("publish", context.partition_key))
            return load["key"].upper()

        @p.asset(registry=self.registry)
        def summary(publish):
            with lock:
                calls.append(("summary", None))
            return dict(publish)

    def flow(self, targets=("summary",), **options):
        options.setdefault("store", False)
        return p.Flow(list(targets), registry=self.registry, **options)

    def run(self, config=None, **options):
        return self.flow(**options).run(config)


def keys_of(result, asset_name):
    return [attempt.partition_key for attempt in result.tasks[asset_name].attempts]


def statuses(result, asset_name):
    return [(attempt.status, attempt.reason) for attempt in result.tasks[asset_name].attempts]


def producer_attempt(result, name="tenants"):
    (attempt,) = result.tasks[name].attempts
    return attempt


def assert_no_downstream_work(pipeline, result):
    """The producer failed: no fanned-out attempt exists and the unpartitioned consumer is skipped."""
    assert result.status is p.RunStatus.FAILED
    assert result.tasks["load"].attempts == ()
    assert result.tasks["publish"].attempts == ()
    (summary,) = result.tasks["summary"].attempts
    assert summary.status is p.AttemptStatus.SKIPPED
    assert summary.reason is p.SkipReason.DEPENDENCY_FAILED
    assert [call for call in pipeline.calls if call[0] != "producer"] == []


def assert_discovery_failure(result, secret=None):
    attempt = producer_attempt(result)
    assert attempt.status is p.AttemptStatus.FAILED
    assert isinstance(attempt.exception, p.DiscoveryError), repr(attempt.exception)
    assert attempt.failure is not None
    assert attempt.failure.type.endswith("DiscoveryError")
    if secret is not None:
        assert secret not in str(attempt.exception)
        assert secret not in attempt.failure.message
    return attempt


# -- the producer runs once and its keys fan out ------------------------------------------


def test_the_producer_runs_once_and_each_discovered_key_runs_every_downstream_asset_once():
    producer_calls = []

    def tenants(context):
        producer_calls.append(context.partition_key_present)
        for key in ("acme", "globex", "initech"):
            context.add_partition(key)

    pipeline = Pipeline(tenants)
    result = pipeline.run()

    assert result.status is p.RunStatus.SUCCESS
    assert len(producer_calls) == 1
    assert producer_attempt(result).status is p.AttemptStatus.SUCCESS
    assert keys_of(result, "load") == ["acme", "globex", "initech"]
    assert keys_of(result, "publish") == ["acme", "globex", "initech"]
    assert all(attempt.partition_key_present for attempt in result.tasks["load"].attempts)
    assert sorted(pipeline.calls) == sorted(
        [("load", k) for k in ("acme", "globex", "initech")]
        + [("publish", k) for k in ("acme", "globex", "initech")]
        + [("summary", None)]
    )
    assert result.output("publish", "globex") == "GLOBEX"
    assert result.discovered_partition_keys("tenants") == ("acme", "globex", "initech")


def test_partition_keys_assignment_accepts_strings_and_partition_key_values():
    def tenants(context):
        context.partition_keys = ["acme", p.PartitionKey("globex", extra={"rows": 2}), "initech"]

    pipeline = Pipeline(tenants)
    result = pipeline.run()

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "load") == ["acme", "globex", "initech"]
    assert result.discovered_partition_keys("tenants") == ("acme", "globex", "initech")


def test_partition_keys_accepts_any_iterable_such_as_a_generator():
    def tenants(context):
        context.partition_keys = (f"t{i}" for i in range(3))

    result = Pipeline(tenants).run()

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "load") == ["t0", "t1", "t2"]


def test_add_partition_accepts_partition_key_values_with_extra():
    def tenants(context):
        context.add_partition(p.PartitionKey("acme", extra={"rows": 1}))
        context.add_partition("globex", extra={"rows": 2})
        context.add_partition("initech")

    result = Pipeline(tenants).run()

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "load") == ["acme", "globex", "initech"]
    declared = result.discoveries["tenants"]
    assert [(key.key, key.extra) for key in declared] == [
        ("acme", {"rows": 1}),
        ("globex", {"rows": 2}),
        ("initech", None),
    ]


def test_context_partition_keys_reads_the_keys_declared_so_far():
    seen = []

    def tenants(context):
        seen.append(tuple(context.partition_keys))
        context.add_partition("acme", extra={"rows": 1})
        context.add_partition("globex")
        seen.append(tuple((key.key, key.extra) for key in context.partition_keys))

    Pipeline(tenants).run()

    assert seen == [(), (("acme", {"rows": 1}), ("globex", None))]


def test_keys_declared_twice_collapse_to_one_and_the_first_extra_wins(tmp_path):
    def tenants(context):
        context.add_partition("acme", extra={"seen": "first"})
        context.add_partition("globex")
        context.add_partition(p.PartitionKey("acme", extra={"seen": "second"}))
        context.add_partition("acme")

    url = f"sqlite:///{tmp_path}/partita.db"
    result = Pipeline(tenants).run(store=url)

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "load") == ["acme", "globex"]
    assert result.discovered_partition_keys("tenants") == ("acme", "globex")
    store = p.open_store(url)
    try:
        events = store.list_events(asset="tenants", kinds=[p.SourceKind.DISCOVERY])
    finally:
        store.close()
    assert [(event.partition_key, event.extra) for event in events] == [("acme", {"seen": "first"}), ("globex", {})]


def test_duplicates_in_one_assignment_collapse_and_do_not_count_against_max_keys():
    def tenants(context):
        context.partition_keys = ["acme", "acme", p.PartitionKey("globex"), "globex", "acme"]

    result = Pipeline(tenants, max_keys=2).run()

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "load") == ["acme", "globex"]


def test_exactly_max_keys_keys_are_accepted():
    def tenants(context):
        context.partition_keys = ["a", "b", "c"]

    result = Pipeline(tenants, max_keys=3).run()

    assert result.status is p.RunStatus.SUCCESS
    assert keys_of(result, "publish") == ["a", "b", "c"]


def test_keys_inside_allowed_fan_out():
    def tenants(context):
        context.partition_keys = ["eu-west", "eu-north"]

    by_collection = Pipeline(tenants, allowed={"eu-west", "eu-north", "us-east"}).run()
    by_predicate = Pipeline(tenants, allowed=lambda key: key.startswith("eu-")).run()

    assert by_collection.status is p.RunStatus.SUCCESS
    assert by_predicate.status is p.RunStatus.SUCCESS
    assert keys_of(by_collection, "load") == keys_of(by_predicate, "load") == ["eu-west", "eu-north"]


# -- outputs ----------------------------------------------------------------------------------------


def test_a_mapping_output_gives_each_fanned_out_attempt_its_key_s_output():
    def tenants(context):
        context.partition_keys = ["acme", "globex"]
        return {"globex": {"rows": 20}, "acme": {"rows": 10}}

    result = Pipeline(tenants).run()

    assert result.status is p.RunStatus.SUCCESS
    outputs = {attempt.partition_key: attempt.output for attempt in result.tasks["load"].attempts}
    assert outputs == {
        "acme": {"key": "acme", "from_producer": {"rows": 10}},
        "globex": {"key": "globex", "from_producer": {"rows": 20}},
    }
    # The producer's own attempt keeps what the body returned.
    assert producer_attempt(result).output == {"globex": {"rows": 20}, "acme": {"rows": 10}}


def test_a_none_output_gives_every_fanned_out_attempt_none():
    def tenants(context):
        context.partition_keys = ["acme", "globex"]

    result = Pipeline(tenants).run()

    assert [attempt.output["from_producer"] for attempt in result.tasks["load"].attempts] == [None, None]


def test_an_unpartitioned_consumer_receives_partitioned_outputs_of_every_discovered_key():
    received = []
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["zeta", "alpha", "mid"]
        return {"zeta": 1, "alpha": 2, "mid": 3}

    @p.asset(partition_def=domain, registry=registry)
    def scaled(tenants):
        return tenants * 10

    @p.asset(registry=registry)
    def report(scaled):
        received.append(scaled)
        return dict(scaled)

    result = p.Flow(["report"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.SUCCESS
    (outputs,) = received
    assert isinstance(outputs, p.PartitionedOutputs)
    assert list(outputs) == ["zeta", "alpha", "mid"]
    assert list(outputs.items()) == [("zeta", 10), ("alpha", 20), ("mid", 30)]
    assert outputs["alpha"] == 20
    assert len(outputs) == 3
    assert result.output("report") == {"zeta": 10, "alpha": 20, "mid": 30}


def test_an_unpartitioned_upstream_feeds_every_fanned_out_attempt():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(registry=registry)
    def settings():
        return {"scale": 3}

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context, settings):
        context.partition_keys = ["a", "b"]
        return {"a": 1 * settings["scale"], "b": 2 * settings["scale"]}

    @p.asset(partition_def=domain, registry=registry)
    def scaled(tenants, settings):
        return tenants * settings["scale"]

    result = p.Flow(["scaled"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.SUCCESS
    assert [attempt.output for attempt in result.tasks["scaled"].attempts] == [9, 18]


# -- bad input fails the producer and starts no downstream work -----------------------------------


def _failing_pipeline_run(body, **definition_options):
    pipeline = Pipeline(body, **definition_options)
    result = pipeline.run()
    assert_no_downstream_work(pipeline, result)
    return result


def test_an_empty_key_fails_the_producer():
    def tenants(context):
        context.add_partition("acme")
        context.add_partition("")

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_a_key_too_long_fails_the_producer_without_repeating_it():
    key = SECRET + "x" * (MAX_RUNTIME_KEY_LENGTH + 1 - len(SECRET))

    def tenants(context):
        context.add_partition(key)

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants), SECRET)
    assert str(MAX_RUNTIME_KEY_LENGTH) in str(attempt.exception)


@pytest.mark.parametrize("key", [42, None, b"acme", 1.5])
def test_a_non_string_key_fails_the_producer(key):
    def tenants(context):
        context.add_partition(key)

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_a_non_string_key_in_an_assignment_fails_the_producer():
    def tenants(context):
        context.partition_keys = ["acme", 7]

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_a_partition_key_with_a_non_string_key_fails_the_producer():
    def tenants(context):
        context.partition_keys = [p.PartitionKey(7)]  # type: ignore[arg-type]

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_a_key_outside_an_allowed_collection_fails_the_producer_without_repeating_it():
    def tenants(context):
        context.add_partition("acme")
        context.add_partition(SECRET)

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants, allowed=["acme", "globex"]), SECRET)
    assert "runtime:tenants" in str(attempt.exception)


def test_a_key_rejected_by_an_allowed_predicate_fails_the_producer_without_repeating_it():
    def tenants(context):
        context.partition_keys = ["eu-west", "us-" + SECRET]

    assert_discovery_failure(_failing_pipeline_run(tenants, allowed=lambda key: key.startswith("eu-")), SECRET)


def test_an_allowed_predicate_that_raises_fails_the_producer_without_repeating_the_key():
    def broken(key):
        raise LookupError(f"directory lookup failed for {key}")

    def tenants(context):
        context.add_partition(SECRET)

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants, allowed=broken), SECRET)
    assert "predicate" in str(attempt.exception)


def test_more_than_max_keys_fails_the_producer_with_a_message_naming_the_bound():
    def tenants(context):
        for index in range(5):
            context.add_partition(f"tenant-{index}")

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants, max_keys=3))
    assert "max_keys" in str(attempt.exception)
    assert "3" in str(attempt.exception)


def test_more_than_max_keys_in_one_assignment_fails_the_producer():
    def tenants(context):
        context.partition_keys = ["a", "b", "c"]

    assert_discovery_failure(_failing_pipeline_run(tenants, max_keys=2))


def test_assigning_partition_keys_twice_fails_the_producer():
    def tenants(context):
        context.partition_keys = ["acme"]
        context.partition_keys = ["globex"]

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants))
    assert "twice" in str(attempt.exception)


def test_assigning_partition_keys_after_add_partition_fails_the_producer():
    def tenants(context):
        context.add_partition("acme")
        context.partition_keys = ["globex"]

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_add_partition_after_assigning_partition_keys_fails_the_producer():
    def tenants(context):
        context.partition_keys = ["acme"]
        context.add_partition("globex")

    assert_discovery_failure(_failing_pipeline_run(tenants))


@pytest.mark.parametrize("value", ["acme", b"acme", 7, None])
def test_partition_keys_must_be_a_collection_of_keys(value):
    def tenants(context):
        context.partition_keys = value

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_a_non_mapping_extra_fails_the_producer():
    def tenants(context):
        context.add_partition("acme", extra=["not", "a", "mapping"])

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_an_extra_that_is_not_json_fails_the_producer():
    def tenants(context):
        context.add_partition("acme", extra={"handle": object()})

    assert_discovery_failure(_failing_pipeline_run(tenants))


def test_outputs_for_a_key_that_was_not_declared_fail_the_producer_without_repeating_it():
    def tenants(context):
        context.partition_keys = ["acme"]
        return {"acme": 1, SECRET: 2}

    assert_discovery_failure(_failing_pipeline_run(tenants), SECRET)


def test_outputs_for_keys_without_any_declaration_fail_the_producer():
    def tenants(context):
        return {"acme": 1}

    assert_discovery_failure(_failing_pipeline_run(tenants))


@pytest.mark.parametrize("output", [["acme"], ("acme", 1), "acme", 42, {"acme"}])
def test_an_output_that_is_not_a_mapping_fails_the_producer(output):
    def tenants(context):
        context.partition_keys = ["acme"]
        return output

    attempt = assert_discovery_failure(_failing_pipeline_run(tenants))
    assert "mapping" in str(attempt.exception)


def test_a_failed_producer_reports_no_discovered_keys_downstream():
    def tenants(context):
        context.partition_keys = ["acme", ""]

    pipeline = Pipeline(tenants)
    result = pipeline.run()

    assert_no_downstream_work(pipeline, result)
    assert result.tasks["load"].reason is p.SkipReason.DEPENDENCY_FAILED
    assert result.tasks["publish"].reason is p.SkipReason.DEPENDENCY_FAILED


def test_a_producer_whose_body_raises_starts_no_downstream_work():
    def tenants(context):
        context.add_partition("acme")
        raise RuntimeError("the tenant directory is down")

    pipeline = Pipeline(tenants)
    result = pipeline.run()

    assert_no_downstream_work(pipeline, result)
    assert isinstance(producer_attempt(result).exception, RuntimeError)


def test_a_violation_is_reported_in_the_run_record_as_a_failed_producer():
    def tenants(context):
        context.add_partition(SECRET)

    result = Pipeline(tenants, allowed=["acme"]).run()

    record = result.to_record(version=4)
    (producer,) = [task for task in record["tasks"] if task["asset"] == "tenants"]
    assert producer["status"] == "failed"
    assert producer["attempts"][0]["failure"]["type"].endswith("DiscoveryError")
    assert SECRET not in producer["attempts"][0]["failure"]["message"]


# -- declaring keys from an asset that does not discover ---------------------------------------------


def test_add_partition_from_a_fanned_out_asset_fails_that_attempt_only():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["acme", "globex"]

    @p.asset(partition_def=domain, registry=registry)
    def load(context, tenants):
        if context.partition_key == "globex":
            context.add_partition("initech")
        return context.partition_key

    @p.asset(partition_def=domain, registry=registry)
    def publish(load):
        return load

    result = p.Flow(["publish"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.FAILED
    assert statuses(result, "load")[0] == (p.AttemptStatus.SUCCESS, None)
    failed = result.tasks["load"].attempts[1]
    assert failed.status is p.AttemptStatus.FAILED
    assert isinstance(failed.exception, p.DiscoveryError)
    assert "load" in str(failed.exception)
    assert statuses(result, "publish") == [
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.SKIPPED, p.SkipReason.DEPENDENCY_FAILED),
    ]
    assert result.discovered_partition_keys("tenants") == ("acme", "globex")


def test_partition_keys_from_an_unpartitioned_asset_fails_it():
    registry = p.AssetRegistry()
    errors = []

    @p.asset(registry=registry)
    def plain(context):
        try:
            context.partition_keys = ["acme"]
        except p.DiscoveryError as exc:
            errors.append(exc)
            raise
        return 1

    @p.asset(registry=registry)
    def reader(context):
        return context.partition_keys

    result = p.Flow(["plain", "reader"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.FAILED
    for name in ("plain", "reader"):
        (attempt,) = result.tasks[name].attempts
        assert attempt.status is p.AttemptStatus.FAILED
        assert isinstance(attempt.exception, p.DiscoveryError)
        assert "discovering producer" in str(attempt.exception)
    assert len(errors) == 1


def test_add_partition_from_a_statically_partitioned_asset_fails_it():
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.StaticPartitionDef("letters", ["a", "b"]), registry=registry)
    def letters(context):
        context.add_partition("c")

    result = p.Flow(["letters"], registry=registry, store=False).run({"partition_keys": ["a", "b"]})

    assert result.status is p.RunStatus.FAILED
    assert all(isinstance(attempt.exception, p.DiscoveryError) for attempt in result.tasks["letters"].attempts)


# -- zero keys ------------------------------------------------------------------------------------


def test_a_producer_that_discovers_zero_keys_succeeds_and_the_domain_has_no_attempts():
    def tenants(context):
        context.partition_keys = []

    pipeline = Pipeline(tenants)
    result = pipeline.run()

    assert result.status is p.RunStatus.SUCCESS
    assert producer_attempt(result).status is p.AttemptStatus.SUCCESS
    assert result.tasks["load"].attempts == ()
    assert result.tasks["publish"].attempts == ()
    assert result.tasks["load"].reason is p.SkipReason.NO_PARTITION_KEYS
    (summary,) = result.tasks["summary"].attempts
    assert summary.status is p.AttemptStatus.SKIPPED
    assert summary.reason is p.SkipReason.NO_PARTITION_KEYS
    assert pipeline.calls == []
    assert result.discovered_partition_keys("tenants") == ()


def test_a_producer_that_declares_nothing_at_all_discovers_zero_keys():
    def tenants(context):
        return None

    result = Pipeline(tenants).run()

    assert result.status is p.RunStatus.SUCCESS
    assert result.tasks["load"].attempts == ()
    assert result.discovered_partition_keys("tenants") == ()


def test_a_producer_without_downstream_assets_runs_alone():
    def tenants(context):
        context.partition_keys = ["acme"]
        return {"acme": 1}

    pipeline = Pipeline(tenants)
    result = pipeline.flow(targets=["tenants"]).run()

    assert result.status is p.RunStatus.SUCCESS
    assert list(result.tasks) == ["tenants"]
    assert result.discovered_partition_keys("tenants") == ("acme",)


def test_cancelling_a_run_during_discovery_reports_the_domain_as_cancelled():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")
    loaded = []

    class Capture:
        result = None

        def on_event(self, event):
            if isinstance(event, p.RunFinished):
                self.result = event.result

    async def main():
        started = asyncio.Event()

        @p.asset(partition_def=domain, registry=registry)
        async def tenants(context):
            context.add_partition("acme")
            started.set()
            await asyncio.Event().wait()  # until cancelled

        @p.asset(partition_def=domain, registry=registry)
        def load(tenants):
            loaded.append(1)

        capture = Capture()
        running = asyncio.create_task(p.Flow(["load"], registry=registry, store=False).run_async(observers=[capture]))
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return capture.result

    result = asyncio.run(main())

    assert result.status is p.RunStatus.CANCELLED
    assert producer_attempt(result).status is p.AttemptStatus.CANCELLED
    assert loaded == []
    assert result.tasks["load"].attempts == ()
    assert result.tasks["load"].reason is p.SkipReason.CANCELLED


def test_a_large_discovery_fans_out_every_key():
    count = 5000

    def tenants(context):
        context.partition_keys = [f"t{index}" for index in range(count)]
        return {f"t{index}": index for index in range(count)}

    result = Pipeline(tenants).run()

    assert result.status is p.RunStatus.SUCCESS
    assert len(result.tasks["publish"].attempts) == count
    assert len(result.output("summary")) == count
    assert result.tasks["load"].attempts[-1].output["from_producer"] == count - 1


# -- async producers ---------------------------------------------------------------------------------


def test_an_async_producer_discovers_and_feeds_async_and_sync_consumers():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")
    producer_calls = []

    @p.asset(partition_def=domain, registry=registry)
    async def tenants(context):
        producer_calls.append(1)
        await asyncio.sleep(0)
        context.add_partition("acme", extra={"rows": 1})
        await asyncio.sleep(0)
        assert len(context.partition_keys) == 1  # reading is allowed
        context.add_partition("globex")
        return {"acme": "A", "globex": "G"}

    @p.asset(partition_def=domain, registry=registry)
    async def load(context, tenants):
        await asyncio.sleep(0)
        return f"{context.partition_key}:{tenants}"

    @p.asset(partition_def=domain, registry=registry)
    def publish(load):
        return load.upper()

    result = p.Flow(["publish"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.SUCCESS
    assert producer_calls == [1]
    assert [attempt.output for attempt in result.tasks["load"].attempts] == ["acme:A", "globex:G"]
    assert [attempt.output for attempt in result.tasks["publish"].attempts] == ["ACME:A", "GLOBEX:G"]
    assert result.discovered_partition_keys("tenants") == ("acme", "globex")


def test_an_async_producer_violation_fails_it():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants", max_keys=1)

    @p.asset(partition_def=domain, registry=registry)
    async def tenants(context):
        context.partition_keys = ["a", "b"]

    @p.asset(partition_def=domain, registry=registry)
    async def load(tenants):
        return 1

    result = p.Flow(["load"], registry=registry, store=False).run()

    assert result.status is p.RunStatus.FAILED
    assert isinstance(producer_attempt(result).exception, p.DiscoveryError)
    assert result.tasks["load"].attempts == ()


def test_run_async_discovers_and_fans_out():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    async def tenants(context):
        context.partition_keys = ["x", "y"]

    @p.asset(partition_def=domain, registry=registry)
    def load(context, tenants):
        return context.partition_key * 2

    async def main():
        return await p.Flow(["load"], registry=registry, store=False).run_async()

    result = asyncio.run(main())

    assert result.status is p.RunStatus.SUCCESS
    assert [attempt.output for attempt in result.tasks["load"].attempts] == ["xx", "yy"]


# -- process executor (module-level assets) --------------------------------------------------------------

PROCESS_REGISTRY = p.AssetRegistry()
PROCESS_DOMAIN = p.PartitionAtRuntime("process-tenants", max_keys=10)


@p.asset(partition_def=PROCESS_DOMAIN, registry=PROCESS_REGISTRY)
def process_tenants(context):
    context.add_partition("acme", extra={"pid": os.getpid()})
    context.partition_keys  # noqa: B018 - reading works in the worker too
    context.add_partition("globex")
    context.add_partition("acme")
    return {"acme": os.getpid(), "globex": os.getpid()}


@p.asset(partition_def=PROCESS_DOMAIN, registry=PROCESS_REGISTRY)
def process_load(context, process_tenants):
    return (context.partition_key, process_tenants, os.getpid())


@p.asset(partition_def=PROCESS_DOMAIN, registry=PROCESS_REGISTRY)
async def process_async_tenants(context):
    await asyncio.sleep(0)
    context.partition_keys = ["north", "south"]
    return {"north": os.getpid(), "south": os.getpid()}


@p.asset(partition_def=PROCESS_DOMAIN, registry=PROCESS_REGISTRY)
def process_bad_tenants(context):
    context.partition_keys = [f"t{i}" for i in range(11)]


@p.asset(partition_def=PROCESS_DOMAIN, registry=PROCESS_REGISTRY)
def process_after_bad(process_bad_tenants):
    return 1


def test_a_producer_under_the_process_executor_discovers_in_the_worker_and_fans_out(tmp_path):
    url = f"sqlite:///{tmp_path}/partita.db"
    flow = p.Flow(["process_load"], registry=PROCESS_REGISTRY, executor="process", store=url)

    result = flow.run()

    assert result.status is p.RunStatus.SUCCESS, [attempt.exception for attempt in result.attempts()]
    producer = producer_attempt(result, "process_tenants")
    worker_pid = producer.output["acme"]
    assert worker_pid != os.getpid()
    assert result.discovered_partition_keys("process_tenants") == ("acme", "globex")
    loads = result.tasks["process_load"].attempts
    assert [(attempt.output[0], attempt.output[1]) for attempt in loads] == [
        ("acme", worker_pid),
        ("globex", worker_pid),
    ]
    assert all(attempt.output[2] != os.getpid() for attempt in loads)
    store = p.open_store(url)
    try:
        events = store.list_events(asset="process_tenants", kinds=[p.SourceKind.DISCOVERY])
        known = [record.key for record in store.list_partitions("runtime:process-tenants")]
    finally:
        store.close()
    assert [(event.partition_key, event.extra) for event in events] == [("acme", {"pid": worker_pid}), ("globex", {})]
    assert known == ["acme", "globex"]


def test_an_async_producer_under_the_process_executor_discovers():
    result = p.Flow(["process_async_tenants"], registry=PROCESS_REGISTRY, executor="process", store=False).run()

    assert result.status is p.RunStatus.SUCCESS, [attempt.exception for attempt in result.attempts()]
    assert result.discovered_partition_keys("process_async_tenants") == ("north", "south")


def test_a_violation_in_a_worker_process_fails_the_producer_with_a_discovery_error():
    result = p.Flow(["process_after_bad"], registry=PROCESS_REGISTRY, executor="process", store=False).run()

    assert result.status is p.RunStatus.FAILED
    attempt = producer_attempt(result, "process_bad_tenants")
    assert isinstance(attempt.exception, p.DiscoveryError)
    assert result.tasks["process_after_bad"].attempts == ()


# -- retries ------------------------------------------------------------------------------------------------


def test_a_producer_that_fails_once_is_retried_and_only_the_successful_invocation_s_keys_fan_out(tmp_path):
    invocations = []

    def tenants(context):
        invocations.append(context.invocation_number)
        if context.invocation_number == 1:
            context.add_partition("from-the-failed-invocation")
            raise ConnectionError("directory unavailable")
        context.partition_keys = ["acme", "globex"]
        return {"acme": 1, "globex": 2}

    clock = p.FastForwardClock()
    recorder = Recorder()
    url = f"sqlite:///{tmp_path}/partita.db"
    pipeline = Pipeline(tenants, producer_options={"retry": p.RetryPolicy(max_attempts=3, delay=5.0)})
    result = pipeline.flow(clock=clock, store=url).run(observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert invocations == [1, 2]
    assert clock.sleeps == [5.0]
    attempt = producer_attempt(result)
    assert attempt.status is p.AttemptStatus.SUCCESS
    assert [invocation.succeeded for invocation in attempt.invocations] == [False, True]
    assert keys_of(result, "load") == ["acme", "globex"]
    assert result.discovered_partition_keys("tenants") == ("acme", "globex")
    assert [e for e in recorder.events if e[0] == "retrying"] == [("retrying", "tenants", None, 1)]
    # No fanned-out attempt started before the producer succeeded.
    producer_finished = recorder.events.index(("finish", "tenants", None, p.AttemptStatus.SUCCESS))
    first_load = recorder.events.index(recorder.starts("load")[0])
    assert first_load > producer_finished
    store = p.open_store(url)
    try:
        events = store.list_events(asset="tenants", kinds=[p.SourceKind.DISCOVERY])
    finally:
        store.close()
    assert [event.partition_key for event in events] == ["acme", "globex"]
    assert [event.source.invocation for event in events] == [2, 2]


def test_a_producer_that_keeps_failing_exhausts_its_retries_and_starts_no_downstream_work():
    def tenants(context):
        context.add_partition("acme")
        raise ConnectionError("directory unavailable")

    pipeline = Pipeline(tenants, producer_options={"retry": p.RetryPolicy(max_attempts=2)})
    result = pipeline.run(clock=p.FastForwardClock())

    assert_no_downstream_work(pipeline, result)
    assert len(producer_attempt(result).invocations) == 2


def test_fanned_out_attempts_are_retried_per_key():
    attempts_by_key: dict[str, list[int]] = {}
    lock = threading.Lock()
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["acme", "globex", "initech"]

    @p.asset(partition_def=domain, registry=registry, retry=p.RetryPolicy(max_attempts=3, delay=1.0))
    def load(context, tenants):
        with lock:
            attempts_by_key.setdefault(context.partition_key, []).append(context.invocation_number)
        if context.partition_key == "globex" and context.invocation_number == 1:
            raise TimeoutError("flaky")
        if context.partition_key == "initech":
            raise TimeoutError("always")
        return context.partition_key

    clock = p.FastForwardClock()
    result = p.Flow(["load"], registry=registry, store=False, clock=clock).run()

    assert result.status is p.RunStatus.FAILED
    assert attempts_by_key == {"acme": [1], "globex": [1, 2], "initech": [1, 2, 3]}
    assert statuses(result, "load") == [
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.FAILED, None),
    ]
    assert [len(attempt.invocations) for attempt in result.tasks["load"].attempts] == [1, 2, 3]
    assert result.failed_partition_keys("load") == ("initech",)


# -- groups and resource policies on fanned-out attempts --------------------------------------------------


def _run_with_a_partition_group(keys, max_active_keys):
    """Run the pipeline up to ``publish`` with ``load`` and ``publish`` in one group; the result and a recorder."""

    def tenants(context):
        context.partition_keys = keys

    recorder = Recorder()
    flow = Pipeline(tenants).flow(
        targets=["publish"],
        partition_groups=[p.PartitionGroup(["load", "publish"], max_active_keys=max_active_keys)],
        max_concurrency=16,
    )
    return flow.run(observers=[recorder]), recorder


def test_a_partition_group_over_two_fanned_out_assets_admits_one_key_at_a_time():
    result, recorder = _run_with_a_partition_group(["k1", "k2", "k3", "k4"], max_active_keys=1)

    assert result.status is p.RunStatus.SUCCESS
    fanned = [event for event in recorder.events if event[1] != "tenants"]
    expected = []
    for key in ("k1", "k2", "k3", "k4"):
        for member in ("load", "publish"):
            expected.append(("start", member, key, 1))
            expected.append(("finish", member, key, p.AttemptStatus.SUCCESS))
    assert fanned == expected


def test_a_partition_group_with_two_active_keys_never_exceeds_two():
    result, recorder = _run_with_a_partition_group([f"k{i}" for i in range(6)], max_active_keys=2)

    assert result.status is p.RunStatus.SUCCESS
    active: set = set()
    peak = 0
    for kind, asset_name, key, _ in recorder.events:
        if kind == "start" and asset_name == "load":
            active.add(key)
            peak = max(peak, len(active))
        elif kind == "finish" and asset_name == "publish":
            active.discard(key)
    assert peak <= 2
    assert keys_of(result, "publish") == [f"k{i}" for i in range(6)]


def test_a_resource_policy_bounds_the_fanned_out_attempts():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")
    lock = threading.Lock()
    active = peak = 0
    pair = threading.Barrier(2, timeout=WAIT)

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["a", "b", "c", "d"]

    @p.asset(partition_def=domain, resource="api", registry=registry)
    def load(context, tenants):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            pair.wait()  # two bodies on the resource run at the same time, never three
        finally:
            with lock:
                active -= 1
        return context.partition_key

    result = p.Flow(
        ["load"],
        registry=registry,
        store=False,
        max_concurrency=8,
        resources={"api": p.ResourcePolicy(max_concurrency=2)},
    ).run()

    assert result.status is p.RunStatus.SUCCESS, [attempt.exception for attempt in result.attempts()]
    assert peak == 2
    stats = result.resources["api"]
    assert stats.invocations == 4
    assert stats.succeeded == 4
    assert stats.wait_count >= 1  # ready keys beyond the limit were denied by the policy


def test_a_rate_limit_spaces_the_fanned_out_attempts_in_virtual_time():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["a", "b", "c"]

    @p.asset(partition_def=domain, resource="api", registry=registry)
    def load(context, tenants):
        return context.partition_key

    result = p.Flow(
        ["load"],
        registry=registry,
        store=False,
        clock=p.FastForwardClock(),
        resources={"api": p.ResourcePolicy(rate_limit=p.RateLimit(1, 10.0))},
    ).run()

    assert result.status is p.RunStatus.SUCCESS
    api = result.resources["api"]
    assert api.invocations == 3
    assert api.wait_count == 2
    assert api.wait_duration == pytest.approx(20.0)


def test_an_open_circuit_skips_the_remaining_fanned_out_attempts():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["a", "b", "c", "d"]

    @p.asset(partition_def=domain, resource="api", registry=registry)
    def load(context, tenants):
        if context.partition_key == "b":
            raise PermissionError("the api is down")
        return context.partition_key

    result = p.Flow(
        ["load"],
        registry=registry,
        store=False,
        max_concurrency=1,
        resources={"api": p.ResourcePolicy(max_concurrency=1, classify_failure=lambda exc: p.OpenCircuit())},
    ).run()

    assert result.status is p.RunStatus.FAILED
    assert statuses(result, "load") == [
        (p.AttemptStatus.SUCCESS, None),
        (p.AttemptStatus.FAILED, None),
        (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN),
        (p.AttemptStatus.SKIPPED, p.SkipReason.RESOURCE_CIRCUIT_OPEN),
    ]
    assert result.failed_partition_keys("load") == ("b",)
    assert result.circuit_skipped_partition_keys("load") == ("c", "d")


def test_the_producer_can_use_a_resource_and_its_statistics_count_it_once():
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, resource="directory", registry=registry)
    def tenants(context):
        context.partition_keys = ["a", "b", "c"]

    @p.asset(partition_def=domain, resource="directory", registry=registry)
    def load(tenants):
        return 1

    recorder = Recorder()
    result = p.Flow(
        ["load"],
        registry=registry,
        store=False,
        resources={"directory": p.ResourcePolicy(max_concurrency=1)},
    ).run(observers=[recorder])

    assert result.status is p.RunStatus.SUCCESS
    assert result.resources["directory"].invocations == 4
    running = 0
    for kind, *_ in recorder.events:
        running += 1 if kind == "start" else -1
        assert running <= 1


# -- discovered_partition_keys --------------------------------------------------------------------------


def test_discovered_partition_keys_keep_discovery_order_and_are_an_immutable_tuple():
    def tenants(context):
        context.add_partition("zeta")
        context.add_partition("alpha")
        context.add_partition("mid")
        context.add_partition("alpha")

    result = Pipeline(tenants).run()

    keys = result.discovered_partition_keys("tenants")
    assert keys == ("zeta", "alpha", "mid")
    assert isinstance(keys, tuple)
    assert keys_of(result, "load") == ["zeta", "alpha", "mid"]


def test_discovered_partition_keys_of_an_unknown_asset_is_a_key_error():
    def tenants(context):
        context.partition_keys = ["a"]

    result = Pipeline(tenants).run()

    with pytest.raises(KeyError):
        result.discovered_partition_keys("nope")


@pytest.mark.parametrize("asset_name", ["load", "publish", "summary"])
def test_discovered_partition_keys_of_an_asset_that_does_not_discover_is_a_value_error(asset_name):
    def tenants(context):
        context.partition_keys = ["a"]

    result = Pipeline(tenants).run()

    with pytest.raises(ValueError):
        result.discovered_partition_keys(asset_name)


def test_discovered_partition_keys_of_a_run_without_a_runtime_domain_is_a_value_error():
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def daily(context):
        return 1

    result = p.Flow(["daily"], registry=registry, store=False).run({"partition_keys": ["2026-01-01"]})

    with pytest.raises(ValueError):
        result.discovered_partition_keys("daily")


def test_the_record_keeps_the_discovered_key_count_not_the_keys():
    def tenants(context):
        context.partition_keys = [SECRET + "-1", SECRET + "-2", SECRET + "-3"]

    result = Pipeline(tenants).run()

    for version in (1, 2, 3, 4):
        assert SECRET not in json.dumps(result.to_record(version=version))
    record = result.to_record(version=4)
    (producer,) = [task for task in record["tasks"] if task["asset"] == "tenants"]
    assert producer["discovered_key_count"] == 3
