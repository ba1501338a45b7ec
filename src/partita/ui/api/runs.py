"""``/api/v1/runs``: recorded runs (``partita.runs``), one run (``partita.run``), its attempts and its logs.

Every list is a page: ``limit`` bounds it and ``next`` (null on a short
page) is the cursor of the next one (``before`` for runs, ``after`` for
attempts and log lines), so a page costs the same however deep it is.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import JSONResponse

from partita.definitions.launch import LaunchKind, parse_tag
from partita.documents.attempt_logs import LogFields, attempt_logs_body, log_query
from partita.documents.attempts import attempts_body, parse_attempt_cursor
from partita.documents.runs import MAX_LISTED_ATTEMPTS, RunView, run_summary
from partita.store.protocol import AttemptQuery, RunFilter
from partita.ui.api import PREFIX
from partita.ui.api.params import Storable
from partita.ui.api.responses import document_response
from partita.ui.context import UiContext, ui_context
from partita.ui.security import require_reader

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=[Depends(require_reader)])

RunStatus = Literal["running", "interrupted", "success", "failed", "cancelled"]
AttemptStatus = Literal["success", "failed", "skipped", "running", "cancelled", "interrupted"]
LaunchedBy = Literal[tuple(kind.value for kind in LaunchKind)]  # type: ignore[valid-type]
#: The most runs one request returns.
MAX_RUNS = 500
#: The most attempts, and log lines, one request returns.
MAX_ATTEMPTS = 1_000
MAX_LOG_LINES = 5_000
#: How the log filters are named in messages.
API_LOG_FIELDS = LogFields("asset", "partition_key")

RunId = Annotated[
    Storable, Path(min_length=1, max_length=64, description="A run id, or a unique prefix of at least 4 characters.")
]
Text = Annotated[Storable | None, Query(min_length=1, max_length=200)]


def run_filter(
    flow: Annotated[Storable | None, Query(max_length=200, description="Only runs of this flow.")] = None,
    tag: Annotated[list[Storable] | None, Query(description="KEY=VALUE; repeat for runs carrying every tag.")] = None,
) -> RunFilter:
    """The filters shared by the runs API and the runs page; a malformed tag is a 400 naming the rule.

    An empty value filters nothing, as a form's field left blank means.
    """
    tags = dict(parse_tag(text, "tag") for text in tag or () if text)
    return RunFilter(flow_name=flow or None, tags=tuple(sorted(tags.items())))


@router.get("/runs", summary="Recent runs, newest first, a page at a time (partita.runs)")
def list_runs(
    context: Annotated[UiContext, Depends(ui_context)],
    where: Annotated[RunFilter, Depends(run_filter)],
    status: Annotated[RunStatus | None, Query(description="Only runs with this status.")] = None,
    launched_by: Annotated[LaunchedBy | None, Query(description="Only runs started this way.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS, description="At most this many runs.")] = 50,
    before: Annotated[
        Storable | None,
        Query(min_length=1, max_length=64, description="The next cursor of the previous page: runs listed after it."),
    ] = None,
) -> JSONResponse:
    where = dataclasses.replace(where, launched_by=launched_by, before_run_id=before)
    found = context.store.list_runs(limit=limit, status=status, where=where)
    cursor = found[-1].run_id if len(found) == limit else None
    body = {"store": context.store.url, "runs": [run_summary(run) for run in found], "next": cursor}
    return document_response("runs", body)


#: What the attempts parameter asks of `RunView.read`.
_LISTED: dict[str, bool | None] = {"auto": None, "all": True, "none": False}


@router.get("/runs/{run_id}", summary="One run: every task's outcome (partita.run)")
def show_run(
    run_id: RunId,
    context: Annotated[UiContext, Depends(ui_context)],
    attempts: Annotated[
        Literal["auto", "all", "none"],
        Query(
            description=(
                f"List every attempt in the record (all), none (none), or only for a run planned with at most "
                f"{MAX_LISTED_ATTEMPTS:,} attempts (auto); /runs/{{id}}/attempts pages them."
            )
        ),
    ] = "auto",
) -> JSONResponse:
    return document_response("run", RunView.read(context.store, run_id, attempts=_LISTED[attempts]).body())


@router.get("/runs/{run_id}/attempts", summary="A page of one run's attempts, by asset and index (partita.attempts)")
def run_attempts(
    run_id: RunId,
    context: Annotated[UiContext, Depends(ui_context)],
    asset: Annotated[Text, Query(description="Only this asset's attempts.")] = None,
    status: Annotated[AttemptStatus | None, Query(description="Only attempts with this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ATTEMPTS, description="At most this many attempts.")] = 100,
    after: Annotated[Text, Query(description="The next cursor of the previous page (ASSET:INDEX).")] = None,
) -> JSONResponse:
    run = context.store.get_run(run_id)
    cursor = None if after is None else parse_attempt_cursor(after)
    page = context.store.list_attempts(run.run_id, AttemptQuery(asset=asset, status=status, after=cursor, limit=limit))
    return document_response("attempts", attempts_body(run, page, limit))


@router.get(
    "/runs/{run_id}/logs", summary="The log lines one run's attempts kept, a page at a time (partita.attempt-logs)"
)
def run_logs(
    run_id: RunId,
    context: Annotated[UiContext, Depends(ui_context)],
    asset: Annotated[Text, Query(description="Only this asset's lines.")] = None,
    partition_key: Annotated[
        Text, Query(description="Only this key's lines (the run must have recorded keys).")
    ] = None,
    level: Annotated[
        str | None,
        Query(
            pattern="^(?i:debug|info|warning|error|critical)$",
            description="Only records at or above this level (captured output and cut markers always).",
        ),
    ] = None,
    after: Annotated[
        int, Query(ge=0, le=2**62, description="Only lines written after this line id (the next cursor).")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="At most this many lines.")] = 1_000,
) -> JSONResponse:
    run = context.store.get_run(run_id)
    query = log_query(
        run, asset=asset, partition_key=partition_key, level=level, after_id=after, limit=limit, fields=API_LOG_FIELDS
    )
    lines = context.store.attempt_logs(run.run_id, query)
    cursor = max(line.id for line in lines) if len(lines) == limit else None
    return document_response("attempt-logs", {**attempt_logs_body(run.run_id, lines), "next": cursor})
