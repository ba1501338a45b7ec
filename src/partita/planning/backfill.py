"""What a backfill plan was selected from: plain values a `FlowPlan` carries to the run it launches.

A backfill plan is an ordinary plan whose keys a store query chose (the keys
that lack a success event, or the keys a run failed). The plan keeps why, so
that the run it launches is recorded as a backfill with tags naming the
source, and so that the plan can say how many keys it considered.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from partita.definitions.launch import Tags

__all__ = ["BACKFILL_TAG", "FAILED_FROM_TAG", "BackfillKind", "BackfillOrigin"]

#: Tag recorded on every backfill run: its kind (``missing`` or ``failed-from``).
BACKFILL_TAG = "partita.backfill"
#: Tag recorded on a ``failed-from`` backfill run: the full id of the run whose keys it reruns.
FAILED_FROM_TAG = "partita.failed_from"


class BackfillKind(enum.Enum):
    """How a backfill chose its keys."""

    MISSING = "missing"
    FAILED_FROM = "failed-from"


@dataclass(frozen=True, slots=True)
class BackfillOrigin:
    """Why a plan selects its keys, in counts (never the keys).

    ``considered`` is how many keys the bounded selection held (``MISSING``)
    or how many failed and dependency-skipped attempts the source run had
    (``FAILED_FROM``); ``selected`` is how many keys the plan runs.
    ``empty`` is true when the plan has nothing to do: the CLI then starts no
    run, and a program should not run it either.
    """

    kind: BackfillKind
    targets: tuple[str, ...]
    considered: int
    selected: int
    empty: bool
    source_run_id: str | None = None

    @property
    def tags(self) -> Tags:
        """The tags the launched run carries, so `runs list --tag` finds backfills and their source."""
        pairs = [(BACKFILL_TAG, self.kind.value)]
        if self.source_run_id is not None:
            pairs.append((FAILED_FROM_TAG, self.source_run_id))
        return tuple(sorted(pairs))

    def describe(self) -> str:
        """One line for people: what was compared and what is selected."""
        targets = ", ".join(self.targets)
        if self.kind is BackfillKind.MISSING:
            lead = (
                f"backfill of missing keys: {self.selected} of {self.considered} selected keys "
                f"lack a success of {targets}"
            )
        else:
            lead = (
                f"backfill of run {self.source_run_id}: "
                f"{_count(self.considered, 'failed or dependency-skipped attempt')} upstream of or at {targets}, "
                f"{_count(self.selected, 'key')} to rerun"
            )
        return lead + ("; nothing to run" if self.empty else "")

    def to_dict(self) -> dict[str, Any]:
        """The plan document's ``backfill`` entry: counts and the source run, no keys."""
        return {
            "kind": self.kind.value,
            "targets": list(self.targets),
            "considered": self.considered,
            "selected": self.selected,
            "empty": self.empty,
            "source_run_id": self.source_run_id,
        }


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
