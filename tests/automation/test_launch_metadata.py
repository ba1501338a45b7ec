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
