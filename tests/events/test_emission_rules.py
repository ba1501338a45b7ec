"""Emission rules (SPEC §8, seed 001 "Proposed API and semantics").

``context.emit(...)`` and ``partita.emit(...)`` validate before anything is
stored: the asset must be registered; partition arguments are explicit,
never inherited from the producer's own key, and normalized by the target
asset's definition; a ``partition_date`` needs a key and a timezone;
``extra`` is a strict JSON object of bounded size; a dedupe key names one
event. A rejection is an `EmissionError` that names the rule and never
repeats the rejected key (keys here are distinctive so a leak would show),
and it publishes nothing. Emission outside a running body or callback
(import time, after the run, a thread without the context) is rejected.

Every rule runs through both entry points, with no store (memory) and with
a SQLite and a PostgreSQL store.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
import threading
import zoneinfo
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import partita as p
from partita.events.emission import MAX_EXTRA_BYTES

SECRET_TENANT = "tenant-secret-zq5512"
TENANTS = p.StaticPartitionDef("tenants", ["acme-private-7731", "globex-private-8842"])
DAYS = p.DatePartitionDef()
HOURS = p.HourlyPartitionDef()
DAY_TENANT = p.MultiPartitionDef({"day": DAYS, "tenant": TENANTS})
AWARE = dt.datetime(2026, 8, 8, tzinfo=dt.UTC)

ELSEWHERE = p.AssetRegistry()


@p.asset(registry=ELSEWHERE)
def registered_elsewhere():
    return 1


def _targets() -> p.AssetRegistry:
    """A fresh registry holding the assets events are published for."""
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def plain():
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def daily():
        return 1

    @p.asset(partition_def=HOURS, registry=registry)
    def hourly():
        return 1

    @p.asset(partition_def=TENANTS, registry=registry)
    def tenant_export():
        return 1

    @p.asset(partition_def=DAY_TENANT, registry=registry)
    def daily_tenant():
        return 1

    return registry


def _emit_from_body(
    sink: str | bool,
    call: Callable[[Callable[..., p.EmissionReceipt]], Any],
    *,
    via: str,
    partition_def: p.PartitionDef | None = None,
    keys: list[Any] | None = None,
) -> tuple[dict[str, Any], p.RunResult]:
    """Run a producer whose body calls ``call(emit)``; return what happened and the result."""
    registry = _targets()
    outcome: dict[str, Any] = {}

    @p.asset(partition_def=partition_def, registry=registry)
    def producer(context):
        emit = context.emit if via == "context" else p.emit
        try:
            outcome["receipt"] = call(emit)
        except p.EmissionError as error:
            outcome["error"] = error
        return "done"

    config = {"partition_keys": keys} if keys is not None else None
    result = p.Flow(["producer"], registry=registry, store=sink).run(config)
    assert result.status is p.RunStatus.SUCCESS
    return outcome, result


def _assert_rejected(outcome: dict[str, Any], rule: str, *hidden: str) -> str:
    assert "receipt" not in outcome, outcome
    error = outcome["error"]
    assert isinstance(error, p.EmissionError)
    message = str(error)
    assert rule in message, message
    for text in hidden:
        assert text not in message, message
    return message


VIA = pytest.mark.parametrize("via", ["context", "module"])


# -- bad input: each rejected with the rule named, nothing published -------------------------


BAD_INPUT = {
    "unknown asset": (lambda emit: emit("no_such_asset_qx"), "is not registered", ()),
    "asset of another registry": (lambda emit: emit("registered_elsewhere"), "is not registered", ()),
    "asset that is not a name": (lambda emit: emit(42), "asset must be an asset name", ()),
    "key for an unpartitioned asset": (
        lambda emit: emit("plain", partition_key=SECRET_TENANT),
        "is not partitioned",
        (SECRET_TENANT,),
    ),
    "no key for a partitioned asset": (lambda emit: emit("daily"), "pass partition_key explicitly", ()),
    "key unknown to a static definition": (
        lambda emit: emit("tenant_export", partition_key=SECRET_TENANT),
        "rejected by its definition",
        (SECRET_TENANT,),
    ),
    "non-canonical date key": (
        lambda emit: emit("daily", partition_key="2026-8-8-zq771"),
        "rejected by its definition",
        ("2026-8-8-zq771",),
    ),
    "datetime for a date key": (
        lambda emit: emit("daily", partition_key=dt.datetime(2026, 8, 8, 13, 37, 41)),
        "rejected by its definition",
        ("13:37:41", "13, 37, 41"),
    ),
    "naive datetime for an hourly key": (
        lambda emit: emit("hourly", partition_key=dt.datetime(2026, 8, 8, 13, 37, 41)),
        "rejected by its definition",
        ("13:37:41", "13, 37, 41"),
    ),
    "multi key with a rejected dimension": (
        lambda emit: emit("daily_tenant", partition_key=f"2026-08-08|{SECRET_TENANT}"),
        "rejected by its definition",
        (SECRET_TENANT,),
    ),
    "naive partition_date": (
        lambda emit: emit("daily", partition_key="2026-08-08", partition_date=dt.datetime(2026, 8, 8)),
        "timezone-aware",
        (),
    ),
    "date instead of a datetime as partition_date": (
        lambda emit: emit("daily", partition_key="2026-08-08", partition_date=dt.date(2026, 8, 8)),
        "timezone-aware datetime",
        (),
    ),
    "text as partition_date": (
        lambda emit: emit("daily", partition_key="2026-08-08", partition_date="2026-08-08T00:00:00+00:00"),
        "timezone-aware datetime",
        (),
    ),
    "partition_date without a key": (
        lambda emit: emit("plain", partition_date=AWARE),
        "partition_date requires a partition_key",
        (),
    ),
    "extra that is a list": (lambda emit: emit("plain", extra=[1, 2]), "extra must be a JSON object", ()),
    "extra that is JSON text": (lambda emit: emit("plain", extra='{"rows": 1}'), "extra must be a JSON object", ()),
    "extra holding NaN": (lambda emit: emit("plain", extra={"rows": float("nan")}), "not a finite number", ()),
    "extra holding infinity deep inside": (
        lambda emit: emit("plain", extra={"stats": {"max": [1.0, float("inf")]}}),
        "not a finite number",
        (),
    ),
    "extra with a non-string key": (lambda emit: emit("plain", extra={"nested": {1: "x"}}), "not strict JSON", ()),
    "extra holding a date": (lambda emit: emit("plain", extra={"at": dt.date(2026, 8, 8)}), "not strict JSON", ()),
    "oversized extra": (
        lambda emit: emit("plain", extra={"pad": "x" * MAX_EXTRA_BYTES}),
        f"the limit is {MAX_EXTRA_BYTES}",
        (),
    ),
    "empty dedupe_key": (lambda emit: emit("plain", dedupe_key=""), "dedupe_key must be", ()),
    "dedupe_key with a control character": (
        lambda emit: emit("plain", dedupe_key="batch\n41"),
        "dedupe_key must be",
        (),
    ),
    "overlong dedupe_key": (lambda emit: emit("plain", dedupe_key="d" * 257), "dedupe_key must be", ()),
    "dedupe_key that is not text": (lambda emit: emit("plain", dedupe_key=41), "dedupe_key must be", ()),
}


@VIA
@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_is_rejected_naming_the_rule_and_publishes_nothing(sink, via, case, published):
    call, rule, hidden = BAD_INPUT[case]

    outcome, result = _emit_from_body(sink, call, via=via)

    _assert_rejected(outcome, rule, *hidden)
    assert result.receipts == ()
    assert result.events == ()
    assert published(sink, result) == []


@VIA
def test_a_partitioned_producer_does_not_lend_its_own_key_to_the_event(sink, via, published):
    outcome, result = _emit_from_body(
        sink, lambda emit: emit("tenant_export"), via=via, partition_def=TENANTS, keys=["acme-private-7731"]
    )

    message = _assert_rejected(outcome, "never inherited", "acme-private-7731")
    assert "pass partition_key explicitly" in message
    assert published(sink, result) == []


@VIA
def test_a_producer_may_name_its_own_key_explicitly(sink, via, published):
    outcome, result = _emit_from_body(
        sink,
        lambda emit: emit("tenant_export", partition_key="acme-private-7731"),
        via=via,
        partition_def=TENANTS,
        keys=["acme-private-7731"],
    )

    assert "error" not in outcome
    (event,) = published(sink, result)
    assert (event.asset, event.partition_key) == ("tenant_export", "acme-private-7731")


@VIA
def test_a_dedupe_key_reused_for_another_payload_is_an_error_not_a_duplicate_receipt(sink, via, published):
    def twice(emit):
        first = emit("plain", extra={"rows": 1}, dedupe_key="batch-41")
        try:
            emit("plain", extra={"rows": 2}, dedupe_key="batch-41")
        except p.EmissionError as error:
            return first, error
        raise AssertionError("a reused dedupe key with another payload was accepted")

    outcome, result = _emit_from_body(sink, twice, via=via)

    first, error = outcome["receipt"]
    assert "dedupe_key was already used for a different event" in str(error)
    assert result.receipts == (first,)
    (event,) = published(sink, result)
    assert (event.id, event.extra) == (first.id, {"rows": 1})


@pytest.mark.parametrize(
    "second",
    [
        {"asset": "daily", "partition_key": "2026-08-09"},
        {"asset": "daily", "partition_key": "2026-08-08", "partition_date": AWARE},
        {"asset": "tenant_export", "partition_key": "acme-private-7731"},
    ],
    ids=["other key", "added date", "other asset"],
)
def test_every_part_of_the_payload_takes_part_in_the_conflict_check(sink, second, published):
    def both(emit):
        first = emit("daily", partition_key="2026-08-08", dedupe_key="shared")
        fields = dict(second)
        asset = fields.pop("asset")
        try:
            emit(asset, dedupe_key="shared", **fields)
        except p.EmissionError as error:
            return first, error
        raise AssertionError("a reused dedupe key with another payload was accepted")

    outcome, result = _emit_from_body(sink, both, via="context")

    _, error = outcome["receipt"]
    assert "dedupe_key was already used" in str(error)
    assert len(published(sink, result)) == 1


# -- accepted input: normalized by the target's definition -----------------------------------


@VIA
@pytest.mark.parametrize(
    ("asset_name", "key", "text"),
    [
        ("daily", "2026-08-08", "2026-08-08"),
        ("daily", dt.date(2026, 8, 8), "2026-08-08"),
        ("hourly", dt.datetime(2026, 8, 8, 7, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), "2026-08-08T05"),
        ("hourly", "2026-08-08T05", "2026-08-08T05"),
        ("tenant_export", "globex-private-8842", "globex-private-8842"),
        ("daily_tenant", "2026-08-08|acme-private-7731", "2026-08-08|acme-private-7731"),
        ("daily_tenant", {"day": dt.date(2026, 8, 8), "tenant": "acme-private-7731"}, "2026-08-08|acme-private-7731"),
    ],
    ids=[
        "date text",
        "date value",
        "aware datetime in another zone",
        "hour text",
        "static",
        "multi text",
        "multi mapping",
    ],
)
def test_keys_are_normalized_to_the_target_definitions_canonical_text(sink, via, asset_name, key, text, published):
    outcome, result = _emit_from_body(sink, lambda emit: emit(asset_name, partition_key=key), via=via)

    assert "error" not in outcome, outcome.get("error")
    (event,) = published(sink, result)
    assert (event.asset, event.partition_key) == (asset_name, text)
    assert event.id == outcome["receipt"].id


@VIA
def test_an_aware_partition_date_and_a_json_extra_are_kept(sink, via, published):
    paris = dt.datetime(2026, 10, 1, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    extra = {"rows": 100, "ratio": 0.5, "ok": True, "none": None, "tags": ["a", "b"], "nested": {"depth": 2}}

    outcome, result = _emit_from_body(
        sink, lambda emit: emit("daily", partition_key="2026-10-01", partition_date=paris, extra=extra), via=via
    )

    (event,) = published(sink, result)
    assert event.partition_date == paris
    assert event.partition_date.utcoffset() == dt.timedelta(hours=2)
    assert event.extra == extra


def test_an_asset_may_be_named_by_its_decorated_function(sink, published):
    registry = _targets()

    @p.asset(registry=registry)
    def announced():
        return 1

    @p.asset(registry=registry)
    def producer(context):
        return context.emit(announced).id

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    (event,) = published(sink, result)
    assert event.asset == "announced"
    assert result.tasks["producer"].attempts[0].output == event.id


def test_an_extra_exactly_at_the_size_limit_is_accepted_one_byte_more_is_not(sink, published):
    # {"pad":"…"} in compact JSON is the padding plus 10 bytes.
    at_limit = {"pad": "x" * (MAX_EXTRA_BYTES - 10)}
    over_limit = {"pad": "x" * (MAX_EXTRA_BYTES - 9)}

    def both(emit):
        receipt = emit("plain", extra=at_limit)
        try:
            emit("plain", extra=over_limit)
        except p.EmissionError as error:
            return receipt, error
        raise AssertionError("an extra over the limit was accepted")

    outcome, result = _emit_from_body(sink, both, via="context")

    receipt, error = outcome["receipt"]
    assert f"the limit is {MAX_EXTRA_BYTES}" in str(error)
    (event,) = published(sink, result)
    assert event.id == receipt.id and event.extra == at_limit


# -- callbacks follow the same rules -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["asset on_success", "flow on_complete"])
@pytest.mark.parametrize(
    "case", ["key for an unpartitioned asset", "no key for a partitioned asset", "naive partition_date"]
)
def test_callbacks_follow_the_same_rules(sink, kind, case, published):
    call, rule, hidden = BAD_INPUT[case]
    registry = _targets()
    outcome: dict[str, Any] = {}

    def callback(context: p.CallbackContext) -> None:
        try:
            outcome["receipt"] = call(context.emit)
        except p.EmissionError as error:
            outcome["error"] = error

    asset_callback = callback if kind == "asset on_success" else None
    flow_callback = callback if kind == "flow on_complete" else None

    @p.asset(registry=registry, on_success=asset_callback)
    def producer():
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink, on_complete=flow_callback).run()

    assert result.status is p.RunStatus.SUCCESS
    assert result.callback_errors == ()
    _assert_rejected(outcome, rule, *hidden)
    assert published(sink, result) == []


# -- no running producer, no emission -------------------------------------------------------------


def test_module_level_emit_outside_any_run_is_rejected():
    with pytest.raises(p.EmissionError, match="only while an asset body or a callback runs"):
        p.emit("plain")


def test_emission_at_import_time_is_rejected(tmp_path: Path):
    module_path = tmp_path / "announces_on_import.py"
    module_path.write_text(
        "import partita\n"
        "registry = partita.AssetRegistry()\n"
        "@partita.asset(registry=registry)\n"
        "def ready():\n"
        "    return 1\n"
        "partita.emit('ready', extra={'at': 'import'})\n"
    )
    spec = importlib.util.spec_from_file_location("announces_on_import_qz", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)

    with pytest.raises(p.EmissionError, match="import and definition time cannot publish"):
        spec.loader.exec_module(module)
    sys.modules.pop("announces_on_import_qz", None)


def test_module_level_emit_after_the_run_has_finished_is_rejected(sink):
    outcome, _ = _emit_from_body(sink, lambda emit: emit("plain"), via="module")
    assert "receipt" in outcome

    with pytest.raises(p.EmissionError, match="only while"):
        p.emit("plain")


def test_a_thread_started_by_the_body_uses_context_emit_not_the_module_function(sink, published):
    registry = _targets()
    seen: dict[str, Any] = {}

    @p.asset(registry=registry)
    def producer(context):
        def work() -> None:
            try:
                p.emit("plain", extra={"via": "module"})
            except p.EmissionError as error:
                seen["module"] = error
            seen["context"] = context.emit("plain", extra={"via": "context"})

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink).run()

    assert "call context.emit" in str(seen["module"])
    (event,) = published(sink, result)
    assert event.id == seen["context"].id and event.extra == {"via": "context"}


@pytest.mark.parametrize("context_type", ["AssetContext", "CallbackContext"])
def test_a_context_built_by_hand_cannot_publish(context_type):
    import logging

    if context_type == "AssetContext":
        context = p.AssetContext("plain", "run-1", None, False, 1, logging.getLogger("test"))
    else:
        context = p.CallbackContext("run-1", None, None, False)

    with pytest.raises(p.EmissionError, match="not created by a running flow"):
        context.emit("plain")


def test_a_context_kept_after_its_run_has_finished_cannot_publish(sink):
    registry = _targets()
    kept: list[p.AssetContext] = []

    @p.asset(registry=registry)
    def producer(context):
        kept.append(context)
        return 1

    result = p.Flow(["producer"], registry=registry, store=sink).run()
    assert result.status is p.RunStatus.SUCCESS

    with pytest.raises(p.EmissionError):
        kept[0].emit("plain", extra={"late": True})
