"""The partition registry contract (SPEC §9, §14): keys of runtime domains, driven through the verbs alone.

record_discovery stores a producer's discovery events and updates the
domain's registry in one transaction: new keys get a first-seen time, known
keys a new last-seen time and last run, and a retired key discovered again
becomes active (recorded in its history). retire_partition is idempotent and
names no key in its error. Domains never share keys.
"""

from __future__ import annotations

import datetime as dt

import pytest

import partita as p
from partita.events.model import SourceKind

from .conftest import discovery

DOMAIN = "runtime:tenants"
SECRET = "tenant-secret-90ab3e"
FIRST, SECOND = "1" * 32, "2" * 32
SLACK = dt.timedelta(seconds=1)


def _discover(registry, run_id: str, *keys: str, domain: str = DOMAIN) -> None:
    registry.record_discovery(domain, run_id, [discovery(key, run_id) for key in keys])


def known(registry, domain: str = DOMAIN):
    return {record.key: record for record in registry.list_partitions(domain)}


# -- discovery -----------------------------------------------------------------------------------


def test_discovered_keys_are_active_with_first_and_last_seen_in_utc_and_their_run(partition_registry):
    before = dt.datetime.now(dt.UTC)
    _discover(partition_registry, FIRST, "acme", "globex")
    after = dt.datetime.now(dt.UTC)

    records = partition_registry.list_partitions(DOMAIN)
    assert [record.key for record in records] == ["acme", "globex"]
    for record in records:
        assert record.domain == DOMAIN
        assert (record.retired, record.state, record.retired_at, record.reactivated_at) == (False, "active", None, None)
        assert record.first_seen == record.last_seen
        assert before - SLACK <= record.first_seen <= after + SLACK
        assert record.first_seen.utcoffset() == dt.timedelta(0)
        assert record.last_run_id == FIRST


def test_discovery_events_are_stored_with_the_registry_update(partition_registry, event_store):
    drafts = [discovery("acme", FIRST, extra={"rows": 10}), discovery("globex", FIRST)]
    partition_registry.record_discovery(DOMAIN, FIRST, drafts)

    events = event_store.list_events(asset="tenants", kinds=[SourceKind.DISCOVERY], run_id=FIRST)
    assert [(event.partition_key, event.extra) for event in events] == [("acme", {"rows": 10}), ("globex", {})]
    assert all(event.source.kind is SourceKind.DISCOVERY and event.source.run_id == FIRST for event in events)


def test_a_discovery_of_no_keys_records_nothing(partition_registry, event_store):
    partition_registry.record_discovery(DOMAIN, FIRST, [])

    assert partition_registry.list_partitions(DOMAIN) == []
    assert event_store.list_events() == []


def test_a_known_key_discovered_again_keeps_its_first_seen_and_takes_the_new_run(partition_registry):
    _discover(partition_registry, FIRST, "acme", "globex")
    seen = known(partition_registry)

    _discover(partition_registry, SECOND, "globex", "initech")

    records = known(partition_registry)
    assert list(records) == ["acme", "globex", "initech"]
    assert records["acme"] == seen["acme"]
    globex = records["globex"]
    assert globex.first_seen == seen["globex"].first_seen
    assert globex.last_seen >= seen["globex"].last_seen
    assert globex.last_run_id == SECOND
    assert records["initech"].first_seen >= seen["acme"].last_seen
    assert records["initech"].last_run_id == SECOND


def test_keys_are_listed_in_first_seen_order_then_by_key(partition_registry):
    _discover(partition_registry, FIRST, "zeta", "alpha")
    _discover(partition_registry, SECOND, "beta", "zeta")

    assert [record.key for record in partition_registry.list_partitions(DOMAIN)] == ["alpha", "zeta", "beta"]


def test_keys_are_listed_in_pages_of_that_order(partition_registry):
    _discover(partition_registry, FIRST, "zeta", "alpha")
    _discover(partition_registry, SECOND, "beta", "gamma")

    def page(**bounds: int) -> list[str]:
        return [record.key for record in partition_registry.list_partitions(DOMAIN, **bounds)]

    assert page(limit=2) == ["alpha", "zeta"]
    assert page(limit=2, offset=2) == ["beta", "gamma"]
    assert page(offset=3) == ["gamma"] and page(limit=5, offset=4) == []


# -- retiring and reactivating ---------------------------------------------------------------------


def test_retiring_a_key_marks_it_retired_and_records_it(partition_registry):
    _discover(partition_registry, FIRST, "acme", "globex")

    record = partition_registry.retire_partition(DOMAIN, "acme")

    assert record.key == "acme"
    assert record.retired is True
    assert record.state == "retired"
    assert record.retired_at is not None
    by_key = known(partition_registry)
    assert by_key["acme"].retired is True
    assert by_key["globex"].retired is False
    history = partition_registry.partition_history(DOMAIN, "acme")
    assert [action for action, _, _ in history] == ["retired"]
    assert history[0][1] == record.retired_at


