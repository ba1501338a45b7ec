"""Shared isolation for the asset-event tests (SPEC §8).

Every test works in its own ``tmp_path`` and ignores ``$PARTITA_STORE``:
a flow without ``store=`` must not record into a store chosen by the
environment, and the CLI's default store lands in the test's folder.
``published`` reads back what a run's bodies and callbacks published,
from wherever the ``sink`` kept it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import partita as p


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> str | bool:
    """Where a flow's emissions go: ``False`` (memory, no store) or a store URL of each backend."""
    if request.param == "memory":
        return False
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/events.db"
    return str(request.getfixturevalue("postgres_url"))


def _published(sink: str | bool, result: p.RunResult | None = None) -> list[p.AssetEvent]:
    if sink is False:
        assert result is not None
        return sorted(result.events, key=lambda event: event.id)
    store = p.open_store(sink)
    try:
        return [e for e in store.list_events() if e.source.kind is not p.SourceKind.OUTLET]
    finally:
        store.close()


@pytest.fixture
def published() -> Callable[..., list[p.AssetEvent]]:
    """``published(sink, result=None)``: events published by bodies and callbacks (outlets excluded), in id order.

    With no store (``sink is False``) they come from the run's result; otherwise from the store.
    """
    return _published
