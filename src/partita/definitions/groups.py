"""`PartitionGroup`: a declared linear chain whose keys progress together.

Declaration checks shapes and types only; whether the chain is linear and
wholly planned is a planning rule (see ``partita.planning.groups``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partita.definitions.assets import asset_name_of
from partita.errors import DefinitionError

__all__ = ["PartitionGroup"]


@dataclass(frozen=True, slots=True, init=False)
class PartitionGroup:
    """Ordered assets of one partitioned chain and how many keys may be active.

    With ``max_active_keys=1`` the first selected key passes every member
    before the next key is admitted.
    """

    assets: tuple[str, ...]
    max_active_keys: int

    def __init__(self, assets: Sequence[Any], max_active_keys: int = 1) -> None:
        if isinstance(assets, (str, bytes)) or not isinstance(assets, Sequence):
            raise DefinitionError("PartitionGroup assets must be an ordered list of asset names or @asset functions")
        names = tuple(asset_name_of(item, field_name="PartitionGroup assets") for item in assets)
        if not names:
            raise DefinitionError("PartitionGroup assets must name at least one asset")
        if len(set(names)) != len(names):
            raise DefinitionError("PartitionGroup assets must not repeat an asset")
        if isinstance(max_active_keys, bool) or not isinstance(max_active_keys, int):
            raise DefinitionError("PartitionGroup max_active_keys must be a positive integer")
        if max_active_keys < 1:
            raise DefinitionError("PartitionGroup max_active_keys must be at least 1")
        object.__setattr__(self, "assets", names)
        object.__setattr__(self, "max_active_keys", max_active_keys)