def test_retiring_twice_is_idempotent(partition_registry):
    _discover(partition_registry, FIRST, "acme")

    first = partition_registry.retire_partition(DOMAIN, "acme")
    second = partition_registry.retire_partition(DOMAIN, "acme")

    assert second.retired is True
    assert second.retired_at == first.retired_at
    assert [action for action, _, _ in partition_registry.partition_history(DOMAIN, "acme")] == ["retired"]


def test_a_retired_key_keeps_its_times_and_run_and_reads_back_as_retire_returned_it(partition_registry):
    _discover(partition_registry, FIRST, "acme")
    before = known(partition_registry)["acme"]

    record = partition_registry.retire_partition(DOMAIN, "acme")

    assert known(partition_registry)["acme"] == record
    assert (record.first_seen, record.last_seen, record.last_run_id) == (before.first_seen, before.last_seen, FIRST)
    assert record.retired_at >= record.last_seen
    assert record.retired_at.utcoffset() == dt.timedelta(0)


def test_a_retired_key_discovered_again_becomes_active_and_the_reactivation_is_recorded(partition_registry):
    _discover(partition_registry, FIRST, "acme", "globex")
    retired = partition_registry.retire_partition(DOMAIN, "acme")

    _discover(partition_registry, SECOND, "acme")

    record = known(partition_registry)["acme"]
    assert (record.retired, record.state) == (False, "active")
    assert record.first_seen == retired.first_seen
    assert record.last_seen >= retired.last_seen
    assert record.last_run_id == SECOND
    assert record.reactivated_at is not None and record.reactivated_at >= retired.retired_at
    history = partition_registry.partition_history(DOMAIN, "acme")
    assert [(action, run_id) for action, _, run_id in history] == [("retired", None), ("reactivated", SECOND)]
    assert history[1][1] == record.reactivated_at
    assert known(partition_registry)["globex"].last_run_id == FIRST


def test_a_retired_key_not_discovered_again_stays_retired_and_an_active_one_gets_no_history(partition_registry):
    _discover(partition_registry, FIRST, "acme", "globex")
    partition_registry.retire_partition(DOMAIN, "acme")

    _discover(partition_registry, SECOND, "globex")

    records = known(partition_registry)
    assert records["acme"].retired is True
    assert records["globex"].reactivated_at is None
    assert [action for action, _, _ in partition_registry.partition_history(DOMAIN, "acme")] == ["retired"]
    assert partition_registry.partition_history(DOMAIN, "globex") == []


def test_retiring_a_key_again_after_reactivation_records_a_second_retirement(partition_registry):
    _discover(partition_registry, FIRST, "acme")
    partition_registry.retire_partition(DOMAIN, "acme")
    _discover(partition_registry, SECOND, "acme")

    record = partition_registry.retire_partition(DOMAIN, "acme")

    assert record.retired is True
    assert [action for action, _, _ in partition_registry.partition_history(DOMAIN, "acme")] == [
        "retired",
        "reactivated",
        "retired",
    ]


def test_retiring_an_unknown_key_is_an_unknown_partition_error_that_does_not_repeat_it(partition_registry):
    _discover(partition_registry, FIRST, "acme")

    with pytest.raises(p.UnknownPartitionError) as caught:
        partition_registry.retire_partition(DOMAIN, SECRET)
    assert SECRET not in str(caught.value)
    with pytest.raises(p.UnknownPartitionError):
        partition_registry.retire_partition("runtime:unknown", "acme")
    assert isinstance(caught.value, p.ConfigurationError)
    assert list(known(partition_registry)) == ["acme"]


def test_an_unknown_key_has_no_history(partition_registry):
    assert partition_registry.partition_history(DOMAIN, "never-seen") == []


# -- domains ------------------------------------------------------------------------------------------


def test_domains_keep_their_keys_states_and_histories_apart(partition_registry):
    _discover(partition_registry, FIRST, "acme", "shared")
    _discover(partition_registry, FIRST, "eu", "shared", domain="runtime:regions")

    partition_registry.retire_partition(DOMAIN, "shared")

    assert list(known(partition_registry)) == ["acme", "shared"]
    assert list(known(partition_registry, "runtime:regions")) == ["eu", "shared"]
    assert known(partition_registry)["shared"].retired is True
    assert known(partition_registry, "runtime:regions")["shared"].retired is False
    assert partition_registry.partition_history("runtime:regions", "shared") == []
    assert partition_registry.list_partitions("runtime:unknown") == []

    _discover(partition_registry, SECOND, "shared", domain="runtime:regions")
    assert known(partition_registry)["shared"].retired is True
    assert known(partition_registry)["shared"].last_run_id == FIRST
