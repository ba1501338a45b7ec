"""Consumer runs record that a trigger launched them, with their request's generation and key."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from partita.cli.main import cli
from partita.store.sql import SqlStore

from .conftest import publish


def test_a_consumer_run_records_that_a_trigger_launched_it_and_shows_its_request(entry: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/launch.db"
    store = SqlStore(url)
    try:
        publish(store, "2024-01-01")
    finally:
        store.close()
    runner = CliRunner()
    assert runner.invoke(cli, ["trigger", entry, "--once", "--store", url]).exit_code == 0
    listed = json.loads(runner.invoke(cli, ["runs", "list", "--store", url, "--json", "--flow", "consumer_flow"]).stdout)
    (run,) = listed["runs"]
    assert (run["launched_by"], run["flow"]) == ("trigger", "consumer_flow")
    shown = json.loads(runner.invoke(cli, ["runs", "show", run["run_id"], "--store", url, "--json"]).stdout)
    # consumer_flow records partition keys, so its request's consumer key may be shown.
    assert shown["trigger_request"] == {"generation": 0, "consumer_key": "2024-01-01"}
    text = runner.invoke(cli, ["runs", "show", run["run_id"], "--store", url]).stdout
    assert "launched by trigger of flow consumer_flow" in text
    assert "consumer key 2024-01-01, generation 0" in text


def test_a_scheduled_run_records_that_a_schedule_launched_it(store: SqlStore) -> None:
    import datetime as dt
    from typing import Any

    import partita as p
    from partita.automation.evaluation import TriggerEvaluator, run_request

    start = dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.UTC)
    registry = p.AssetRegistry()

    @p.asset(partition_def=p.HourlyPartitionDef("UTC"), registry=registry)
    def scheduled(context: Any) -> int:
        return 1

    trigger = p.CronPartitions("0 * * * *", start=start)
    flow = p.Flow(["scheduled"], registry=registry, name="hourly", trigger=trigger, tags={"cadence": "hourly"})
    evaluator = TriggerEvaluator(flow, store)
    evaluator.evaluate(now=start + dt.timedelta(minutes=70))
    for request in evaluator.due_requests():
        claimed = evaluator.claim(request)
        assert claimed is not None
        run_request(evaluator, claimed)
    (run,) = store.list_runs()
    assert (run.launched_by, run.flow_name, run.tags) == ("schedule", "hourly", (("cadence", "hourly"),))
