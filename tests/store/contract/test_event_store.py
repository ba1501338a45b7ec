"""The event store contract (SPEC §8): record_event, list_events and list_events_by_ids on every backend.

An event is durable when its receipt returns; its dedupe identity makes a
repeat the first event's receipt (``duplicate=True``) and a different payload
under that identity an `EmissionError` that stores nothing. Events read back
in id order with every field as written; ``since`` pages past an id.
"""

from __future__ import annotations

import datetime as dt

import pytest

from partita.errors import EmissionError, PartitaError
from partita.events.model import EventSource, SourceKind

from .conftest import draft

WHEN = dt.datetime(2026, 3, 1, 12, 0, 0, 123_456, tzinfo=dt.UTC)


def _stored_ids(event_store, **filters) -> list[int]:
    return [event.id for event in event_store.list_events(**filters)]


# -- recording and reading back -----------------------------------------------------------------


def test_a_receipt_names_the_stored_event_with_the_draft_timestamp(event_store):
    receipt = event_store.record_event(draft(timestamp=WHEN, dedupe_key="key:first"))

    assert isinstance(receipt.id, int)
    assert receipt.timestamp == WHEN
    assert receipt.duplicate is False
    (event,) = event_store.list_events()
    assert (event.id, event.timestamp) == (receipt.id, WHEN)


