"""Shared isolation for the asset-event tests (SPEC §8).

Every test works in its own ``tmp_path`` and ignores ``$PARTITA_STORE``:
a flow without ``store=`` must not record into a store chosen by the
environment, and the CLI's default store lands in the test's folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest


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
