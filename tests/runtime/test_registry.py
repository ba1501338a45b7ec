"""Discovery events and the partition registry of runtime domains in the store (SPEC §8, §9, §14).

Every discovery records exactly one asset event per distinct key on the
producer's asset (kind ``discovery``, carrying the key's ``extra``) and no
unkeyed outlet event for the producer; it updates the domain's registry
(first seen, last seen, retired). A retired key that is discovered again
becomes active, and that is recorded. Run records keep counts, never the
discovered keys. Every test runs on SQLite and PostgreSQL (``store_url``).
Retiring keys is proven on the verbs in tests/store/contract/test_partition_registry.py.
"""

from __future__ import annotations

import datetime as dt
import json

import partita as p

DOMAIN = "runtime:tenants"
SECRET = "tenant-secret-90ab3e"


class Tenants:
    """A runtime domain whose producer discovers ``self.keys`` (settable between runs)."""

    def __init__(self, keys=(), extras=None, *, fail=False):
        self.keys = list(keys)
        self.extras = dict(extras or {})
        self.fail = fail
        self.registry = p.AssetRegistry()
        domain = p.PartitionAtRuntime("tenants")
        state = self

        @p.asset(partition_def=domain, registry=self.registry)
        def tenants(context):
            for key in state.keys:
                context.add_partition(key, extra=state.extras.get(key))
            if state.fail:
                raise RuntimeError("the directory went away")
            return {key: f"out-{key}" for key in state.keys}

        @p.asset(partition_def=domain, registry=self.registry)
        def load(context, tenants):
            return tenants

    def run(self, store, config=None, **options):
        return p.Flow(["load"], registry=self.registry, store=store, **options).run(config)


def discovery_events(store, run_id=None):
    return store.list_events(asset="tenants", kinds=[p.SourceKind.DISCOVERY], run_id=run_id)


def known(store):
    return {record.key: record for record in store.list_partitions(DOMAIN)}


# -- discovery events ---------------------------------------------------------------------------------


def test_discovery_records_one_event_per_distinct_key_on_the_producer_s_asset_with_its_extra(store_url, store):
    tenants = Tenants(
        ["acme", "globex", "acme", "initech"], {"acme": {"rows": 10, "region": "eu"}, "globex": {"rows": 0}}
    )

    result = tenants.run(store_url)

    assert result.status is p.RunStatus.SUCCESS
    events = discovery_events(store, run_id=result.run_id)
    assert [(event.partition_key, event.extra) for event in events] == [
        ("acme", {"rows": 10, "region": "eu"}),
        ("globex", {"rows": 0}),
        ("initech", {}),
    ]
    for event in events:
        assert event.asset == "tenants"
        assert event.source.kind is p.SourceKind.DISCOVERY
        assert event.source.run_id == result.run_id
        assert event.source.asset == "tenants"
        assert event.source.invocation == 1
        assert event.partition_date is None
        assert event.timestamp.tzinfo is not None


def test_the_producer_gets_no_unkeyed_outlet_event_and_fanned_out_attempts_get_keyed_outlets(store_url, store):
    result = Tenants(["acme", "globex"]).run(store_url)

    producer_events = store.list_events(asset="tenants", run_id=result.run_id)
    assert all(event.partition_key is not None for event in producer_events)
    assert [event.source.kind for event in producer_events] == [p.SourceKind.DISCOVERY] * 2
    outlets = store.list_events(asset="load", kinds=[p.SourceKind.OUTLET], run_id=result.run_id)
    assert sorted(event.partition_key for event in outlets) == ["acme", "globex"]


def test_discovery_events_can_be_read_by_key(store_url, store):
    Tenants(["acme", "globex"], {"globex": {"rows": 2}}).run(store_url)

    (event,) = store.list_events(asset="tenants", partition_key="globex")
    assert event.extra == {"rows": 2}
    assert event.source.kind is p.SourceKind.DISCOVERY


def test_a_failed_producer_records_no_discovery_and_no_registry_keys(store_url, store):
    result = Tenants(["acme", "globex"], fail=True).run(store_url)

    assert result.status is p.RunStatus.FAILED
    assert discovery_events(store) == []
    assert store.list_events(asset="tenants") == []
    assert store.list_partitions(DOMAIN) == []


