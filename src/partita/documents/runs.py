"""The ``partita.runs`` and ``partita.run`` documents: recorded runs as the CLI and the API show them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from partita.results.record import render_record
from partita.store import SqlStore, StoredRun
from partita.store.trigger_requests import TriggerRequest
from partita.store.triggers import TriggerLaunch, TriggerStore

__all__ = ["RUN_DOCUMENT_RECORD_VERSION", "RunView", "launch_fields", "run_summary"]

#: partita.run version 1 embeds a version 4 record; a newer record means a new document version.
RUN_DOCUMENT_RECORD_VERSION = 4


def run_summary(run: StoredRun) -> dict[str, Any]:
    """One entry of ``partita.runs``."""
    header = run.header
    return {
        "run_id": run.run_id,
        "status": run.status,
        "started_at": header.started_at.isoformat(),
        "finished_at": None if header.finished_at is None else header.finished_at.isoformat(),
        "duration_seconds": run.duration,
        "targets": list(header.targets),
        "selection": {"kind": header.selection_kind, "domain": header.domain, "key_count": header.key_count},
        "attempt_count": run.attempt_count,
        "counts": run.counts,
        **launch_fields(run),
    }


def launch_fields(run: StoredRun) -> dict[str, Any]:
    """How the run was launched, its flow and its tags (null for runs recorded before launches were)."""
    return {"launched_by": run.launched_by, "flow": run.flow_name, "tags": dict(run.tags)}


@dataclass(frozen=True)
class RunView:
    """One recorded run with what ``runs show`` prints about it: its record, and the trigger launch behind it."""

    run: StoredRun
    record: dict[str, Any]
    launch: TriggerLaunch | None
    request: TriggerRequest | None

    @classmethod
    def read(cls, store: SqlStore, run_id: str) -> RunView:
        """The run ``run_id`` names (an exact id or a unique prefix); `UnknownRunError` when none does."""
        run = store.get_run(run_id)
        tasks = store.get_tasks(run.run_id)
        triggers = TriggerStore(store)
        launch = triggers.launch(run.run_id)
        request = None if launch is None else triggers.request(launch.request_id)
        record = render_record(
            run.header, tasks, RUN_DOCUMENT_RECORD_VERSION, record_partition_keys=run.record_partition_keys
        )
        return cls(run, record, launch, request)

    def body(self) -> dict[str, Any]:
        """The body of the ``partita.run`` document."""
        return {
            "run": self.record,
            "launch": None if self.launch is None else _launch_document(self.launch),
            **launch_fields(self.run),
            "trigger_request": None if self.request is None else self._request_document(self.request),
        }

    def _request_document(self, request: TriggerRequest) -> dict[str, Any]:
        """The trigger request the run serves; its consumer key only when the run recorded keys (it is a raw key)."""
        key = request.partition_key if self.run.record_partition_keys else None
        return {"generation": request.generation, "consumer_key": key}


def _launch_document(launch: TriggerLaunch) -> dict[str, Any]:
    return {
        "kind": "trigger",
        "flow": launch.flow,
        "request": launch.request_id,
        "try": launch.attempt,
        "follows_run_id": launch.follows_run_id,
    }
