"""The ``partita.attempts`` document: a page of one run's attempts, each as the run record describes it.

Each entry is the asset and the attempt exactly as ``partita.run`` (record
version 4) shows it, so one schema describes both; the key text appears
only when the run recorded keys. ``next`` continues the listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partita.errors import ConfigurationError
from partita.results.record import AttemptRecord, attempt_document
from partita.store.protocol import StoredRun

__all__ = ["RECORD_VERSION", "attempt_cursor", "attempts_body", "parse_attempt_cursor"]

#: The run record version whose attempt entries this document embeds.
RECORD_VERSION = 4


def attempt_cursor(record: AttemptRecord) -> str:
    """Where a page ends: ``ASSET:INDEX`` of its last attempt."""
    return f"{record.asset}:{record.index}"


def parse_attempt_cursor(text: str, field: str = "after") -> tuple[str, int]:
    """``ASSET:INDEX`` back to (asset, index); ConfigurationError naming ``field`` when it is not one."""
    asset, separator, index = text.rpartition(":")
    if not separator or not asset or not index.isdigit() or not index.isascii():
        raise ConfigurationError(f"{field} must be ASSET:INDEX, the next cursor of an earlier page")
    return asset, int(index)


def attempts_body(run: StoredRun, page: Sequence[AttemptRecord], limit: int) -> dict[str, Any]:
    """The body for one page (at most ``limit`` attempts): ``next`` is null when the page is not full."""
    with_keys = run.record_partition_keys
    return {
        "run_id": run.run_id,
        "partition_keys_recorded": with_keys,
        "attempts": [
            {"asset": record.asset, "attempt": attempt_document(record, RECORD_VERSION, with_keys)} for record in page
        ],
        "next": attempt_cursor(page[-1]) if len(page) == limit and page else None,
    }
