"""Shared isolation for the runtime-domain tests (SPEC §9).

Flows without ``store=`` must not record into a store named by the
environment: every test runs without ``$PARTITA_STORE`` unless it sets it.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_ambient_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
