"""Cancelling a run from anywhere: `cancel_run` records a request that the run's owner acts on (SPEC §15).

The request goes through the store, not a signal, so it works across
hosts and for every kind of owner (`partita run`, `serve`, `trigger
--once`, a Python program): the owner's journal polls for requests and
cancels the run within about a second, as Ctrl-C would, and records it
``cancelled``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Iterator

from partita.errors import ConfigurationError
from partita.store import Store, open_store, store_url_from_environment
from partita.store.protocol import CancelOutcome, CancelRequest

__all__ = ["CancelOutcome", "CancelRequest", "cancel_run", "wait_for_run_end"]

#: How long `cancel_run(wait=True)` waits unless told: above the default grace of running sync bodies.
DEFAULT_WAIT_SECONDS = 30.0
_POLL_SECONDS = 0.05


@contextlib.contextmanager
def _opened(store: Store | str | None) -> Iterator[Store]:
    if store is None:
        store = store_url_from_environment()
        if store is None:
            raise ConfigurationError("cancel_run store is not set: pass store= (a URL or a Store) or set PARTITA_STORE")
    if isinstance(store, str):
        opened = open_store(store, create=False)
        try:
            yield opened
        finally:
            opened.close()
        return
    yield store


def cancel_run(
    run_id: str,
    *,
    store: Store | str | None = None,
    wait: bool = False,
    timeout: float = DEFAULT_WAIT_SECONDS,
) -> CancelRequest:
    """Ask the process running ``run_id`` (an id or a unique prefix of four or more characters) to cancel it.

    ``store`` is a `Store` or a URL (``$PARTITA_STORE`` when None). The
    outcome says whether the request was recorded (`CancelOutcome.REQUESTED`,
    or ``ALREADY_REQUESTED``) or refused because the run finished
    (``FINISHED``) or its owner is gone (``NOT_RUNNING``). With ``wait``,
    a recorded request is followed until the run stops or ``timeout``
    seconds pass; the returned ``status`` is then the run's status at that
    moment (``running`` after a timeout). `UnknownRunError` when no run matches.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout < 0:
        raise ConfigurationError("cancel_run timeout must be a finite number of seconds, zero or more")
    with _opened(store) as opened:
        request = opened.request_cancel(run_id)
        if wait and request.outcome.recorded:
            status = wait_for_run_end(opened, request.run_id, timeout)
            request = dataclasses.replace(request, status=status)
    return request


def wait_for_run_end(store: Store, run_id: str, timeout: float) -> str:
    """The run's status once it is no longer ``running``, or ``running`` when ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while True:
        status = store.get_run(run_id).status
        if status != "running" or time.monotonic() >= deadline:
            return status
        time.sleep(min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
