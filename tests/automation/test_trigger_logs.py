"""Consumer runs' attempt logs under `trigger --once`: shown in the daemon's lines by asset and key, and kept (issue 14, item 5)."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from partita.cli.main import cli
from partita.store.sql import SqlStore

from .conftest import publish

ENTRY = '''
from partita import DatePartitionDef, Flow, OnAssetEvents, asset


@asset(partition_def=DatePartitionDef())
def raw():
    return 1


@asset(partition_def=DatePartitionDef())
def consumer(context):
    context.logger.debug("consumer detail")
    context.logger.info("consumed %s", context.partition_key)
    print("printed by the consumer")
    return 1


consumer_flow = Flow(["consumer"], name="consumer_flow", trigger=OnAssetEvents(["raw"]))
'''


def _trigger(entry: Path, store_url: str, *extra: str) -> Any:
    return CliRunner().invoke(cli, ["trigger", str(entry), "--once", "--store", store_url, *extra])


def _entry(tmp_path: Path, store_url: str) -> Path:
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRY)
    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-01")
    return entry


def test_trigger_once_logs_consumer_lines_by_asset_and_key_and_keeps_them(store_url: str, tmp_path: Path) -> None:
    result = _trigger(_entry(tmp_path, store_url), store_url, "--capture-output")

    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.stderr.splitlines() if "consumed 2024-01-01" in line]
    assert "info consumed 2024-01-01 [asset=consumer partition_key=2024-01-01]" in line
    assert "consumer detail" not in result.stderr
    with closing(SqlStore(store_url)) as store:
        (run,) = store.list_runs(limit=5)
        kept = [(s.line.stream, s.line.message) for s in store.attempt_logs(run.run_id)]
    assert kept == [("log", "consumed 2024-01-01"), ("stdout", "printed by the consumer")]


def test_trigger_once_json_logs_carry_the_asset_and_key_and_quiet_hides_info(store_url: str, tmp_path: Path) -> None:
    entry = _entry(tmp_path, store_url)
    result = _trigger(entry, store_url, "--log-format", "json", "-v")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    asset_lines = [line for line in lines if line["logger"] == "partita.asset.consumer"]
    assert [(line["level"], line["message"]) for line in asset_lines] == [
        ("debug", "consumer detail"),
        ("info", "consumed 2024-01-01"),
    ]
    assert {(line["asset"], line["partition_key"]) for line in asset_lines} == {("consumer", "2024-01-01")}

    with closing(SqlStore(store_url)) as store:
        publish(store, "2024-01-02")
    quiet = _trigger(entry, store_url, "-q")
    assert quiet.exit_code == 0, quiet.output
    assert "consumed" not in quiet.stderr and "started 1 consumer run" in quiet.stdout
