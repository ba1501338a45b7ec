"""``/api/v1/assets``: the catalog (``partita.assets``), one asset, its partition status, a runtime domain's keys.

Partition status reads a bounded window: ``start`` and ``end`` are canonical
key text of the asset's definition, both or neither (then the window is the
CLI's default: 30 days, 7 days of hours, 24 months, the declared or known
keys). Key by key (``/status``, the CLI's document) a window holds at most
`MAX_API_STATUS_KEYS` keys; as ranges of equal state (``/status/ranges``) it
holds as many as the asset page's grid, `MAX_GRID_KEYS`. A larger window is
refused before it is expanded.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from starlette.responses import JSONResponse

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.documents.assets import asset_body, assets_body
from partita.documents.partition_ranges import partition_ranges_body
from partita.documents.partitions import known_keys_body
from partita.errors import SelectionError
from partita.operations.scope import range_size
from partita.operations.status import asset_status
from partita.partitions.runtime import PartitionAtRuntime
from partita.planning.selection import KeySource, SelectionFields
from partita.ui.api import PREFIX
from partita.ui.api.params import Storable
from partita.ui.api.responses import document_response
from partita.ui.asset_window import MAX_GRID_KEYS, AssetRef, parse_window, window_status
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader

router = APIRouter(prefix=PREFIX, tags=["assets"], dependencies=[Depends(require_reader)])

#: The most keys one status request lists key by key: within the 300 ms budget over a store of
#: 1,000,000 events even on a loaded machine (benchmarks/ui.py: 41-67 ms at rest, up to 305 ms
#: under a load of 7 on two cores). Larger windows are read as ranges, as the asset page does.
MAX_API_STATUS_KEYS = 5_000
#: The most ranges one ranges request lists.
MAX_STATUS_RANGES = 10_000
#: The most known keys of a runtime domain one request returns.
MAX_PARTITIONS = 5_000
#: How the status parameters are named in messages.
API_SELECTION_FIELDS = SelectionFields(keys="partition_key", range="start/end", empty="empty", one_key="partition_key")

AssetName = Annotated[Storable, Path(max_length=200, description="The asset's name, as `partita assets` lists it.")]
KeyText = Annotated[Storable | None, Query(max_length=200)]
WindowStart = Annotated[KeyText, Query(description="The window's first key (canonical text); needs end.")]
WindowEnd = Annotated[KeyText, Query(description="The window's last key (canonical text); needs start.")]


def _definition(context: UiContext, name: str) -> tuple[AssetDefinition, dict[str, AssetDefinition]]:
    closure = {definition.name: definition for definition in context.flow.closure()}
    definition = closure.get(name)
    if definition is None:
        raise HTTPException(
            status_code=404, detail="no asset of that name in the entry's flow; GET /api/v1/assets lists them"
        )
    return definition, closure


@router.get("/assets", summary="The entry's assets, their partition definitions and dependencies (partita.assets)")
def list_assets(context: Annotated[UiContext, Depends(ui_context)]) -> JSONResponse:
    return document_response("assets", assets_body(context.flow))


@router.get("/assets/{name}", summary="One asset: its definition, dependencies and dependents (partita.asset)")
def show_asset(name: AssetName, context: Annotated[UiContext, Depends(ui_context)]) -> JSONResponse:
    definition, _ = _definition(context, name)
    return document_response("asset", asset_body(context.flow, definition))


def _check_window(definition: AssetDefinition, start: str, end: str) -> None:
    """Refuse a window of more than `MAX_API_STATUS_KEYS` keys before it is expanded (malformed bounds pass on)."""
    partition_def = definition.partition_def
    if partition_def is None or not partition_def.supports_range:
        return  # the selection names the rule
    try:
        size = range_size(partition_def, partition_def.parse_key(start), partition_def.parse_key(end))
    except (ValueError, TypeError, OverflowError):
        return  # the selection diagnoses the bounds, naming the parameter
    if size is not None and size > MAX_API_STATUS_KEYS:
        raise SelectionError(
            f"start/end selects {size:,} keys; one status request lists at most {MAX_API_STATUS_KEYS:,} key by key: "
            f"narrow the window, or read up to {MAX_GRID_KEYS:,} keys as ranges from /status/ranges"
        )


@router.get(
    "/assets/{name}/status",
    summary="Each key of one asset in a window: materialized, failed, running or missing (partita.partition-status)",
)
def asset_status_document(
    name: AssetName,
    context: Annotated[UiContext, Depends(ui_context)],
    start: WindowStart = None,
    end: WindowEnd = None,
) -> JSONResponse:
    definition, closure = _definition(context, name)
    if (start is None) != (end is None):
        missing = "end" if end is None else "start"
        raise SelectionError(f"start and end go together: give {missing} too, or neither for the default window")
    config = RunConfig()
    if start is not None and end is not None:
        _check_window(definition, start, end)
        config = RunConfig.coerce({"partition_range": (start, end)})
    now = dt.datetime.now(dt.UTC)
    status = asset_status(
        definition, closure, config, context.store, now, source=KeySource.TEXT, fields=API_SELECTION_FIELDS
    )
    if len(status.keys) > MAX_API_STATUS_KEYS:
        raise SelectionError(
            f"asset {name!r} has {len(status.keys):,} keys in its default scope; one status request covers at most "
            f"{MAX_API_STATUS_KEYS:,}: give start and end"
        )
    body = {"store": context.store.url, "store_exists": True, "assets": [status.to_dict()], "left_out": []}
    return document_response("partition-status", body)


@router.get(
    "/assets/{name}/status/ranges",
    summary="A window of up to 100,000 keys of one asset as ranges of equal state (partita.partition-ranges)",
)
def asset_status_ranges(
    name: AssetName,
    context: Annotated[UiContext, Depends(ui_context)],
    start: WindowStart = None,
    end: WindowEnd = None,
    limit: Annotated[int, Query(ge=1, le=MAX_STATUS_RANGES, description="At most this many ranges.")] = 1000,
) -> JSONResponse:
    definition, _ = _definition(context, name)
    asset = AssetRef(context.flow, definition)
    status = window_status(context, asset, parse_window(definition.partition_def, start, end))
    return document_response("partition-ranges", partition_ranges_body(status, context.store.url, limit))


@router.get(
    "/assets/{name}/partitions",
    summary="The known keys of a runtime-partitioned asset's domain, in first-seen order (partita.partitions)",
)
def asset_partitions(
    name: AssetName,
    context: Annotated[UiContext, Depends(ui_context)],
    limit: Annotated[int, Query(ge=1, le=MAX_PARTITIONS, description="At most this many keys.")] = 1000,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="Skip this many keys first.")] = 0,
) -> JSONResponse:
    definition, _ = _definition(context, name)
    partition_def = definition.partition_def
    if not isinstance(partition_def, PartitionAtRuntime):
        raise SelectionError(f"asset {name!r} is not partitioned at run time: its keys come from its definition")
    domain = partition_def.domain
    known = context.store.list_partitions(domain, limit=limit, offset=offset)  # the page only, read in SQL
    return document_response("partitions", known_keys_body(domain, known))
