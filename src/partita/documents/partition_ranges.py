"""The ``partita.partition-ranges`` document: a window of one asset's keys as ranges of equal state.

What the asset page's grid draws for a large window, for HTTP clients: a
window of up to 100,000 keys answers in as many ranges as its states change,
where the per-key ``partition-status`` document lists every key. Ranges are
listed in key order up to a limit; ``next`` is the first key of the first
range left out, so a client continues with ``start=next``.
"""

from __future__ import annotations

from typing import Any

from partita.operations.status import PartitionStates
from partita.operations.status_layout import state_ranges

__all__ = ["partition_ranges_body"]


def partition_ranges_body(status: PartitionStates, store_url: str, limit: int) -> dict[str, Any]:
    """The document's body for ``status``, listing at most ``limit`` ranges."""
    keys, states = status.scope.keys, status.states
    runs = state_ranges(states)
    listed = runs[:limit]
    left_out = runs[limit:]
    ranged = status.definition is not None and status.definition.supports_range
    return {
        "store": store_url,
        "asset": status.asset,
        "partition": None if status.definition is None else status.definition.describe(),
        "scope": status.scope.to_dict(),
        "total": len(keys),
        "counts": {state.value: count for state, count in status.counts.items()},
        "ranges": [
            {"first": keys[start], "last": keys[start + count - 1], "state": states[start].value, "count": count}
            for start, count in listed
        ],
        "more_ranges": len(left_out),
        "next": keys[left_out[0][0]] if left_out and ranged else None,
    }
