"""Which asset a page is about, and the window of its keys the grid shows.

The window is two keys in the definition's canonical text (``start`` and
``end``, inclusive), checked before any key is expanded: each must parse,
start must not be later than end, and the window may hold at most
`MAX_GRID_KEYS` keys. Without a window the grid covers what ``partita
status`` covers by default (a recent window of time, the declared keys, a
runtime domain's known keys). A window refused is a `SelectionError` (the
key page's key, a `ConfigurationError`) whose message names the field and
the rule, never the rejected text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import HTTPException

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.errors import ConfigurationError, SelectionError
from partita.flow import Flow
from partita.operations.scope import range_size
from partita.operations.status import PartitionStates, asset_states
from partita.partitions.base import PartitionDef
from partita.ui.context import UiContext

__all__ = [
    "MAX_GRID_KEYS", "AssetRef", "Window", "bounds", "canonical_key", "entry_flows", "find_asset", "parse_window", "window_status",
]

#: The most keys one grid reads: 100,000 keys are aggregated into ranges; more is refused.
MAX_GRID_KEYS = 100_000


@dataclass(frozen=True, slots=True)
class AssetRef:
    """An asset of the entry and the flow whose closure holds it (the one its status is read through)."""

    flow: Flow
    definition: AssetDefinition

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True, slots=True)
class Window:
    """The keys a grid shows: ``start`` .. ``end`` in canonical text, or the default (both None)."""

    start: str | None = None
    end: str | None = None

    @property
    def given(self) -> bool:
        return self.start is not None


def entry_flows(context: UiContext) -> list[Flow]:
    """The entry's flow, then its triggered flows (each name once)."""
    flows: dict[str, Flow] = {context.flow.name: context.flow}
    for flow in context.trigger_flows:
        flows.setdefault(flow.name, flow)
    return list(flows.values())


def find_asset(context: UiContext, name: str) -> AssetRef:
    """The asset ``name`` of the entry's flows; a 404 when none has it."""
    for flow in entry_flows(context):
        for definition in flow.closure():
            if definition.name == name:
                return AssetRef(flow, definition)
    raise HTTPException(status_code=404, detail="no asset of this entry's flows has that name; the assets page lists them")


def _parse(definition: PartitionDef, text: str, field: str, error: type[ConfigurationError] = SelectionError) -> object:
    try:
        key = definition.parse_key(text)
    except ValueError as exc:
        raise error(f"{field}: {exc}") from None
    return key


def parse_window(definition: PartitionDef | None, start: str | None, end: str | None) -> Window:
    """The window ``start`` .. ``end`` after the checks above; empty text counts as not given."""
    start, end = start or None, end or None
    if start is None and end is None:
        return Window()
    if definition is None:
        raise SelectionError("start and end: the asset is not partitioned, so it has no window; leave them out")
    if not definition.supports_range:
        raise SelectionError(
            f"start and end: a {definition.kind} definition has no ranges of keys; leave them out to see every key"
        )
    if start is None or end is None:
        raise SelectionError(f"{'start' if start is None else 'end'}: a window needs both start and end")
    first, last = _parse(definition, start, "start"), _parse(definition, end, "end")
    if definition.format_key(first) != start:
        raise SelectionError(f"start: not in the definition's canonical form {definition.key_format}")
    if definition.format_key(last) != end:
        raise SelectionError(f"end: not in the definition's canonical form {definition.key_format}")
    if first > last:  # type: ignore[operator]
        raise SelectionError("start: the window's start is later than its end")
    size = range_size(definition, first, last)
    if size is not None and size > MAX_GRID_KEYS:
        raise SelectionError(
            f"start and end: the window holds {size:,} keys; the grid reads at most {MAX_GRID_KEYS:,}: narrow it"
        )
    return Window(start, end)


def canonical_key(definition: PartitionDef, key: str) -> str:
    """``key`` when it is the canonical text of one of the definition's keys; a 400 naming the rule otherwise."""
    parsed = _parse(definition, key, "partition key", ConfigurationError)
    if definition.format_key(parsed) != key:
        raise ConfigurationError(
            f"partition key: not in the definition's canonical form {definition.key_format}"
        )
    return key


def window_status(context: UiContext, asset: AssetRef, window: Window) -> PartitionStates:
    """The state of each of the window's keys, read and decided as ``partita status`` does (only those keys' rows)."""
    config = RunConfig.coerce({"partition_range": (window.start, window.end)} if window.given else None)
    closure = {definition.name: definition for definition in asset.flow.closure()}
    status = asset_states(asset.definition, closure, config, context.store, dt.datetime.now(dt.UTC))
    if len(status.states) > MAX_GRID_KEYS:  # a default scope (a large runtime registry) is bounded too
        raise SelectionError(
            f"start and end: the asset has {len(status.states):,} keys; the grid reads at most {MAX_GRID_KEYS:,}: "
            "pick a window"
        )
    return status


def bounds(keys: Sequence[str | None]) -> tuple[str | None, str | None]:
    """The first and last key of a window (None for an empty or unpartitioned one)."""
    if not keys or keys[0] is None:
        return None, None
    return keys[0], keys[-1]