def test_every_event_field_round_trips_with_times_in_utc(event_store):
    date = dt.datetime(2026, 2, 28, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    extra = {"rows": 100, "ratio": 0.25, "note": "grüße ✓", "nested": {"list": [1, None, True]}, "empty": {}}
    source = EventSource(SourceKind.ATTEMPT, "r" * 32, "producer", True, 3)
    local_time = WHEN.astimezone(dt.timezone(dt.timedelta(hours=9)))
    receipt = event_store.record_event(
        draft(
            "plain", key="tenant/ä-7", date=date, extra=extra, source=source, dedupe_key="key:x", timestamp=local_time
        )
    )

    (event,) = event_store.list_events()
    assert event.id == receipt.id
    assert (event.asset, event.partition_key, event.extra) == ("plain", "tenant/ä-7", extra)
    assert event.partition_date == date
    assert event.partition_date.isoformat() == date.isoformat()
    assert event.timestamp == WHEN
    assert event.timestamp.utcoffset() == dt.timedelta(0)
    assert event.source == source


def test_an_unkeyed_external_event_reads_back_without_key_date_or_attempt_fields(event_store):
    event_store.record_event(draft("plain", dedupe_key="external:1"))

    (event,) = event_store.list_events()
    assert (event.partition_key, event.partition_date, event.extra) == (None, None, {})
    assert event.source == EventSource(SourceKind.EXTERNAL, None, None, None, None)


def test_ids_grow_in_recording_order_and_listing_follows_them(event_store):
    ids = [event_store.record_event(draft(extra={"n": n}, dedupe_key=f"key:{n}")).id for n in range(5)]

    assert ids == sorted(ids) and len(set(ids)) == 5
    assert [(event.id, event.extra["n"]) for event in event_store.list_events()] == list(
        zip(ids, range(5), strict=True)
    )


# -- dedupe identity ---------------------------------------------------------------------------


def test_a_repeated_dedupe_key_returns_the_first_receipt_marked_duplicate_and_stores_nothing(event_store):
    first = event_store.record_event(draft(extra={"rows": 1}, dedupe_key="key:batch-41", timestamp=WHEN))
    later = WHEN + dt.timedelta(minutes=5)

    repeats = [
        event_store.record_event(draft(extra={"rows": 1}, dedupe_key="key:batch-41", timestamp=later)) for _ in range(2)
    ]

    for repeat in repeats:
        assert repeat.duplicate is True
        assert (repeat.id, repeat.timestamp) == (first.id, first.timestamp)
    (event,) = event_store.list_events()
    assert (event.id, event.timestamp) == (first.id, WHEN)


@pytest.mark.parametrize(
    "changed",
    [{"extra": {"rows": 2}}, {"key": "other"}, {"date": WHEN}, {"asset": "other_asset"}],
    ids=["extra", "key", "date", "asset"],
)
def test_a_dedupe_key_reused_for_another_payload_is_an_emission_error_and_stores_nothing(event_store, changed):
    first = event_store.record_event(draft(extra={"rows": 1}, dedupe_key="key:batch-41"))
    fields = {"extra": {"rows": 1}, **changed}

    with pytest.raises(EmissionError, match="dedupe_key was already used for a different event") as caught:
        event_store.record_event(draft(fields.pop("asset", "plain"), dedupe_key="key:batch-41", **fields))

    assert isinstance(caught.value, PartitaError)
    (event,) = event_store.list_events()
    assert (event.id, event.extra, event.partition_key) == (first.id, {"rows": 1}, None)


def test_the_same_payload_under_different_dedupe_keys_is_two_events(event_store):
    receipts = [event_store.record_event(draft(extra={"same": 1}, dedupe_key=f"key:{n}")) for n in range(2)]

    assert [receipt.duplicate for receipt in receipts] == [False, False]
    assert receipts[0].id != receipts[1].id
    assert len(event_store.list_events()) == 2


def test_events_without_a_dedupe_identity_never_collide(event_store):
    receipts = [event_store.record_event(draft(extra={"same": 1})) for _ in range(3)]

    assert [receipt.duplicate for receipt in receipts] == [False, False, False]
    assert len({receipt.id for receipt in receipts}) == 3


# -- filters, limits, paging ---------------------------------------------------------------------


@pytest.fixture
def mixed(event_store) -> dict[str, int]:
    """Six events over two assets, two keys, two runs and every source kind; name -> id."""
    run_a, run_b = "a" * 32, "b" * 32
    events = {
        "plain": draft("plain", dedupe_key="key:1"),
        "keyed_a_1": draft("keyed", key="k1", source=EventSource(SourceKind.ATTEMPT, run_a, "p", True, 1), dedupe_key="key:2"),
        "keyed_a_2": draft("keyed", key="k2", source=EventSource(SourceKind.OUTLET, run_a, "keyed", True, 1)),
        "flow_a": draft("plain", source=EventSource(SourceKind.FLOW, run_a), dedupe_key="key:3"),
        "keyed_b_1": draft("keyed", key="k1", source=EventSource(SourceKind.DISCOVERY, run_b, "keyed", True, 1)),
        "plain_b": draft("plain", source=EventSource(SourceKind.OUTLET, run_b, "plain", False, 1)),
    }  # fmt: skip
    return {name: event_store.record_event(event).id for name, event in events.items()}


def test_list_events_filters_by_asset_key_run_and_kind_and_combines_them(event_store, mixed):
    assert _stored_ids(event_store) == list(mixed.values())
    assert _stored_ids(event_store, asset="keyed") == [mixed["keyed_a_1"], mixed["keyed_a_2"], mixed["keyed_b_1"]]
    assert _stored_ids(event_store, partition_key="k1") == [mixed["keyed_a_1"], mixed["keyed_b_1"]]
    assert _stored_ids(event_store, asset="keyed", partition_key="k2") == [mixed["keyed_a_2"]]
    assert _stored_ids(event_store, run_id="a" * 32) == [mixed["keyed_a_1"], mixed["keyed_a_2"], mixed["flow_a"]]
    own = [SourceKind.ATTEMPT, SourceKind.FLOW]
    assert _stored_ids(event_store, run_id="a" * 32, kinds=own) == [mixed["keyed_a_1"], mixed["flow_a"]]
    assert _stored_ids(event_store, kinds=[SourceKind.OUTLET]) == [mixed["keyed_a_2"], mixed["plain_b"]]
    assert _stored_ids(event_store, kinds=[]) == []
    assert _stored_ids(event_store, asset="unknown") == []
    assert _stored_ids(event_store, asset="plain", partition_key="k1") == []


def test_since_excludes_ids_up_to_and_including_it_and_limit_keeps_the_oldest(event_store, mixed):
    ids = list(mixed.values())

    assert _stored_ids(event_store, since=ids[1]) == ids[2:]
    assert _stored_ids(event_store, since=ids[-1]) == []
    assert _stored_ids(event_store, since=0) == ids
    assert _stored_ids(event_store, limit=2) == ids[:2]
    assert _stored_ids(event_store, asset="keyed", since=ids[1], limit=1) == [mixed["keyed_a_2"]]


def test_paging_with_since_reads_every_event_once_in_id_order(event_store, mixed):
    seen: list[int] = []
    since = None
    while page := event_store.list_events(since=since, limit=4):
        seen.extend(event.id for event in page)
        since = page[-1].id

    assert seen == list(mixed.values())


# -- by id -----------------------------------------------------------------------------------------


def test_list_events_by_ids_returns_them_in_id_order_and_skips_unknown_ids(event_store, mixed):
    ids = list(mixed.values())
    wanted = [ids[4], 10_000_000, ids[0], ids[4], ids[2]]

    events = event_store.list_events_by_ids(wanted)

    assert [event.id for event in events] == [ids[0], ids[2], ids[4]]
    assert events == [event for event in event_store.list_events() if event.id in wanted]
    assert event_store.list_events_by_ids([]) == []
    assert event_store.list_events_by_ids([10_000_000, -1]) == []


def test_list_events_by_ids_finds_events_past_a_thousand_unknown_ids(event_store, mixed):
    ids = list(mixed.values())
    unknown = list(range(-1200, 0))

    assert [event.id for event in event_store.list_events_by_ids([*unknown, *reversed(ids)])] == ids


# -- the last success of each key -----------------------------------------------------------------


def _outlet_at(asset: str, key: str | None, run_id: str, when: dt.datetime):
    return draft(asset, key=key, source=EventSource(SourceKind.OUTLET, run_id, asset, key is not None, 1), timestamp=when)


def test_last_successes_give_each_key_its_newest_outlet_event_with_run_and_time(event_store):
    event_store.record_event(_outlet_at("load", "a", "run-1", WHEN))
    event_store.record_event(_outlet_at("load", "b", "run-1", WHEN))
    newest = event_store.record_event(_outlet_at("load", "a", "run-2", WHEN + dt.timedelta(hours=1)))

    successes = event_store.last_successes("load")

    assert set(successes) == {"a", "b"}
    assert (successes["a"].event_id, successes["a"].run_id) == (newest.id, "run-2")
    assert successes["a"].at == WHEN + dt.timedelta(hours=1)
    assert successes["b"].run_id == "run-1"


def test_last_successes_ignore_published_events_other_assets_and_unkeyed_outlets(event_store):
    event_store.record_event(draft("load", key="published", dedupe_key="key:published"))
    event_store.record_event(draft("load", key="external"))
    event_store.record_event(_outlet_at("other", "a", "run-1", WHEN))
    event_store.record_event(_outlet_at("load", None, "run-1", WHEN))

    assert event_store.last_successes("load") == {}
    assert set(event_store.last_successes("other")) == {"a"}


def test_last_successes_of_given_keys_answer_those_keys_alone_past_any_chunk(event_store):
    for key in ("a", "b", "c"):
        event_store.record_event(_outlet_at("load", key, "run-1", WHEN))
    newest = event_store.record_event(_outlet_at("load", "c", "run-2", WHEN + dt.timedelta(hours=1)))
    asked = ["c", "a", *(f"unknown-{number}" for number in range(1200))]

    successes = event_store.last_successes("load", asked)

    assert set(successes) == {"a", "c"}
    assert (successes["c"].event_id, successes["c"].run_id) == (newest.id, "run-2")
    assert successes["c"] == event_store.last_successes("load")["c"]
    assert event_store.last_successes("load", []) == {}


def test_succeeded_keys_are_the_keys_of_last_successes(event_store):
    event_store.record_event(_outlet_at("load", "a", "run-1", WHEN))
    event_store.record_event(_outlet_at("load", "a", "run-2", WHEN))
    event_store.record_event(_outlet_at("load", "b", "run-1", WHEN))
    event_store.record_event(_outlet_at("load", None, "run-1", WHEN))
    event_store.record_event(_outlet_at("other", "c", "run-1", WHEN))
    event_store.record_event(draft("load", key="published", dedupe_key="key:published"))

    assert event_store.succeeded_keys("load") == frozenset({"a", "b"}) == frozenset(event_store.last_successes("load"))
    assert event_store.succeeded_keys("never") == frozenset()


@pytest.mark.parametrize("asked", ["few", "many"])  # many: read by their span, not by name
def test_reads_limited_to_given_keys_answer_exactly_those_keys(event_store, asked):
    for key in ("a", "b", "c", "d", "é"):
        event_store.record_event(_outlet_at("load", key, "run-1", WHEN))
    wanted = ["b", "d", "é"] + ([] if asked == "few" else [f"c-{number:04}" for number in range(3000)])

    assert event_store.succeeded_keys("load", wanted) == frozenset({"b", "d", "é"})
    assert set(event_store.last_successes("load", wanted)) == {"b", "d", "é"}
    assert event_store.last_successes("load", wanted)["d"] == event_store.last_successes("load")["d"]
    assert event_store.succeeded_keys("load", []) == frozenset() and event_store.last_successes("load", ()) == {}
