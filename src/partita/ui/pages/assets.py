"""The assets pages: the catalog with its lineage graph, an asset's partition grid, and a key's history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from partita.definitions.assets import AssetDefinition
from partita.documents.assets import assets_body
from partita.errors import ConfigurationError
from partita.operations.status import KeyState, PartitionStates
from partita.operations.status_layout import SYMBOLS
from partita.planning.lineage import Lineage
from partita.planning.plan import describe_asset
from partita.store.change_markers import newest_event_id
from partita.ui.asset_window import (
    AssetRef,
    Window,
    bounds,
    canonical_key,
    entry_flows,
    find_asset,
    parse_window,
    window_status,
)
from partita.ui.context import UiContext, ui_context
from partita.ui.key_page import LOG_RUNS, attempt_fields, event_extra, read_key_history
from partita.ui.lineage_svg import draw_lineage
from partita.ui.security import require_reader
from partita.ui.status_grid import GridView, grid_view
from partita.ui.templating import render

router = APIRouter(include_in_schema=False, dependencies=[Depends(require_reader)])

Context = Annotated[UiContext, Depends(ui_context)]
#: Window bounds are canonical key text: far shorter than this.
WindowBound = Annotated[str | None, Query(max_length=200, description="A key in the definition's canonical text.")]
#: Attempts and events a key page lists at a time.
MAX_PAGE = 500


def _catalog(context: UiContext) -> list[dict[str, Any]]:
    """The entry flow's assets (``partita assets``), then those only its triggered flows hold."""
    described = assets_body(context.flow)["assets"]
    for entry in described:
        entry["flow"] = context.flow.name
    seen = {entry["name"] for entry in described}
    for flow in entry_flows(context)[1:]:
        for definition in flow.closure():
            if definition.name not in seen:
                seen.add(definition.name)
                described.append({**describe_asset(definition), "target": definition.name in flow.targets, "flow": flow.name})
    return described


@router.get("/assets")
def assets_page(request: Request, context: Context) -> Response:
    catalog = _catalog(context)
    definitions: dict[str, AssetDefinition] = {}
    for flow in entry_flows(context):
        for definition in flow.closure():
            definitions.setdefault(definition.name, definition)
    lineage = Lineage.of_closure(list(definitions.values()))
    targets = [entry["name"] for entry in catalog if entry["target"]]
    return render(request, "assets.html", {"assets": catalog, "lineage": draw_lineage(lineage, targets)})


def _grid_context(asset: AssetRef, window: Window, status: PartitionStates | None, problem: str | None) -> dict[str, Any]:
    grid: GridView | None = None
    first = last = None
    if status is not None:
        keys = status.scope.keys
        grid = grid_view(status.definition, keys, status.states)
        first, last = bounds(keys)
    definition = asset.definition.partition_def
    ranged = definition is not None and definition.supports_range
    return {
        "asset": asset.name,
        "window": window,
        "grid": grid,
        "status": status,
        "problem": problem,
        "symbols": {state.value: symbol for state, symbol in SYMBOLS.items()},
        "states": list(KeyState),
        "ranged": ranged,
        # The effective window (the default's bounds when none was given), for the form and the actions.
        "start": window.start if window.given else (first if ranged else None),
        "end": window.end if window.given else (last if ranged else None),
    }


def _read_grid(
    context: UiContext, asset: AssetRef, start: str | None, end: str | None
) -> tuple[dict[str, Any], int]:
    """The grid's context and the HTTP status: a window the definition refuses is a 400 naming the field."""
    window = Window()
    try:
        window = parse_window(asset.definition.partition_def, start, end)
        status = window_status(context, asset, window)
    except ConfigurationError as error:  # selection errors included; a store failure stays a 503
        return _grid_context(asset, window, None, str(error)), 400
    return _grid_context(asset, window, status, None), 200


@router.get("/assets/{name}")
def asset_page(request: Request, name: str, context: Context, start: WindowBound = None, end: WindowBound = None) -> Response:
    asset = find_asset(context, name)
    # Read before the grid: an event stored after this id reaches the page through its stream's first message.
    page_events = newest_event_id(context.store, asset.name)
    page, code = _read_grid(context, asset, start, end)
    page["shown_events"] = page_events
    page["described"] = describe_asset(asset.definition)
    page["flow"] = asset.flow.name
    page["given_start"], page["given_end"] = start or "", end or ""
    return render(request, "asset.html", page, status_code=code)


@router.get("/assets/{name}/grid")
def asset_grid(request: Request, name: str, context: Context, start: WindowBound = None, end: WindowBound = None) -> Response:
    """The grid alone: what the asset page swaps in when one of the asset's events arrives."""
    asset = find_asset(context, name)
    page, code = _read_grid(context, asset, start, end)
    return render(request, "asset_grid.html", page, status_code=code)


@router.get("/assets/{name}/keys/{key:path}")
def key_page(
    request: Request,
    name: str,
    key: str,
    context: Context,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Attempts and events per page.")] = 50,
    before: Annotated[float | None, Query(description="Attempts that finished before this time (POSIX seconds).")] = None,
    since: Annotated[int | None, Query(ge=0, description="Events after this event id.")] = None,
) -> Response:
    asset = find_asset(context, name)
    definition = asset.definition.partition_def
    if definition is None:
        raise ConfigurationError("partition key: the asset is not partitioned; its page shows its one outcome")
    canonical_key(definition, key)
    history = read_key_history(context, asset, key, limit=limit, before=before, since=since)
    return render(
        request,
        "key.html",
        {
            "asset": asset.name,
            "key": key,
            "described": describe_asset(asset.definition),
            "history": history,
            "attempts": [attempt_fields(attempt) for attempt in history.attempts],
            "events": [(event, event_extra(event)) for event in history.events],
            "limit": limit,
            "log_runs": LOG_RUNS,
            "symbols": {state.value: symbol for state, symbol in SYMBOLS.items()},
        },
    )
