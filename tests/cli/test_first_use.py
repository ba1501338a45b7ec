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
    from partita.entry import load_entry
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


# -- 80 columns and pipes ----------------------------------------------------------------------

DAILY_ENTRY = """
from partita import AssetRegistry, DatePartitionDef, Flow, asset

registry = AssetRegistry()


@asset(partition_def=DatePartitionDef(), registry=registry)
def extract_orders_from_the_warehouse(context):
    return 1


@asset(partition_def=DatePartitionDef(), registry=registry)
def orders_report_for_finance(context, extract_orders_from_the_warehouse):
    return 1


flow = Flow(["orders_report_for_finance"], registry=registry)
"""


def _recorded_run(tmp_path: Path, columns: int = 80, env: dict[str, str] | None = None) -> tuple[Any, str, str]:
    """Run the daily entry into a store under a long path; return the result, its run id and the store URL."""
    (tmp_path / "daily.py").write_text(DAILY_ENTRY)
    folder = tmp_path / "a-rather-long-folder-name-for-the-history" / "of-this-particular-project"
    folder.mkdir(parents=True)
    url = f"sqlite:///{folder / 'history.db'}"
    result = CliRunner().invoke(
        cli,
        ["run", "daily.py", "--partition-range", "2026-08-08", "2026-08-09", "--yes", "--store", url],
        catch_exceptions=False,
        env={"COLUMNS": str(columns), **(env or {})},
    )
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if line.startswith("recorded as run "))
    return result, line.split()[3], url


def test_piped_recorded_as_run_line_is_one_unwrapped_line(tmp_path: Path) -> None:
    result, run_id, url = _recorded_run(tmp_path)

    assert len(run_id) == 32
    assert f"recorded as run {run_id} in {url}" in result.stderr.splitlines()


def test_piped_tables_are_plain_lines_with_full_ids_and_times(tmp_path: Path) -> None:
    _, run_id, url = _recorded_run(tmp_path)

    listed = _cli("runs", "list", "--store", url)

    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert lines[0] == f"runs in {url} (any unique prefix of a run id works)"
    assert lines[1].split() == ["run", "id", "status", "started", "duration", "targets", "attempts", "failed", "skipped"]
    row = lines[2].split()
    assert row[0] == run_id
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", row[2]) and re.fullmatch(r"\d\d:\d\d:\d\d", row[3])
    assert row[5] == "orders_report_for_finance"
    assert not any(character in listed.stdout for character in "│┃━…")


def test_piped_plan_and_run_tables_never_truncate_asset_names(tmp_path: Path) -> None:
    result, _, _ = _recorded_run(tmp_path)

    assert "…" not in result.output
    assert any(line.split()[:2] == ["extract_orders_from_the_warehouse", "success"] for line in result.stdout.splitlines())


def test_a_table_wider_than_the_terminal_becomes_records_with_every_value_whole() -> None:
    from rich.table import Table

    from partita.cli.tables import print_table

    console = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    run_id = "75c466d2" * 4
    table = Table(title="runs")
    for column in ("run id", "status", "started", "duration", "targets"):
        table.add_column(column)
    table.add_row(run_id, "[red]failed[/]", "2026-12-01 14:00:00", "1.25s", "orders_report_for_finance")

    print_table(console, table)

    assert console.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "runs",
        f"run id: {run_id}",
        "  status: failed",
        "  started: 2026-12-01 14:00:00",
        "  duration: 1.25s",
        "  targets: orders_report_for_finance",
    ]


def test_a_table_that_fits_the_terminal_stays_a_table() -> None:
    from rich.table import Table

    from partita.cli.tables import print_table

    console = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    table = Table(title="tasks")
    for column in ("asset", "status"):
        table.add_column(column)
    table.add_row("extract", "success")

    print_table(console, table)

    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert text.splitlines()[0] == "tasks"
    assert "│ extract │ success │" in text
    assert all(len(line) <= 80 for line in text.splitlines())
