"""Contexts handed to user code: `AssetContext` for bodies, `CallbackContext` for callbacks."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from partita.errors import EmissionError

if TYPE_CHECKING:
    from partita.events.emission import Emitter
    from partita.events.model import EmissionReceipt
    from partita.results.model import RunResult

__all__ = ["AssetContext", "CallbackContext"]


@dataclass(frozen=True, slots=True)
class AssetContext:
    """Passed to a body that declares a ``context`` parameter.

    ``partition_key`` is the normalized key object (``None`` with
    ``partition_key_present=False`` for an unpartitioned asset; a present key
    may itself be falsey, such as ``0`` or ``""``). ``invocation_number``
    starts at 1 and grows with each retry of the same attempt.
    """

    asset_name: str
    run_id: str
    partition_key: Any
    partition_key_present: bool
    invocation_number: int
    logger: logging.Logger = field(repr=False)
    emitter: Emitter | None = field(default=None, repr=False, compare=False)

    def emit(
        self,
        asset: Any,
        *,
        partition_key: Any = None,
        partition_date: Any = None,
        extra: Any = None,
        dedupe_key: str | None = None,
    ) -> EmissionReceipt:
        """Publish an asset event now; returns once it is stored (see `partita.emit`).

        Partition arguments are explicit: the event's key is never taken
        from this attempt's own key.
        """
        return _emitter_of(self).emit(
            asset, partition_key=partition_key, partition_date=partition_date, extra=extra, dedupe_key=dedupe_key
        )


@dataclass(frozen=True, slots=True)
class CallbackContext:
    """The one argument of every lifecycle callback.

    Asset callbacks see their attempt (``asset_name``, ``partition_key``,
    ``exception`` for failures and retries); flow callbacks see
    ``asset_name=None`` and the run's ``result``. New fields may be added;
    read them by name.
    """

    run_id: str
    asset_name: str | None
    partition_key: Any
    partition_key_present: bool
    exception: BaseException | None = None
    result: RunResult | None = None
    invocation_number: int | None = None
    emitter: Emitter | None = field(default=None, repr=False, compare=False)

    def emit(
        self,
        asset: Any,
        *,
        partition_key: Any = None,
        partition_date: Any = None,
        extra: Any = None,
        dedupe_key: str | None = None,
    ) -> EmissionReceipt:
        """Publish an asset event from this callback (flow callbacks carry no attempt fields)."""
        return _emitter_of(self).emit(
            asset, partition_key=partition_key, partition_date=partition_date, extra=extra, dedupe_key=dedupe_key
        )


def _emitter_of(context: AssetContext | CallbackContext) -> Emitter:
    if context.emitter is None:
        raise EmissionError("this context was not created by a running flow; it cannot publish events")
    return context.emitter
