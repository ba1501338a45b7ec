"""The ``partita.run-cancel`` document, and when a cancel request is refused: ``runs cancel`` and the UI agree.

A request is refused when the run already finished, or when its owner is
gone (``interrupted``): nothing is left that could act on it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from partita.store.protocol import CancelOutcome, CancelRequest

__all__ = ["cancel_body", "cancel_refusal", "iso_time"]


def iso_time(moment: float | None) -> str | None:
    """A POSIX time as ISO 8601 UTC text (None stays None)."""
    return None if moment is None else dt.datetime.fromtimestamp(moment, dt.UTC).isoformat()


def cancel_refusal(request: CancelRequest) -> str | None:
    """Why nothing can cancel the run (the sentence ``runs cancel`` prints before exiting 2), or None."""
    run = f"run {request.run_id}"
    if request.outcome is CancelOutcome.FINISHED:
        return f"{run} already finished ({request.status}); there is nothing to cancel"
    if request.status == "interrupted":
        return f"{run} is not running (interrupted): the process that ran it is gone, so nothing can cancel it"
    return None


def cancel_body(store_url: str, request: CancelRequest, wait: bool, timeout: float) -> dict[str, Any]:
    """The ``partita.run-cancel`` body: the request's outcome, when it was made, the run's status."""
    return {
        "store": store_url,
        "run_id": request.run_id,
        "outcome": request.outcome.value,
        "requested_at": iso_time(request.requested_at),
        "status": request.status,
        "wait": {"timeout_seconds": timeout, "timed_out": request.status == "running"} if wait else None,
    }
