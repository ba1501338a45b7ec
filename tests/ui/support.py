"""What UI tests share besides fixtures: the entry, the token, settings and auth headers."""

from __future__ import annotations

from pathlib import Path

from partita.ui import UiSettings

ENTRY = str(Path(__file__).with_name("ui_entry.py"))
TOKEN = "test-token-0123456789abcdef"


def make_settings(store_url: str, **overrides: object) -> UiSettings:
    fields: dict[str, object] = {"entry": ENTRY, "store_url": store_url, "token": TOKEN, **overrides}
    return UiSettings(**fields)  # type: ignore[arg-type]


def auth() -> dict[str, str]:
    """The bearer header every API mutation needs."""
    return {"Authorization": f"Bearer {TOKEN}"}
