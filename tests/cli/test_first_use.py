"""First use: what a new user meets at an 80-column terminal, in a pipe and at Ctrl-C (issue 14, item 10)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from partita import AssetRegistry, AttemptFinished, Flow, StaticPartitionDef, asset
from partita.cli.main import cli
from partita.cli.progress import ProgressDisplay

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.chdir(tmp_path)


def _cli(*args: str, columns: int = 80) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": str(columns)})


# -- run id prefixes ---------------------------------------------------------------------


def test_a_too_short_run_id_prefix_says_how_long_it_must_be(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text(
        "from partita import Flow, asset, AssetRegistry\n"
        "registry = AssetRegistry()\n"
        "@asset(registry=registry)\n"
        "def single():\n    return 1\n"
        "flow = Flow(['single'], registry=registry)\n"
    )
    assert _cli("run", "one.py", "--yes").exit_code == 0

    result = _cli("runs", "show", "ab")

    assert result.exit_code == 2, result.output
    assert "too short" in result.stderr
    assert "at least 4 characters" in result.stderr
    assert "no run with id" not in result.stderr


# -- the progress display ------------------------------------------------------------------


def _cancelled_run_display() -> str:
    """Run four keys, cancel the run once one finished, and return the final progress line."""
    registry = AssetRegistry()
    shards = StaticPartitionDef("shards", ["s1", "s2", "s3", "s4"])

    @asset(partition_def=shards, registry=registry)
    async def slow(context: Any) -> str:
        if context.partition_key != "s1":
            await asyncio.sleep(60)  # cancelled long before this
        return "done"

    flow = Flow(["slow"], registry=registry, store=False)
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    display = ProgressDisplay(console)

    async def main() -> None:
        finished = asyncio.Event()

        class Canceller:
            def on_event(self, event: Any) -> None:
                if isinstance(event, AttemptFinished):
                    finished.set()

        with display:
            running = asyncio.create_task(
                flow.run_async({"partition_keys": ["s1", "s2", "s3", "s4"]}, observers=[display, Canceller()])
            )
            await asyncio.wait_for(finished.wait(), timeout=30)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running

    asyncio.run(main())
    text = _ANSI.sub("", console.file.getvalue())  # type: ignore[attr-defined]
    return [line for line in text.replace("\r", "\n").splitlines() if line.strip()][-1]


def test_progress_after_cancelling_counts_cancelled_attempts_apart_from_done() -> None:
    line = _cancelled_run_display()

    assert "1/4" in line, line
    assert "3 cancelled" in line, line
    assert "4/4" not in line, line


def test_progress_labels_its_two_times() -> None:
    line = _cancelled_run_display()

    assert re.search(r"elapsed \d+:\d\d:\d\d", line), line
    assert re.search(r"remaining (-:--:--|\d+:\d\d:\d\d)", line), line


# -- errors name what the user typed ---------------------------------------------------------

SELECTION_ENTRY = """
from partita import AssetRegistry, DatePartitionDef, Flow, StaticPartitionDef, asset

registry = AssetRegistry()


@asset(partition_def=DatePartitionDef(), registry=registry)
def daily(context):
    return 1


@asset(partition_def=StaticPartitionDef("regions", ["eu-qq41", "us-qq42"]), registry=registry)
def regional(context):
    return 1


flow = Flow(["daily"], registry=registry)
"""


@pytest.fixture
def selection_entry(tmp_path: Path) -> str:
    (tmp_path / "selection.py").write_text(SELECTION_ENTRY)
    return "selection.py"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--partition-key", "2026-08-08", "--partition-key", "2026-8-8"], "--partition-key #2"),
        (["--partition-range", "2026-08-10", "2026-08-08"], "--partition-range"),
        (["--partition-range", "2026-8-1", "2026-08-08"], "--partition-range"),
        (["--target", "regional", "--partition-range", "eu-qq41", "us-qq42"], "--partition-range is not supported"),
        (["--partition-key", "2026-08-08", "--partition-range", "2026-08-08", "2026-08-09"], "--partition-key and --partition-range"),
        ([], "--partition-key, --partition-range or --empty-partitions"),
    ],
)
def test_selection_errors_on_the_cli_name_the_flags_typed_not_config_fields(
    selection_entry: str, arguments: list[str], named: str
) -> None:
    result = _cli("plan", selection_entry, *arguments)

    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert named in message, message
    for field in ("partition_keys", "partition_range", "empty_partitions"):
        assert field not in message, message


def test_selection_errors_in_python_keep_the_config_field_names(tmp_path: Path, selection_entry: str) -> None:
    from partita.cli.entry import load_entry
    from partita.errors import SelectionError

    flow = load_entry(selection_entry)
    for config, named in (
        ({"partition_keys": ["2026-08-08", "2026-8-8"]}, "partition_keys[1]"),
        ({"partition_range": ("2026-08-10", "2026-08-08")}, "partition_range"),
        ({}, "partition_keys, partition_range or empty_partitions"),
    ):
        for plan in (flow.plan, flow.plan_from_text):
            with pytest.raises(SelectionError) as raised:
                plan(config)
            assert named in str(raised.value)
            assert "--partition" not in str(raised.value)
