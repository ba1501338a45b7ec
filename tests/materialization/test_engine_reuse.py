"""Output reuse through the public API: @asset(materialization=..., version=...)
and Flow.run (seed 003 "Reuse committed partition outputs", SPEC §10).

For each selected key the executor resolves a record; a committed record is
loaded and passed downstream without running the body (resolution
``materialized``); otherwise the body runs and its output is released
downstream only after the adapter commits it (resolution ``executed``).
Resolve, load and commit failures fail the attempt; a failed load never
reruns the body. Planning validates declarations without contacting the
adapter.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from typing import Any

import pytest
from click.testing import CliRunner

from partita import (
    AssetRegistry,
    AttemptStatus,
    DefinitionError,
    FileMaterialization,
    Flow,
    InspectionState,
    MaterializationContext,
    MaterializationError,
    MaterializationRecord,
    PartitionDef,
    PartitionGroup,
    PlanningError,
    Resolution,
    ResourcePolicy,
    RetryPolicy,
    RunStatus,
    SkipReason,
    StaticPartitionDef,
    asset,
    open_store,
)
from partita.cli.main import cli

TENANTS = StaticPartitionDef("tenants", ["tenant-a", "tenant-b", "tenant-c"])
REGIONS = StaticPartitionDef("regions", ["eu", "us"])


def _context(asset_name: str, key: Any, inputs: tuple[str, ...] = (), version: str = "1", definition=TENANTS):
    return MaterializationContext(
        asset_name=asset_name,
        version=version,
        partition_domain=definition.domain,
        partition_key=key,
        partition_key_text=definition.format_key(key),
        partition_key_present=True,
        input_materialization_ids=inputs,
    )


def _attempts(result, name: str) -> dict[Any, Any]:
    return {attempt.partition_key: attempt for attempt in result.tasks[name].attempts}


class RecordingAdapter:
    """An in-memory adapter that records every call and can be told to fail."""

    def __init__(self, fail: dict[str, BaseException] | None = None, fail_keys: set[str] | None = None) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.records: dict[str, MaterializationRecord] = {}
        self.outputs: dict[str, Any] = {}
        self.fail = fail or {}
        self.fail_keys = fail_keys
        self.lock = threading.Lock()

    def _note(self, method: str, context: MaterializationContext) -> None:
        with self.lock:
            self.calls.append((method, context.asset_name, context.partition_key_text))
        if method in self.fail and (self.fail_keys is None or context.partition_key_text in self.fail_keys):
            raise self.fail[method]

    def resolve(self, context):
        self._note("resolve", context)
        return self.records.get(context.identity_hash())

    def load(self, context, record):
        self._note("load", context)
        return self.outputs[record.materialization_id]

    def commit(self, context, output):
        self._note("commit", context)
        record = MaterializationRecord(
            materialization_id=uuid.uuid4().hex,
            asset_name=context.asset_name,
            version=context.version,
            partition_domain=context.partition_domain,
            partition_key_text=context.partition_key_text,
            partition_key_present=context.partition_key_present,
            input_materialization_ids=context.input_materialization_ids,
        )
        with self.lock:
            self.records[context.identity_hash()] = record
            self.outputs[record.materialization_id] = output
        return record


class AsyncAdapter(RecordingAdapter):
    """The same adapter with coroutine methods (run on the loop)."""

    async def resolve(self, context):  # type: ignore[override]
        return RecordingAdapter.resolve(self, context)

    async def load(self, context, record):  # type: ignore[override]
        return RecordingAdapter.load(self, context, record)

    async def commit(self, context, output):  # type: ignore[override]
        return RecordingAdapter.commit(self, context, output)


class MixedAdapter(RecordingAdapter):
    """Async resolve, sync load and commit."""

    async def resolve(self, context):  # type: ignore[override]
        return RecordingAdapter.resolve(self, context)


class Chain:
    """up -> down, both materialized in the tenants domain."""

    def __init__(self, adapter: Any, version: str = "1") -> None:
        self.registry = AssetRegistry()
        self.calls: list[tuple[str, Any, Any]] = []
        calls = self.calls

        @asset(partition_def=TENANTS, materialization=adapter, version=version, registry=self.registry)
        def up(context):
            calls.append(("up", context.partition_key, None))
            return {"tenant": context.partition_key, "build": sum(1 for c in calls if c[0] == "up")}

        @asset(partition_def=TENANTS, materialization=adapter, version=version, registry=self.registry)
        def down(context, up):
            calls.append(("down", context.partition_key, up))
            return {"from": up}

    def flow(self, target: str = "down", **options: Any) -> Flow:
        return Flow([target], registry=self.registry, **options)

    def bodies(self, name: str) -> list[Any]:
        return [key for asset_name, key, _ in self.calls if asset_name == name]


# -- executed, then materialized --------------------------------------------------------------


def test_first_run_executes_and_commits_second_run_loads(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    config = {"partition_keys": ["tenant-a", "tenant-b"]}

    first = chain.flow().run(config)

    assert first.status is RunStatus.SUCCESS
    for name in ("up", "down"):
        for attempt in _attempts(first, name).values():
            assert attempt.status is AttemptStatus.SUCCESS
            assert attempt.resolution is Resolution.EXECUTED
            assert attempt.materialization_id is not None
            assert len(attempt.invocations) == 1
    up_first = _attempts(first, "up")
    for key, attempt in up_first.items():
        resolved = store.resolve(_context("up", key))
        assert resolved is not None and resolved.materialization_id == attempt.materialization_id
    assert sorted(chain.bodies("up")) == ["tenant-a", "tenant-b"]

    second = chain.flow().run(config)

    assert second.status is RunStatus.SUCCESS
    assert len(chain.calls) == 4, "no body runs when every output is reusable"
    for name in ("up", "down"):
        before, after = _attempts(first, name), _attempts(second, name)
        for key, attempt in after.items():
            assert attempt.resolution is Resolution.MATERIALIZED
            assert attempt.materialization_id == before[key].materialization_id
            assert attempt.output == before[key].output
            assert attempt.invocations == ()


def test_materialized_outputs_are_what_was_committed(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    config = {"partition_keys": ["tenant-a"]}
    chain.flow().run(config)
    second = chain.flow().run(config)
    assert _attempts(second, "down")["tenant-a"].output == {"from": {"tenant": "tenant-a", "build": 1}}


def test_a_new_process_style_adapter_on_the_same_root_reuses(root):
    """A fresh FileMaterialization object (as in another process) reuses the committed outputs."""
    first = Chain(FileMaterialization(root))
    first.flow().run({"partition_keys": ["tenant-a"]})
    second = Chain(FileMaterialization(root))
    result = second.flow().run({"partition_keys": ["tenant-a"]})
    assert second.calls == []
    assert {a.resolution for t in result.tasks.values() for a in t.attempts} == {Resolution.MATERIALIZED}


def test_only_missing_keys_execute(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    chain.flow().run({"partition_keys": ["tenant-a"]})
    chain.calls.clear()
    result = chain.flow().run({"partition_keys": ["tenant-a", "tenant-b"]})
    up = _attempts(result, "up")
    assert up["tenant-a"].resolution is Resolution.MATERIALIZED
    assert up["tenant-b"].resolution is Resolution.EXECUTED
    assert chain.bodies("up") == ["tenant-b"]
    assert chain.bodies("down") == ["tenant-b"]


def test_bumping_the_version_misses_the_old_records(root):
    store = FileMaterialization(root)
    Chain(store, version="1").flow().run({"partition_keys": ["tenant-a"]})
    bumped = Chain(store, version="2")
    result = bumped.flow().run({"partition_keys": ["tenant-a"]})
    assert {a.resolution for t in result.tasks.values() for a in t.attempts} == {Resolution.EXECUTED}
    assert bumped.bodies("up") == ["tenant-a"]


def test_the_engine_identity_matches_a_hand_built_context(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    result = chain.flow().run({"partition_keys": ["tenant-a"]})
    up = _attempts(result, "up")["tenant-a"]
    down = _attempts(result, "down")["tenant-a"]
    up_context = _context("up", "tenant-a")
    down_context = _context("down", "tenant-a", (up.materialization_id,))
    assert store.inspect(up_context).record.materialization_id == up.materialization_id
    assert store.inspect(down_context).record.materialization_id == down.materialization_id
    assert store.inspect(_context("down", "tenant-a")).state is InspectionState.MISSING


class AnyKey(PartitionDef):
    @property
    def domain(self) -> str:
        return "custom:any-key"


def test_keys_with_the_same_text_and_different_types_are_separate_identities(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    calls: list[Any] = []
    definition = AnyKey()

    @asset(partition_def=definition, materialization=store, version="1", registry=registry)
    def typed(context):
        calls.append(context.partition_key)
        return type(context.partition_key).__name__

    flow = Flow(["typed"], registry=registry)
    first = flow.run({"partition_keys": [1, "1"]})
    assert [a.output for a in first.tasks["typed"].attempts] == ["int", "str"]
    ids = [a.materialization_id for a in first.tasks["typed"].attempts]
    assert len(set(ids)) == 2

    second = flow.run({"partition_keys": ["1", 1]})
    outputs = {(type(a.partition_key), a.output) for a in second.tasks["typed"].attempts}
    assert outputs == {(int, "int"), (str, "str")}
    assert {a.resolution for a in second.tasks["typed"].attempts} == {Resolution.MATERIALIZED}
    assert len(calls) == 2


def test_a_plain_consumer_of_a_materialized_asset_receives_the_loaded_output(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    seen: list[Any] = []

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def up(context):
        return [context.partition_key]

    @asset(partition_def=TENANTS, registry=registry)
    def plain(up):
        seen.append(up)
        return len(up)

    flow = Flow(["plain"], registry=registry)
    flow.run({"partition_keys": ["tenant-a"]})
    result = flow.run({"partition_keys": ["tenant-a"]})
    assert _attempts(result, "up")["tenant-a"].resolution is Resolution.MATERIALIZED
    plain_attempt = _attempts(result, "plain")["tenant-a"]
    assert plain_attempt.resolution is Resolution.EXECUTED
    assert plain_attempt.materialization_id is None
    assert seen == [["tenant-a"], ["tenant-a"]]


def test_a_retried_body_commits_once_after_it_succeeds(root, files):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    invocations: list[int] = []

    @asset(
        partition_def=TENANTS,
        materialization=store,
        version="1",
        retry=RetryPolicy(max_attempts=3, delay=0),
        registry=registry,
    )
    def flaky(context):
        invocations.append(context.invocation_number)
        if context.invocation_number == 1:
            raise RuntimeError("transient")
        return "ok"

    result = Flow(["flaky"], registry=registry).run({"partition_keys": ["tenant-a"]})
    attempt = result.tasks["flaky"].attempts[0]
    assert attempt.status is AttemptStatus.SUCCESS
    assert attempt.resolution is Resolution.EXECUTED
    assert len(attempt.invocations) == 2
    assert invocations == [1, 2]
    assert len(files.generations()) == 1


def test_many_keys_reuse_concurrently(root):
    definition = StaticPartitionDef("many", [f"k{n:02d}" for n in range(24)])
    store = FileMaterialization(root)
    registry = AssetRegistry()
    calls: list[str] = []

    @asset(partition_def=definition, materialization=store, version="1", registry=registry)
    def many(context):
        calls.append(context.partition_key)
        return context.partition_key

    flow = Flow(["many"], registry=registry, max_concurrency=4)
    config = {"partition_keys": [f"k{n:02d}" for n in range(24)]}
    first = flow.run(config)
    second = flow.run(config)
    assert len(calls) == 24
    assert [a.output for a in second.tasks["many"].attempts] == [f"k{n:02d}" for n in range(24)]
    assert {a.resolution for a in second.tasks["many"].attempts} == {Resolution.MATERIALIZED}
    assert [a.materialization_id for a in first.tasks["many"].attempts] == [
        a.materialization_id for a in second.tasks["many"].attempts
    ]


def test_reuse_inside_a_partition_group_keeps_key_order(root):
    chain = Chain(FileMaterialization(root))
    flow = Flow(["down"], registry=chain.registry, partition_groups=[PartitionGroup(["up", "down"], max_active_keys=1)])
    config = {"partition_keys": ["tenant-a", "tenant-b"]}
    first = flow.run(config)
    assert [(name, key) for name, key, _ in chain.calls] == [
        ("up", "tenant-a"),
        ("down", "tenant-a"),
        ("up", "tenant-b"),
        ("down", "tenant-b"),
    ]
    second = flow.run(config)
    assert first.status is second.status is RunStatus.SUCCESS
    assert {a.resolution for t in second.tasks.values() for a in t.attempts} == {Resolution.MATERIALIZED}
    assert len(chain.calls) == 4


# -- input ids are part of the downstream identity -----------------------------------------------


def test_a_changed_upstream_makes_the_downstream_miss(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    config = {"partition_keys": ["tenant-a", "tenant-b"]}
    first = chain.flow().run(config)
    old_up = _attempts(first, "up")

    store.invalidate(_context("up", "tenant-a"), reason="source changed")
    rebuilt = chain.flow("up").run({"partition_keys": ["tenant-a"]})
    new_up_id = _attempts(rebuilt, "up")["tenant-a"].materialization_id
    assert _attempts(rebuilt, "up")["tenant-a"].resolution is Resolution.EXECUTED
    assert new_up_id != old_up["tenant-a"].materialization_id
    chain.calls.clear()

    result = chain.flow().run(config)

    up = _attempts(result, "up")
    down = _attempts(result, "down")
    assert up["tenant-a"].resolution is Resolution.MATERIALIZED
    assert up["tenant-a"].materialization_id == new_up_id
    assert up["tenant-b"].materialization_id == old_up["tenant-b"].materialization_id
    assert down["tenant-a"].resolution is Resolution.EXECUTED, "the downstream identity includes the new input id"
    assert down["tenant-a"].materialization_id != _attempts(first, "down")["tenant-a"].materialization_id
    assert down["tenant-b"].resolution is Resolution.MATERIALIZED
    assert chain.bodies("up") == []
    assert chain.bodies("down") == ["tenant-a"]
    assert down["tenant-a"].output == {"from": _attempts(rebuilt, "up")["tenant-a"].output}
    assert down["tenant-a"].output != _attempts(first, "down")["tenant-a"].output
    # The old downstream record is still there (no cascade), under the old input id.
    old_down_context = _context("down", "tenant-a", (old_up["tenant-a"].materialization_id,))
    assert store.inspect(old_down_context).state is InspectionState.AVAILABLE
    new_down_context = _context("down", "tenant-a", (new_up_id,))
    assert store.inspect(new_down_context).record.materialization_id == down["tenant-a"].materialization_id


def test_an_upstream_rebuilt_in_the_same_run_makes_the_downstream_rebuild(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    config = {"partition_keys": ["tenant-a"]}
    chain.flow().run(config)
    store.invalidate(_context("up", "tenant-a"), reason="rebuild")
    chain.calls.clear()

    result = chain.flow().run(config)

    assert _attempts(result, "up")["tenant-a"].resolution is Resolution.EXECUTED
    assert _attempts(result, "down")["tenant-a"].resolution is Resolution.EXECUTED
    assert [c[0] for c in chain.calls] == ["up", "down"]


def test_input_ids_keep_the_dependency_order(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def left(context):
        return "L"

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def right(context):
        return "R"

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def joined(right, left):
        return right + left

    result = Flow(["joined"], registry=registry).run({"partition_keys": ["tenant-a"]})
    left_id = _attempts(result, "left")["tenant-a"].materialization_id
    right_id = _attempts(result, "right")["tenant-a"].materialization_id
    joined_id = _attempts(result, "joined")["tenant-a"].materialization_id
    ordered = store.inspect(_context("joined", "tenant-a", (right_id, left_id)))
    assert ordered.state is InspectionState.AVAILABLE
    assert ordered.record.materialization_id == joined_id
    assert store.inspect(_context("joined", "tenant-a", (left_id, right_id))).state is InspectionState.MISSING


# -- release only after commit ---------------------------------------------------------------------


def test_the_consumer_runs_only_after_the_producer_is_committed(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    observed: list[Any] = []

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def producer(context):
        return {"key": context.partition_key}

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    def consumer(context, producer):
        record = store.resolve(_context("producer", context.partition_key))
        observed.append((context.partition_key, None if record is None else record.materialization_id))
        return producer

    result = Flow(["consumer"], registry=registry).run({"partition_keys": ["tenant-a", "tenant-b"]})

    assert result.status is RunStatus.SUCCESS
    produced = _attempts(result, "producer")
    assert sorted(observed) == sorted((key, produced[key].materialization_id) for key in produced)


def test_a_plain_consumer_also_waits_for_the_commit():
    events: list[tuple[str, str | None]] = []
    lock = threading.Lock()

    class OrderingAdapter(RecordingAdapter):
        def commit(self, context, output):
            record = super().commit(context, output)
            with lock:
                events.append(("committed", context.partition_key_text))
            return record

    adapter = OrderingAdapter()
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def producer(context):
        return 1

    @asset(partition_def=TENANTS, registry=registry)
    def consumer(context, producer):
        with lock:
            events.append(("consumed", context.partition_key))
        return producer

    keys = ["tenant-a", "tenant-b", "tenant-c"]
    result = Flow(["consumer"], registry=registry).run({"partition_keys": keys})
    assert result.status is RunStatus.SUCCESS
    for key in keys:
        assert events.index(("committed", key)) < events.index(("consumed", key))


# -- adapter failures -------------------------------------------------------------------------------


class AdapterFailure(Exception):
    pass


def _failing_chain(method: str, fail_keys: set[str] | None = None, retry: RetryPolicy | None = None):
    adapter = RecordingAdapter()
    registry = AssetRegistry()
    calls: list[tuple[str, str]] = []

    @asset(partition_def=TENANTS, materialization=adapter, version="1", retry=retry, registry=registry)
    def up(context):
        calls.append(("up", context.partition_key))
        return context.partition_key

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def down(context, up):
        calls.append(("down", context.partition_key))
        return up

    flow = Flow(["down"], registry=registry)
    adapter.fail_keys = fail_keys
    return adapter, flow, calls


@pytest.mark.parametrize("method", ["resolve", "load"])
def test_a_resolve_or_load_failure_fails_the_attempt_without_running_the_body(method):
    adapter, flow, calls = _failing_chain(method, retry=RetryPolicy(max_attempts=3, delay=0))
    flow.run({"partition_keys": ["tenant-a"]})  # commits
    calls.clear()
    adapter.fail[method] = AdapterFailure(f"{method} exploded")

    result = flow.run({"partition_keys": ["tenant-a"]})

    assert result.status is RunStatus.FAILED
    attempt = _attempts(result, "up")["tenant-a"]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, AdapterFailure)
    assert attempt.failure is not None and f"{method} exploded" in attempt.failure.message
    assert attempt.invocations == ()
    assert attempt.resolution is None and attempt.materialization_id is None
    assert calls == [], "a failed resolve or load never falls back to running the body"
    down = _attempts(result, "down")["tenant-a"]
    assert down.status is AttemptStatus.SKIPPED and down.reason is SkipReason.DEPENDENCY_FAILED


def test_a_resolve_failure_on_a_first_run_never_runs_the_body():
    adapter, flow, calls = _failing_chain("resolve")
    adapter.fail["resolve"] = AdapterFailure("cannot reach the store")
    result = flow.run({"partition_keys": ["tenant-a"]})
    assert _attempts(result, "up")["tenant-a"].status is AttemptStatus.FAILED
    assert calls == []
    assert [c[0] for c in adapter.calls] == ["resolve"]


def test_a_commit_failure_fails_the_attempt_and_releases_nothing():
    adapter, flow, calls = _failing_chain("commit")
    adapter.fail["commit"] = AdapterFailure("disk full")

    result = flow.run({"partition_keys": ["tenant-a"]})

    assert result.status is RunStatus.FAILED
    attempt = _attempts(result, "up")["tenant-a"]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, AdapterFailure)
    assert attempt.resolution is None and attempt.materialization_id is None
    assert attempt.output is None
    assert len(attempt.invocations) == 1 and attempt.invocations[0].succeeded
    assert calls == [("up", "tenant-a")]
    down = _attempts(result, "down")["tenant-a"]
    assert down.reason is SkipReason.DEPENDENCY_FAILED
    assert ("resolve", "down", "tenant-a") not in adapter.calls


def test_an_adapter_failure_for_one_key_leaves_the_other_keys_alone():
    adapter, flow, calls = _failing_chain("commit", fail_keys={"tenant-b"})
    adapter.fail["commit"] = AdapterFailure("only tenant-b")
    result = flow.run({"partition_keys": ["tenant-a", "tenant-b"]})
    up, down = _attempts(result, "up"), _attempts(result, "down")
    assert up["tenant-a"].status is AttemptStatus.SUCCESS
    assert down["tenant-a"].status is AttemptStatus.SUCCESS
    assert up["tenant-b"].status is AttemptStatus.FAILED
    assert down["tenant-b"].reason is SkipReason.DEPENDENCY_FAILED


@pytest.mark.parametrize(
    "bad_record",
    [
        "not a record",
        MaterializationRecord(
            materialization_id="0" * 32,
            asset_name="somebody-else",
            version="1",
            partition_domain=TENANTS.domain,
            partition_key_text="tenant-a",
            partition_key_present=True,
            input_materialization_ids=(),
        ),
    ],
    ids=["wrong-type", "other-identity"],
)
@pytest.mark.parametrize("method", ["resolve", "commit"])
def test_an_adapter_returning_a_wrong_record_fails_the_attempt(method, bad_record):
    class Lying(RecordingAdapter):
        def resolve(self, context):
            super().resolve(context)
            return bad_record if method == "resolve" else None

        def commit(self, context, output):
            super().commit(context, output)
            return bad_record

    adapter = Lying()
    registry = AssetRegistry()
    calls: list[str] = []

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def up(context):
        calls.append(context.partition_key)
        return 1

    result = Flow(["up"], registry=registry).run({"partition_keys": ["tenant-a"]})
    attempt = result.tasks["up"].attempts[0]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, MaterializationError)
    assert calls == ([] if method == "resolve" else ["tenant-a"])
    assert not any(call[0] == "load" for call in adapter.calls)


def test_a_file_materialization_load_failure_never_reruns_the_body(root, files):
    store = FileMaterialization(root)
    chain = Chain(store)
    first = chain.flow().run({"partition_keys": ["tenant-a"]})
    up_id = _attempts(first, "up")["tenant-a"].materialization_id
    generation = files.generation(_context("up", "tenant-a"), up_id)
    generation.write_bytes(generation.read_bytes() + b" ")  # the payload gains a byte
    chain.calls.clear()

    result = chain.flow().run({"partition_keys": ["tenant-a"]})

    assert _attempts(result, "up")["tenant-a"].status is AttemptStatus.FAILED
    assert chain.calls == []


# -- async adapters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("adapter_type", [AsyncAdapter, MixedAdapter], ids=["async", "mixed"])
def test_an_adapter_with_async_methods_works(adapter_type):
    adapter = adapter_type()
    chain = Chain(adapter)
    config = {"partition_keys": ["tenant-a", "tenant-b"]}

    first = chain.flow().run(config)
    second = chain.flow().run(config)

    assert first.status is RunStatus.SUCCESS and second.status is RunStatus.SUCCESS
    assert {a.resolution for t in first.tasks.values() for a in t.attempts} == {Resolution.EXECUTED}
    assert {a.resolution for t in second.tasks.values() for a in t.attempts} == {Resolution.MATERIALIZED}
    assert len(chain.calls) == 4
    for name in ("up", "down"):
        assert [a.output for a in first.tasks[name].attempts] == [a.output for a in second.tasks[name].attempts]
    assert sum(1 for call in adapter.calls if call[0] == "commit") == 4
    assert sum(1 for call in adapter.calls if call[0] == "load") == 4


@pytest.mark.parametrize("method", ["resolve", "load", "commit"])
def test_async_adapter_failures_fail_the_attempt(method):
    adapter = AsyncAdapter()
    chain = Chain(adapter)
    if method != "commit":
        chain.flow("up").run({"partition_keys": ["tenant-a"]})
    chain.calls.clear()
    adapter.fail[method] = AdapterFailure(method)
    result = chain.flow("up").run({"partition_keys": ["tenant-a"]})
    attempt = result.tasks["up"].attempts[0]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, AdapterFailure)
    assert chain.bodies("up") == ([] if method != "commit" else ["tenant-a"])


def test_an_async_body_is_materialized_too(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()
    calls: list[str] = []

    @asset(partition_def=TENANTS, materialization=store, version="1", registry=registry)
    async def fetched(context):
        calls.append(context.partition_key)
        return {"async": True}

    flow = Flow(["fetched"], registry=registry)
    flow.run({"partition_keys": ["tenant-a"]})
    result = flow.run({"partition_keys": ["tenant-a"]})
    assert result.tasks["fetched"].attempts[0].resolution is Resolution.MATERIALIZED
    assert result.tasks["fetched"].attempts[0].output == {"async": True}
    assert calls == ["tenant-a"]


# -- planning rules ------------------------------------------------------------------------------------


def _expect_planning_error(registry, target, adapter, bodies, match):
    flow = Flow([target], registry=registry)
    with pytest.raises(PlanningError, match=match):
        flow.plan({"partition_keys": ["tenant-a"]})
    with pytest.raises(PlanningError, match=match):
        flow.run({"partition_keys": ["tenant-a"]})
    assert adapter.calls == [], "planning never contacts the adapter"
    assert bodies == [], "no body runs when planning fails"


def test_materialization_without_a_version_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=TENANTS, materialization=adapter, registry=registry)
    def unversioned(context):
        bodies.append(1)

    _expect_planning_error(registry, "unversioned", adapter, bodies, "version")


@pytest.mark.parametrize("version", ["", " ", "\t", "  \n"])
def test_an_empty_or_whitespace_version_is_a_definition_error(version):
    registry = AssetRegistry()
    with pytest.raises(DefinitionError, match="version"):

        @asset(partition_def=TENANTS, materialization=RecordingAdapter(), version=version, registry=registry)
        def orders(context):
            return 1

    assert "orders" not in registry
    assert len(registry) == 0


@pytest.mark.parametrize("version", [1, 1.0, b"1", " 1", "1 "])
def test_a_non_text_or_padded_version_is_a_definition_error(version):
    with pytest.raises(DefinitionError, match="version"):

        @asset(partition_def=TENANTS, materialization=RecordingAdapter(), version=version, registry=AssetRegistry())
        def orders(context):
            return 1


@pytest.mark.parametrize("adapter", [object(), "a/folder", 5])
def test_a_materialization_without_the_protocol_methods_is_a_definition_error(adapter):
    with pytest.raises(DefinitionError, match="materialization"):

        @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=AssetRegistry())
        def orders(context):
            return 1


def test_an_unpartitioned_materialized_asset_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(materialization=adapter, version="1", registry=registry)
    def single():
        bodies.append(1)

    flow = Flow(["single"], registry=registry)
    with pytest.raises(PlanningError, match="partitioned"):
        flow.plan()
    with pytest.raises(PlanningError, match="partitioned"):
        flow.run()
    assert adapter.calls == [] and bodies == []


def test_a_direct_dependency_that_is_not_materialized_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=TENANTS, registry=registry)
    def raw(context):
        bodies.append("raw")

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def cleaned(raw):
        bodies.append("cleaned")

    _expect_planning_error(registry, "cleaned", adapter, bodies, "'raw'")


def test_a_deps_only_dependency_that_is_not_materialized_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=TENANTS, registry=registry)
    def marker(context):
        bodies.append("marker")

    @asset(partition_def=TENANTS, materialization=adapter, version="1", deps=["marker"], registry=registry)
    def cleaned(context):
        bodies.append("cleaned")

    _expect_planning_error(registry, "cleaned", adapter, bodies, "'marker'")


def test_a_materialized_dependency_without_a_version_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=TENANTS, materialization=adapter, registry=registry)
    def raw(context):
        bodies.append("raw")

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def cleaned(raw):
        bodies.append("cleaned")

    _expect_planning_error(registry, "cleaned", adapter, bodies, "version")


def test_a_dependency_in_another_domain_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=REGIONS, materialization=adapter, version="1", registry=registry)
    def regional(context):
        bodies.append("regional")

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def per_tenant(regional):
        bodies.append("per_tenant")

    _expect_planning_error(registry, "per_tenant", adapter, bodies, "domain")


def test_an_unpartitioned_materialized_dependency_is_a_planning_error():
    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(materialization=adapter, version="1", registry=registry)
    def rates():
        bodies.append("rates")

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def priced(rates):
        bodies.append("priced")

    _expect_planning_error(registry, "priced", adapter, bodies, "partitioned|domain")


def test_planning_only_checks_the_selected_closure():
    adapter, registry = RecordingAdapter(), AssetRegistry()

    @asset(partition_def=TENANTS, materialization=adapter, registry=registry)
    def broken(context):
        return 1

    @asset(partition_def=TENANTS, materialization=adapter, version="1", registry=registry)
    def fine(context):
        return 2

    result = Flow(["fine"], registry=registry).run({"partition_keys": ["tenant-a"]})
    assert result.status is RunStatus.SUCCESS
    assert {call[1] for call in adapter.calls} == {"fine"}


def test_a_version_without_materialization_is_allowed_and_not_participating():
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, version="3", registry=registry)
    def plain(context):
        return 1

    flow = Flow(["plain"], registry=registry)
    assert flow.plan({"partition_keys": ["tenant-a"]}).to_dict()["tasks"][0]["materialization"] is None
    attempt = flow.run({"partition_keys": ["tenant-a"]}).tasks["plain"].attempts[0]
    assert attempt.resolution is Resolution.EXECUTED and attempt.materialization_id is None


# -- plans report participation without contacting the adapter ----------------------------------------


def test_plan_reports_participation_without_calling_the_adapter(root):
    store = FileMaterialization(root)
    adapter = RecordingAdapter()
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, materialization=store, version="2026.1", registry=registry)
    def stored(context):
        return 1

    @asset(partition_def=TENANTS, materialization=adapter, version="7", registry=registry)
    def recorded(stored):
        return stored

    @asset(partition_def=TENANTS, registry=registry)
    def plain(recorded):
        return recorded

    flow = Flow(["plain"], registry=registry)
    plan = flow.plan({"partition_keys": ["tenant-a", "tenant-b"]})
    document = plan.to_dict()
    by_name = {task["name"]: task for task in document["tasks"]}
    assert by_name["stored"]["materialization"] == {"adapter": "FileMaterialization", "version": "2026.1"}
    assert by_name["recorded"]["materialization"] == {"adapter": "RecordingAdapter", "version": "7"}
    assert by_name["plain"]["materialization"] is None
    assert json.loads(plan.to_json()) == document
    assert adapter.calls == []
    assert not root.exists(), "planning never touches the store root"
    # The plan does not claim that a reusable output exists: it is the same after commits.
    flow.run(plan)
    assert flow.plan({"partition_keys": ["tenant-a", "tenant-b"]}).to_dict() == document
    text = json.dumps(document)
    assert "materialized" not in text.replace('"materialization"', "")


def test_an_approved_plan_runs_with_reuse(root):
    store = FileMaterialization(root)
    chain = Chain(store)
    flow = chain.flow()
    plan = flow.plan({"partition_keys": ["tenant-a"]})
    flow.run(plan)
    result = flow.run(plan)
    assert {a.resolution for t in result.tasks.values() for a in t.attempts} == {Resolution.MATERIALIZED}


# -- records and history ------------------------------------------------------------------------------


def _record_attempts(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return next(task["attempts"] for task in document["tasks"] if task["asset"] == name)


def test_record_v4_carries_resolution_and_materialization_id(root):
    chain = Chain(FileMaterialization(root))
    config = {"partition_keys": ["tenant-a", "tenant-b"]}
    first = chain.flow().run(config)
    second = chain.flow().run(config)

    for result, resolution in ((first, "executed"), (second, "materialized")):
        record = result.to_record(version=4)
        assert record["version"] == 4
        for name in ("up", "down"):
            attempts = _record_attempts(record, name)
            assert [a["resolution"] for a in attempts] == [resolution, resolution]
            assert [a["materialization_id"] for a in attempts] == [
                a.materialization_id for a in result.tasks[name].attempts
            ]
        json.dumps(record)  # JSON-safe
    assert [a["materialization_id"] for a in _record_attempts(first.to_record(version=4), "up")] == [
        a["materialization_id"] for a in _record_attempts(second.to_record(version=4), "up")
    ]


@pytest.mark.parametrize("version", [None, 1, 2, 3])
def test_records_before_v4_keep_their_original_shape(root, version):
    chain = Chain(FileMaterialization(root))
    chain.flow().run({"partition_keys": ["tenant-a"]})
    result = chain.flow().run({"partition_keys": ["tenant-a"]})
    record = result.to_record() if version is None else result.to_record(version=version)
    assert record["version"] == (version or 1)
    for task in record["tasks"]:
        for attempt in task["attempts"]:
            assert "resolution" not in attempt
            assert "materialization_id" not in attempt


def test_record_v4_of_a_failed_reuse_has_no_provenance():
    adapter, flow, _ = _failing_chain("commit")
    adapter.fail["commit"] = AdapterFailure("disk full")
    record = flow.run({"partition_keys": ["tenant-a"]}).to_record(version=4)
    up = _record_attempts(record, "up")[0]
    assert up["status"] == "failed"
    assert up["resolution"] is None and up["materialization_id"] is None


def test_run_history_and_cli_keep_provenance_without_contacting_the_adapter(root, tmp_path, snapshot, monkeypatch):
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    store = FileMaterialization(root)

    class CountingFileMaterialization(RecordingAdapter):
        def resolve(self, context):
            self._note("resolve", context)
            return store.resolve(context)

        def load(self, context, record):
            self._note("load", context)
            return store.load(context, record)

        def commit(self, context, output):
            self._note("commit", context)
            return store.commit(context, output)

    adapter = CountingFileMaterialization()
    chain = Chain(adapter)
    url = f"sqlite:///{tmp_path}/h.db"
    flow = chain.flow(store=url)
    config = {"partition_keys": ["tenant-a", "tenant-b"]}
    first = flow.run(config)
    second = flow.run(config)
    calls_after_runs = len(adapter.calls)
    root_after_runs = snapshot(root)

    history = open_store(url)
    try:
        for result, resolution in ((first, "executed"), (second, "materialized")):
            tasks = {task.asset: task for task in history.get_tasks(result.run_id)}
            for name in ("up", "down"):
                stored = tasks[name].attempts
                assert [a.resolution for a in stored] == [resolution, resolution]
                assert [a.materialization_id for a in stored] == [
                    a.materialization_id for a in result.tasks[name].attempts
                ]
    finally:
        history.close()

    for result, resolution in ((first, "executed"), (second, "materialized")):
        invoked = CliRunner().invoke(cli, ["runs", "show", result.run_id, "--store", url, "--json"])
        assert invoked.exit_code == 0, invoked.output
        document = json.loads(invoked.stdout)
        assert document["schema"] == "partita.run"
        run = document["run"]
        for name in ("up", "down"):
            attempts = _record_attempts(run, name)
            assert [a["resolution"] for a in attempts] == [resolution, resolution]
            assert [a["materialization_id"] for a in attempts] == [
                a.materialization_id for a in result.tasks[name].attempts
            ]
        assert "tenant-a" not in invoked.stdout, "records keep no raw key unless opted in"

    table = CliRunner().invoke(cli, ["runs", "show", second.run_id, "--store", url], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "materialized" in table.output
    assert len(adapter.calls) == calls_after_runs, "reading history never contacts the adapter"
    assert snapshot(root) == root_after_runs


# -- resource statistics --------------------------------------------------------------------------------


def test_resource_statistics_count_commits_as_operations(root):
    store = FileMaterialization(root)
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, materialization=store, version="1", resource="db", registry=registry)
    def loaded(context):
        return context.partition_key

    flow = Flow(["loaded"], registry=registry, resources={"db": ResourcePolicy(max_concurrency=2)})
    config = {"partition_keys": ["tenant-a", "tenant-b"]}

    first = flow.run(config)
    stats = first.resources["db"]
    assert stats.invocations == 4, "two bodies and two commits"
    assert stats.succeeded == 4
    assert stats.failed == 0

    second = flow.run(config)
    reused = second.resources["db"]
    assert reused.invocations == 0, "loading a committed output runs no body and commits nothing"
    assert reused.succeeded == 0


def test_resource_statistics_count_a_failed_commit_as_a_failed_operation():
    adapter = RecordingAdapter(fail={"commit": AdapterFailure("disk full")})
    registry = AssetRegistry()

    @asset(partition_def=TENANTS, materialization=adapter, version="1", resource="db", registry=registry)
    def loaded(context):
        return 1

    flow = Flow(["loaded"], registry=registry, resources={"db": ResourcePolicy()})
    stats = flow.run({"partition_keys": ["tenant-a"]}).resources["db"]
    assert stats.invocations == 2
    assert stats.succeeded == 1
    assert stats.failed == 1


def test_payloads_on_disk_match_the_attempt_outputs(root, files):
    store = FileMaterialization(root)
    chain = Chain(store)
    result = chain.flow().run({"partition_keys": ["tenant-a"]})
    up = _attempts(result, "up")["tenant-a"]
    manifest, payload = files.read(files.generation(_context("up", "tenant-a"), up.materialization_id))
    assert manifest["payload"]["sha256"] == hashlib.sha256(payload).hexdigest()
    assert json.loads(payload) == up.output


# -- where adapter methods run ------------------------------------------------------------------------


def test_sync_adapter_methods_run_on_storage_threads_and_async_ones_on_the_loop():
    main = threading.main_thread()

    class ThreadRecording(RecordingAdapter):
        def _note(self, method, context):
            super()._note(method, context)
            with self.lock:
                self.threads = getattr(self, "threads", []) + [(method, threading.current_thread())]

    class AsyncThreadRecording(ThreadRecording):
        async def resolve(self, context):  # type: ignore[override]
            return ThreadRecording.resolve(self, context)

        async def load(self, context, record):  # type: ignore[override]
            return ThreadRecording.load(self, context, record)

        async def commit(self, context, output):  # type: ignore[override]
            return ThreadRecording.commit(self, context, output)

    sync_adapter, async_adapter = ThreadRecording(), AsyncThreadRecording()
    for adapter in (sync_adapter, async_adapter):
        chain = Chain(adapter)
        chain.flow().run({"partition_keys": ["tenant-a"]})
        chain.flow().run({"partition_keys": ["tenant-a"]})
        assert {method for method, _ in adapter.threads} == {"resolve", "load", "commit"}
    assert all(thread is not main for _, thread in sync_adapter.threads)
    assert all(thread is main for _, thread in async_adapter.threads)


def test_an_invalid_identity_fails_the_attempt_before_the_adapter_or_body():
    class TextlessKeys(PartitionDef):
        @property
        def domain(self) -> str:
            return "custom:textless"

        def format_key(self, key: Any) -> Any:
            return 5  # not canonical text

    adapter, registry, bodies = RecordingAdapter(), AssetRegistry(), []

    @asset(partition_def=TextlessKeys(), materialization=adapter, version="1", registry=registry)
    def odd(context):
        bodies.append(context.partition_key)

    result = Flow(["odd"], registry=registry).run({"partition_keys": ["x"]})
    attempt = result.tasks["odd"].attempts[0]
    assert attempt.status is AttemptStatus.FAILED
    assert isinstance(attempt.exception, MaterializationError)
    assert adapter.calls == [] and bodies == []
