"""What every request of one UI server shares: its settings, the entry's flows, and one open store.

The entry is loaded once at start (loading runs the user's Python); the
store is opened once and shared by every request thread (SQLAlchemy's pool
hands each its own connection).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from partita.entry import load_entry, load_trigger_flows
from partita.errors import EntryLoadError
from partita.flow import Flow
from partita.store import SqlStore, open_store
from partita.ui.settings import UiSettings

__all__ = ["UiContext", "ui_context"]


@dataclass
class UiContext:
    settings: UiSettings
    store: SqlStore
    #: The entry's flow (assets, plans, launches).
    flow: Flow
    #: The entry's flows with a trigger (the triggers page), possibly none.
    trigger_flows: list[Flow] = field(default_factory=list)

    @classmethod
    def load(cls, settings: UiSettings) -> UiContext:
        flow = load_entry(settings.entry)
        try:
            triggered = load_trigger_flows(settings.entry)
        except EntryLoadError:
            triggered = []  # an entry without triggers is fine; its triggers page says so
        return cls(settings, open_store(settings.store_url), flow, triggered)

    def close(self) -> None:
        self.store.close()


def ui_context(request: Request) -> UiContext:
    """The server's shared context (a FastAPI dependency)."""
    context: UiContext = request.app.state.context
    return context
