"""Contexts handed to user code: `AssetContext` for bodies, `CallbackContext` for callbacks."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