def test_a_producer_rejected_for_its_outputs_records_no_discovery(store_url, store):
    registry = p.AssetRegistry()
    domain = p.PartitionAtRuntime("tenants")

    @p.asset(partition_def=domain, registry=registry)
    def tenants(context):
        context.partition_keys = ["acme"]
        return {"acme": 1, "undeclared": 2}

    result = p.Flow(["tenants"], registry=registry, store=store_url).run()

    assert result.status is p.RunStatus.FAILED
    assert discovery_events(store) == []
    assert store.list_partitions(DOMAIN) == []


def test_an_extra_that_is_not_json_fails_the_producer_and_the_run_completes(store_url, store):
    tenants = Tenants(["acme"], {"acme": {"handle": object()}})

    result = tenants.run(store_url)

    assert result.status is p.RunStatus.FAILED
    (attempt,) = result.tasks["tenants"].attempts
    assert isinstance(attempt.exception, p.DiscoveryError)
    assert result.tasks["load"].attempts == ()
    assert store.list_events(asset="tenants") == []
    assert store.list_partitions(DOMAIN) == []


def test_a_producer_that_discovers_zero_keys_records_nothing(store_url, store):
    result = Tenants([]).run(store_url)

    assert result.status is p.RunStatus.SUCCESS
    assert store.list_events(asset="tenants") == []
    assert store.list_partitions(DOMAIN) == []


def test_a_narrowed_run_still_records_every_discovered_key(store_url, store):
    result = Tenants(["acme", "globex", "initech"]).run(store_url, {"partition_keys": ["globex"]})

    assert result.status is p.RunStatus.SUCCESS
    assert [event.partition_key for event in discovery_events(store, result.run_id)] == ["acme", "globex", "initech"]
    assert list(known(store)) == ["acme", "globex", "initech"]
    outlets = store.list_events(asset="load", kinds=[p.SourceKind.OUTLET], run_id=result.run_id)
    assert [event.partition_key for event in outlets] == ["globex"]


def test_a_store_object_works_as_well_as_a_url(store):
    result = Tenants(["acme"]).run(store)

    assert result.status is p.RunStatus.SUCCESS
    assert [event.partition_key for event in discovery_events(store)] == ["acme"]
    assert list(known(store)) == ["acme"]


# -- the registry -----------------------------------------------------------------------------------------


def test_the_registry_tracks_first_seen_last_seen_and_state_across_runs(store_url, store):
    tenants = Tenants(["acme", "globex"])
    before = dt.datetime.now(dt.UTC)
    first = tenants.run(store_url)
    tenants.keys = ["globex", "initech"]
    second = tenants.run(store_url)
    after = dt.datetime.now(dt.UTC)

    records = store.list_partitions(DOMAIN)
    assert [record.key for record in records] == ["acme", "globex", "initech"]
    by_key = {record.key: record for record in records}
    for record in records:
        assert record.domain == DOMAIN
        assert record.retired is False
        assert record.state == "active"
        assert record.retired_at is None
        assert record.reactivated_at is None
        assert (
            before - dt.timedelta(seconds=1) <= record.first_seen <= record.last_seen <= after + dt.timedelta(seconds=1)
        )
    acme, globex, initech = by_key["acme"], by_key["globex"], by_key["initech"]
    assert acme.first_seen == acme.last_seen
    assert acme.last_run_id == first.run_id
    assert globex.first_seen == acme.first_seen
    assert globex.last_seen >= initech.first_seen
    assert globex.last_seen > globex.first_seen
    assert globex.last_run_id == second.run_id
    assert initech.first_seen >= acme.last_seen
    assert initech.last_run_id == second.run_id


def test_a_registry_record_document_has_key_state_and_times(store_url, store):
    Tenants(["acme"]).run(store_url)

    (record,) = store.list_partitions(DOMAIN)
    document = record.to_dict()
    assert document["key"] == "acme"
    assert document["state"] == "active"
    assert dt.datetime.fromisoformat(document["first_seen"]) == record.first_seen
    assert dt.datetime.fromisoformat(document["last_seen"]) == record.last_seen
    assert document["retired_at"] is None
    json.dumps(document)


def test_registries_of_different_domains_are_separate(store_url, store):
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.PartitionAtRuntime("regions"), registry=registry)
    def regions(context):
        context.partition_keys = ["eu"]

    Tenants(["acme"]).run(store_url)
    p.Flow(["regions"], registry=registry, store=store_url).run()

    assert [record.key for record in store.list_partitions(DOMAIN)] == ["acme"]
    assert [record.key for record in store.list_partitions("runtime:regions")] == ["eu"]
    assert store.list_partitions("runtime:unknown") == []


