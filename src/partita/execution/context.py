"""`AssetContext`: what a running body can know about its attempt."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AssetContext"]


@dataclass(frozen=True, slots=True)
class AssetContext:
    """Passed to a body that declares a ``context`` parameter.

    ``partition_key`` is the normalized key object (``None`` with
    ``partition_key_present=False`` for an unpartitioned asset; a present key
    may itself be falsey, such as ``0`` or ``""``).
    """

    asset_name: str
    run_id: str
    partition_key: Any
    partition_key_present: bool
    invocation_number: int
    logger: logging.Logger = field(repr=False)
