"""Text no store can keep is refused before anything is stored, on every backend (SPEC §1.4, §8).

PostgreSQL text cannot hold NUL and no UTF-8 encoder accepts a lone
surrogate (what undecodable command-line bytes become). Both are rejected
on SQLite too, so the backends accept the same input; before this, the
driver error escaped mid-run and left the run ``running``.
"""

from __future__ import annotations

from typing import Any

import pytest

import partita
from partita.errors import EmissionError, SelectionError
from partita.events.emission import MAX_EXTRA_DEPTH
from partita.events.external import publish_event
from partita.store import open_store

MARKER = "QQSECRET"
UNSTORABLE_KEYS = [pytest.param(f"{MARKER}\x00", id="nul"), pytest.param(f"\udcff{MARKER}", id="lone-surrogate")]


class IdentityDef(partita.PartitionDef):
    """Accepts any key, as a custom definition does by default."""

    @property
    def domain(self) -> str:
        return "identity"


def _registry() -> tuple[partita.AssetRegistry, list[Any]]:
    registry = partita.AssetRegistry()
    ran: list[Any] = []

    @partita.asset(partition_def=IdentityDef(), registry=registry)
    def tenant(context: partita.AssetContext) -> int:
        ran.append(context.partition_key)
        return 1

    @partita.asset(registry=registry)
    def plain() -> int:
        return 1

    return registry, ran


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("key", UNSTORABLE_KEYS)
def test_an_unstorable_key_is_rejected_before_a_run_starts(store_url: str, key: str):
    registry, ran = _registry()
    flow = partita.Flow(["tenant"], registry=registry, store=store_url)

    with pytest.raises(SelectionError, match=r"partition_keys\[1\]") as caught:
        flow.run({"partition_keys": ["fine", key]})

    assert MARKER not in str(caught.value)
    assert ran == []
    store = open_store(store_url)
    try:
        assert store.list_runs() == []
    finally:
        store.close()


@pytest.mark.parametrize("key", UNSTORABLE_KEYS)
def test_publish_event_rejects_an_unstorable_key_and_stores_nothing(store, key: str):
    registry, _ = _registry()

    with pytest.raises(EmissionError, match="partition_key") as caught:
        publish_event(store, registry, "tenant", partition_key=key, dedupe_key="d-1")

    assert MARKER not in str(caught.value)
    assert store.list_events() == []


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"note": "a\x00b"}, id="nul-value"),
        pytest.param({"a\x00": 1}, id="nul-key"),
        pytest.param({"note": ["\ud800"]}, id="lone-surrogate"),
        pytest.param(_nested(MAX_EXTRA_DEPTH + 1), id="too-deep"),
        pytest.param(_nested(5000), id="far-too-deep"),
    ],
)
def test_publish_event_rejects_an_unstorable_extra_and_stores_nothing(store, extra: dict[str, Any]):
    registry, _ = _registry()

    with pytest.raises(EmissionError, match="extra"):
        publish_event(store, registry, "plain", extra=extra, dedupe_key="d-1")

    assert store.list_events() == []


def test_an_extra_exactly_at_the_depth_limit_is_stored(store):
    registry, _ = _registry()
    extra = _nested(MAX_EXTRA_DEPTH)

    receipt = publish_event(store, registry, "plain", extra=extra, dedupe_key="d-1")

    assert [event.id for event in store.list_events()] == [receipt.id]
    assert store.list_events()[0].extra == extra


def test_a_body_emitting_a_far_too_deep_extra_fails_its_attempt_with_an_emission_error(store_url: str):
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def target() -> int:
        return 1

    @partita.asset(registry=registry)
    def producer(context: partita.AssetContext) -> int:
        context.emit("target", extra=_nested(5000))
        return 1

    result = partita.Flow(["producer"], registry=registry, store=store_url).run()

    (attempt,) = result.tasks["producer"].attempts
    assert attempt.status is partita.AttemptStatus.FAILED
    assert isinstance(attempt.exception, EmissionError)
    assert f"deeper than {MAX_EXTRA_DEPTH}" in str(attempt.exception)


def test_a_failure_message_holding_nul_and_lone_surrogates_is_recorded_and_the_run_ends(store_url: str):
    registry = partita.AssetRegistry()

    @partita.asset(registry=registry)
    def body() -> int:
        raise ValueError("bad \x00 and \udcff text")

    result = partita.Flow(["body"], registry=registry, store=store_url).run()

    assert result.status is partita.RunStatus.FAILED
    store = open_store(store_url)
    try:
        (run,) = store.list_runs()
        assert run.status == "failed"
        (task,) = store.get_tasks(run.run_id)
        failure = task.attempts[0].failure
        assert failure is not None
        assert failure.message == "bad \\x00 and \\udcff text"
    finally:
        store.close()


def test_a_product_with_a_custom_dimension_checks_the_key_text_too():
    registry = partita.AssetRegistry()

    @partita.asset(
        partition_def=partita.MultiPartitionDef({"tenant": IdentityDef(), "region": partita.StaticPartitionDef("r", ["eu"])}),
        registry=registry,
    )
    def product(context: partita.AssetContext) -> int:
        return 1

    with pytest.raises(SelectionError, match="NUL") as caught:
        partita.Flow(["product"], registry=registry).plan({"partition_keys": [f"{MARKER}\x00|eu"]})
    assert MARKER not in str(caught.value)
