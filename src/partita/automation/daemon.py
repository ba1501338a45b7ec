"""`TriggerDaemon`: processes triggers continuously (``partita serve``) or once (``partita trigger --once``).

Each pass evaluates every flow's trigger, then claims due requests and runs
them on a bounded pool of worker threads. SIGTERM/SIGINT stop claiming new
work; runs in flight finish. Several daemons may serve the same store: the
store decides who runs what.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.errors import PartitaError
from partita.flow import Flow
from partita.store.sql import SqlStore
from partita.store.triggers import TriggerStore

__all__ = ["TriggerDaemon", "json_log_handler"]

log = logging.getLogger("partita.daemon")

HEARTBEAT_SECONDS = 5.0


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("flow", "request", "run_id", "partition_key", "daemon"):
            if hasattr(record, key):
                document[key] = getattr(record, key)
        return json.dumps(document)


def json_log_handler() -> logging.Handler:
    """Structured logs: one JSON object per line on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter())
    return handler


class TriggerDaemon:
    def __init__(
        self,
        flows: Sequence[Flow],
        store: SqlStore,
        *,
        max_in_flight: int = 4,
        poll_interval: float = 0.1,
    ) -> None:
        self.evaluators = [TriggerEvaluator(flow, store) for flow in flows]
        self.store = store
        self.max_in_flight = max_in_flight
        self.poll_interval = poll_interval
        self.daemon_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="partita-consumer")
        self.started_runs = 0
        # Set when a run finishes, so a full daemon refills its slots at once.
        self._slot_freed = threading.Event()
        self._paused: dict[str, bool] = {}

    def stop(self) -> None:
        """Stop claiming work; runs in flight finish."""
        self._stop.set()

    def run_once(self) -> int:
        """Process what is pending now: pass until a pass starts nothing, waiting for runs between passes."""
        started = 0
        while True:
            newly = self._pass()
            concurrent.futures.wait(list(self._in_flight))
            started += newly
            if newly == 0:
                break
        self._pool.shutdown(wait=True)
        return started

    def serve(self) -> None:
        triggers = TriggerStore(self.store)
        triggers.daemon_started(self.daemon_id, socket.gethostname(), os.getpid(), time.time())
        log.info("daemon started", extra={"daemon": self.daemon_id})
        last_heartbeat = time.monotonic()
        last_evaluation = 0.0
        try:
            while not self._stop.is_set():
                try:
                    # Triggers are evaluated once per poll interval; a freed slot
                    # in between only takes the next due request.
                    evaluate = time.monotonic() - last_evaluation >= self.poll_interval
                    if evaluate:
                        last_evaluation = time.monotonic()
                    self._pass(evaluate)
                    if time.monotonic() - last_heartbeat >= HEARTBEAT_SECONDS:
                        triggers.daemon_heartbeat(self.daemon_id, time.time())
                        last_heartbeat = time.monotonic()
                except PartitaError as exc:
                    log.error("trigger pass failed: %s", exc, extra={"daemon": self.daemon_id})
                # Wake on a freed slot or after the poll interval, whichever comes first.
                self._slot_freed.wait(self.poll_interval)
                self._slot_freed.clear()
        finally:
            log.info("daemon stopping: waiting for runs in flight", extra={"daemon": self.daemon_id})
            concurrent.futures.wait(list(self._in_flight))
            self._pool.shutdown(wait=True)
            triggers.daemon_heartbeat(self.daemon_id, time.time(), stopped=True)
            log.info("daemon stopped", extra={"daemon": self.daemon_id})

    def _pass(self, evaluate: bool = True) -> int:
        """Evaluate triggers (when due) and fill free slots with due requests."""
        started = 0
        for evaluator in self.evaluators:
            if evaluate:
                report = evaluator.evaluate()
                self._paused[evaluator.flow.name] = report.paused
                for event_id, reason in report.rejected:
                    log.warning("event ignored: %s", reason, extra={"flow": evaluator.flow.name, "request": event_id})
            if self._paused.get(evaluator.flow.name):
                continue
            for request in evaluator.due_requests(limit=4 * self.max_in_flight):
                if self._stop.is_set():
                    return started
                self._in_flight = {future for future in self._in_flight if not future.done()}
                if len(self._in_flight) >= self.max_in_flight:
                    return started
                claimed = evaluator.claim(request)
                if claimed is None:
                    continue
                started += 1
                self.started_runs += 1
                log.info(
                    "starting consumer run",
                    extra={"flow": evaluator.flow.name, "request": claimed.id, "run_id": claimed.run_id},
                )
                future = self._pool.submit(run_request, evaluator, claimed)
                future.add_done_callback(lambda _: self._slot_freed.set())
                self._in_flight.add(future)
        return started
