"""``partita runs cancel``: ask the process running a run to cancel it, through the store (SPEC §13, §15).

Exit codes: 0 the request is recorded (with ``--wait``: the run then
recorded ``cancelled``); 2 the run cannot be cancelled — it finished, its
owner is gone (interrupted), or it finished on its own before noticing the
request; 4 ``--wait`` timed out: the request stays recorded but the run has
not stopped (its owner is stuck, or a sync body is still in its grace period).
"""

from __future__ import annotations

import sys

import click
from rich.markup import escape

from partita.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    STORABLE_TEXT,
    chosen_store_url,
    emit_document,
    handles_errors,
    json_option,
    reading_store,
    store_option,
)
from partita.cli.tables import cli_console
from partita.documents.cancel import cancel_body, cancel_refusal, iso_time
from partita.errors import ConfigurationError, StoreError, UnknownRunError
from partita.operations.cancellation import DEFAULT_WAIT_SECONDS, wait_for_run_end
from partita.store.protocol import CancelOutcome, CancelRequest


def _verdict(request: CancelRequest, waited: bool, timeout: float) -> tuple[int, str]:
    """The exit code and the sentence that tell what the request did."""
    run = f"run {request.run_id}"
    refusal = cancel_refusal(request)
    if refusal is not None:
        return EXIT_USAGE, refusal
    if not waited:
        if request.outcome is CancelOutcome.ALREADY_REQUESTED:
            return EXIT_OK, f"{run} was already asked to cancel at {iso_time(request.requested_at)}; it is still running"
        return EXIT_OK, f"asked {run} to cancel: the process running it cancels it within about a second"
    if request.status == "cancelled":
        return EXIT_OK, f"{run} cancelled"
    if request.status == "running":
        return StoreError.exit_code, (
            f"{run} did not stop within {timeout:g} seconds; the request stays recorded (a sync body may still be "
            "within its grace period, or the process running it does not reach the store)"
        )
    return EXIT_USAGE, f"{run} finished ({request.status}) before it noticed the request"


@click.command("cancel")
@click.argument("run_id", type=STORABLE_TEXT)
@click.option("--wait", is_flag=True, help="Wait until the run stops, and say how it ended.")
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
    help=f"With --wait: give up after SECONDS (default {DEFAULT_WAIT_SECONDS:g}); exit 4 if the run still runs.",
)  # fmt: skip
@store_option
@json_option
@handles_errors
def cancel(run_id: str, wait: bool, timeout: float | None, store_url: str | None, as_json: bool) -> None:
    """Ask the process running RUN_ID (or a unique prefix) to cancel it, wherever it runs.

    The request is recorded in the store; `partita run`, `serve` or
    `trigger --once` running that run notices it within about a second,
    stops admitting work, cancels running bodies as Ctrl-C does and records
    the run cancelled. Exit 0 when the request is recorded (with --wait:
    once the run recorded cancelled), 2 when the run already finished or is
    not running, 4 when --wait timed out.
    """
    if timeout is not None and not wait:
        raise ConfigurationError("--timeout needs --wait: it bounds how long --wait waits")
    limit = DEFAULT_WAIT_SECONDS if timeout is None else timeout
    with reading_store(store_url) as store:
        if store is None:
            raise UnknownRunError(
                f"no run with id {run_id!r}: no run-history store exists at {chosen_store_url(store_url)} yet"
            )
        request = store.request_cancel(run_id)
        waited = wait and request.outcome.recorded
        if waited:
            request = CancelRequest(
                request.run_id, request.outcome, wait_for_run_end(store, request.run_id, limit), request.requested_at
            )
        url = store.url
    code, sentence = _verdict(request, waited, limit)
    if as_json:
        emit_document("run-cancel", cancel_body(url, request, wait, limit))
    if code == EXIT_OK:
        if not as_json:
            cli_console().print(escape(sentence), highlight=False)
        return
    cli_console(stderr=True).print(f"[bold red]error:[/] {escape(sentence)}", highlight=False)
    sys.exit(code)

