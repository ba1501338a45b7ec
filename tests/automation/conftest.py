"""Shared helpers for trigger tests (SPEC §12): isolation, one evaluation pass (``store`` is in tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.store.sql import SqlStore


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


def process(evaluator: TriggerEvaluator) -> list[Any]:
    """One full pass: evaluate, claim and run every due request; the run results."""
    evaluator.evaluate()
    results = []
    for request in evaluator.due_requests():
        claimed = evaluator.claim(request)
        if claimed is not None:
            results.append(run_request(evaluator, claimed))
    return results


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(interval)


ENTRY = '''
import os
import time

from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    time.sleep(float(os.environ.get("CONSUMER_DELAY", "0")))
    return len(context.triggering_events)


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]), record_partition_keys=True)
'''


@pytest.fixture
def entry(tmp_path: Path) -> str:
    path = tmp_path / "entry.py"
    path.write_text(ENTRY)
    return str(path)


def publish(store: SqlStore, *keys: str) -> list[int]:
    import partita as p

    registry = p.AssetRegistry()

    @p.asset(partition_def=p.DatePartitionDef(), registry=registry)
    def raw() -> int:
        return 1

    return [p.publish_event(store, registry, "raw", partition_key=key).id for key in keys]


def runs_per_key(store: SqlStore) -> dict[str, int]:
    """How many recorded runs each consumer key has (needs record_partition_keys)."""
    counts: dict[str, int] = {}
    for run in store.list_runs(limit=10_000):
        for task in store.get_tasks(run.header.run_id):
            if task.asset == "consumer":
                for attempt in task.attempts:
                    counts[attempt.partition_key] = counts.get(attempt.partition_key, 0) + 1
    return counts