def test_a_retired_key_discovered_again_becomes_active_and_the_reactivation_is_recorded(store_url, store):
    tenants = Tenants(["acme", "globex"])
    first = tenants.run(store_url)
    store.retire_partition(DOMAIN, "acme")
    retired = known(store)["acme"]

    tenants.keys = ["acme"]
    again = tenants.run(store_url)

    record = known(store)["acme"]
    assert record.retired is False
    assert record.state == "active"
    assert record.first_seen == retired.first_seen
    assert record.last_seen >= retired.last_seen
    assert record.last_run_id == again.run_id
    assert record.reactivated_at is not None
    assert record.reactivated_at >= retired.retired_at
    history = store.partition_history(DOMAIN, "acme")
    assert [(action, run_id) for action, _, run_id in history] == [("retired", None), ("reactivated", again.run_id)]
    # The key that was not rediscovered keeps its state and its last run.
    assert known(store)["globex"].last_run_id == first.run_id
    assert known(store)["globex"].retired is False


def test_a_retired_key_that_is_not_discovered_again_stays_retired(store_url, store):
    tenants = Tenants(["acme", "globex"])
    tenants.run(store_url)
    store.retire_partition(DOMAIN, "acme")

    tenants.keys = ["globex"]
    tenants.run(store_url)

    assert known(store)["acme"].retired is True
    assert [action for action, _, _ in store.partition_history(DOMAIN, "acme")] == ["retired"]


def test_an_active_key_discovered_again_has_no_reactivation(store_url, store):
    tenants = Tenants(["acme"])
    tenants.run(store_url)
    tenants.run(store_url)

    assert known(store)["acme"].reactivated_at is None
    assert store.partition_history(DOMAIN, "acme") == []


# -- without a store ----------------------------------------------------------------------------------------------


def test_without_a_store_the_run_still_fans_out_and_reports_the_keys():
    tenants = Tenants(["acme", "globex"], {"acme": {"rows": 1}})

    for store_option in (False, None):
        result = tenants.run(store_option)
        assert result.status is p.RunStatus.SUCCESS
        assert [attempt.partition_key for attempt in result.tasks["load"].attempts] == ["acme", "globex"]
        assert [attempt.output for attempt in result.tasks["load"].attempts] == ["out-acme", "out-globex"]
        assert result.discovered_partition_keys("tenants") == ("acme", "globex")


# -- records keep counts, not keys -----------------------------------------------------------------------------------


def test_records_of_every_version_keep_no_discovered_keys(store_url, store):
    keys = [f"{SECRET}-{index}" for index in range(3)]
    tenants = Tenants(keys, {keys[0]: {"note": SECRET}})

    result = tenants.run(store_url, {"partition_keys": [keys[0], keys[1]]})
    discovering = tenants.run(store_url)

    for run in (result, discovering):
        for version in (1, 2, 3, 4):
            assert SECRET not in json.dumps(run.to_record(version=version))
        assert SECRET not in json.dumps(run.plan.to_dict())
    record = discovering.to_record(version=4)
    (producer,) = [task for task in record["tasks"] if task["asset"] == "tenants"]
    assert producer["discovered_key_count"] == 3
    assert record["selection"] == {"kind": "discover", "domain": DOMAIN, "key_count": None}
    for version in (1, 2, 3):
        assert all("discovered_key_count" not in task for task in discovering.to_record(version=version)["tasks"])


def test_stored_runs_keep_counts_not_discovered_keys(store_url, store):
    keys = [f"{SECRET}-{index}" for index in range(3)]
    result = Tenants(keys).run(store_url)

    stored = store.get_run(result.run_id)
    assert stored.header.discovered_key_counts == {"tenants": 3}
    assert stored.header.selection_kind == "discover"
    assert stored.header.key_count is None
    assert SECRET not in json.dumps(stored.plan)
    tasks = store.get_tasks(result.run_id)
    assert SECRET not in repr(tasks)
    by_asset = {task.asset: task for task in tasks}
    assert len(by_asset["load"].attempts) == 3
    assert all(attempt.partition_key is None for attempt in by_asset["load"].attempts)
    assert all(attempt.partition_key_present for attempt in by_asset["load"].attempts)
    assert all(attempt.status == "success" for attempt in by_asset["load"].attempts)
