"""Catch-up of missed schedule ticks: every one, only the latest, or at most N (SPEC §12)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import partita as p
from partita.automation.evaluation import TriggerEvaluator, run_request
from partita.errors import DefinitionError
from partita.store.sql import SqlStore

START = dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.UTC)
HOURS = p.HourlyPartitionDef("UTC")


def _run_due(evaluator: TriggerEvaluator) -> None:
    """Start every due request (no new evaluation: the pass's time is the test's)."""
    for request in evaluator.due_requests():
        claimed = evaluator.claim(request)
        assert claimed is not None
        run_request(evaluator, claimed)


def _evaluator(store: SqlStore, catchup: Any) -> tuple[TriggerEvaluator, list[Any]]:
    registry = p.AssetRegistry()
    seen: list[Any] = []

    @p.asset(partition_def=HOURS, registry=registry)
    def scheduled(context: Any) -> int:
        seen.append(HOURS.format_key(context.partition_key))
        return 1

    trigger = p.CronPartitions("0 * * * *", start=START, catchup=catchup)
    flow = p.Flow(["scheduled"], registry=registry, name="hourly", trigger=trigger)
    return TriggerEvaluator(flow, store), seen


@pytest.mark.parametrize(
    ("catchup", "expected"),
    [
        ("all", ["2024-01-01T00", "2024-01-01T01", "2024-01-01T02", "2024-01-01T03", "2024-01-01T04"]),
        ("latest", ["2024-01-01T04"]),
        (2, ["2024-01-01T03", "2024-01-01T04"]),
        (10, ["2024-01-01T00", "2024-01-01T01", "2024-01-01T02", "2024-01-01T03", "2024-01-01T04"]),
    ],
)
def test_missed_ticks_run_as_the_catchup_says(store: SqlStore, catchup: Any, expected: list[str]) -> None:
    evaluator, seen = _evaluator(store, catchup)

    report = evaluator.evaluate(now=START + dt.timedelta(hours=5, minutes=10))

    assert report.scheduled == expected
    assert len(report.skipped_by_catchup) == 5 - len(expected)
    _run_due(evaluator)
    assert seen == expected


def test_passed_over_keys_never_run_later(store: SqlStore) -> None:
    evaluator, seen = _evaluator(store, "latest")
    evaluator.evaluate(now=START + dt.timedelta(hours=3, minutes=1))
    _run_due(evaluator)

    later = evaluator.evaluate(now=START + dt.timedelta(hours=4, minutes=1))

    assert later.scheduled == ["2024-01-01T03"]
    assert later.skipped_by_catchup == []
    _run_due(evaluator)
    assert seen == ["2024-01-01T02", "2024-01-01T03"]


def test_a_catchup_limit_applies_per_pass_so_a_running_daemon_misses_nothing(store: SqlStore) -> None:
    evaluator, seen = _evaluator(store, "latest")
    for hour in range(1, 5):
        assert evaluator.evaluate(now=START + dt.timedelta(hours=hour, minutes=1)).skipped_by_catchup == []
        _run_due(evaluator)
    assert seen == ["2024-01-01T00", "2024-01-01T01", "2024-01-01T02", "2024-01-01T03"]


@pytest.mark.parametrize("bad", ["none", "", 0, -1, True, 1.5, None])
def test_a_bad_catchup_is_a_definition_error_that_names_the_rule(bad: Any) -> None:
    with pytest.raises(DefinitionError, match='catchup must be "all", "latest" or a whole number'):
        p.CronPartitions("0 * * * *", start=START, catchup=bad)


def test_catchup_is_part_of_the_description() -> None:
    assert p.CronPartitions("0 * * * *", start=START, catchup=3).describe()["catchup"] == 3
    assert p.CronPartitions("0 * * * *", start=START).catchup == "all"
