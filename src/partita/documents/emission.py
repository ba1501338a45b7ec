"""The ``partita.emission`` document: the receipt of one published event (``events emit --json``, the UI)."""

from __future__ import annotations

from typing import Any

from partita.events.model import EmissionReceipt

__all__ = ["emission_body"]


def emission_body(receipt: EmissionReceipt) -> dict[str, Any]:
    """The receipt: the event's id, when it was stored, and whether it was a duplicate of an earlier one."""
    return {"receipt": {"id": receipt.id, "timestamp": receipt.timestamp.isoformat(), "duplicate": receipt.duplicate}}
