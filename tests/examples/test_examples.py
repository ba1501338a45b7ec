"""Every example under examples/ runs, and every command the docs show works.

Examples run as ``python examples/NAME.py`` in a subprocess with this
interpreter, from a temporary working directory. CLI commands from README.md
and docs/*.md run verbatim from a temporary directory that links
``examples/`` in, so relative paths and the ``pkg.module:name`` form resolve
as they do from the repository root without writing into the checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# Lines each example must print (substrings, checked in order of appearance).
EXPECTED_OUTPUT: dict[str, list[str]] = {
    "quickstart.py": [],  # defines the flow only; the CLI tests below run it
    "readme_example.py": [
        '"schema": "partita.plan"',
        "RunStatus.SUCCESS ()",
        "2026-08-08: 24, 2026-08-09: 27, 2026-08-10: 30",
    ],
    "first_asset.py": [
        '"schema": "partita.plan"',
        '"key_count": 2',
        "run status: success",
        "2026-08-08 success 108",
        "2026-08-09 success 109",
    ],
    "upstream_downstream.py": [
        "attempts per asset: {'gross': 3, 'tax_rate': 1, 'net': 3, 'summary': 1}",
        "summary: ['2026-08-10=800', '2026-08-08=640', '2026-08-09=720']",
    ],
    "partition_outcomes.py": [
        "run status: failed",
        "sales 2026-08-09 failed",
        "revenue 2026-08-09 skipped dependency_failed blocked by sales",
        "revenue 2026-08-10 success",
        "report - skipped dependency_failed blocked by revenue",
        "failed sales keys: ['2026-08-09']",
        "failed revenue keys: ()",
        "failure: builtins.RuntimeError - the export for this day has not arrived",
        "follow-up status: success attempts: 1",
        "ValueError: asset 'report' is not partitioned",
    ],
    "sync_and_async.py": [
        "planned max_concurrency: 2",
        "orders: {'berlin': 0, 'lisbon': 0, 'oslo': 20, 'rome': 20, 'vienna': 0, 'zurich': 0}",
        "at most 2 bodies at once: True",
        "overridden max_concurrency: 6",
        "at most 6 bodies at once: True",
        "run_async status: success",
        "reorder is still a plain coroutine function: 35",
    ],
    "time_partitions.py": [
        "date: date date YYYY-MM-DD True",
        "normalized: datetime.date(2026, 8, 8)",
        "range: ['2026-08-08', '2026-08-09', '2026-08-10']",
        "rejected: date partition key text is not canonical YYYY-MM-DD",
        "rejected: a datetime is not a date partition key",
        "rejected: date partition key is earlier than the definition's start",
        "rejected: date partition key text is not a valid calendar date",
        "reversed range: partition_range start is later than end",
        "month: monthly month YYYY-MM",
        "months: ['2025-11', '2025-12', '2026-01', '2026-02']",
        "in memory: datetime.date(2026, 2, 1)",
        "hour: hourly hour:Europe/Berlin YYYY-MM-DDTHH",
        "spring: ['2026-03-29T01', '2026-03-29T03']",
        "gap: hourly partition key names an hour that does not exist",
        "autumn: ['2026-10-25T01', '2026-10-25T02', '2026-10-25T02+01:00', '2026-10-25T03']",
        "offsets: ['2:00:00', '2:00:00', '1:00:00', '1:00:00']",
        "01:00 UTC is 2026-10-25T02+01:00",
    ],
    "static_and_multi.py": [
        "static: static static:regions False ('eu-west', 'us-east', 'apac')",
        "rejected: partition key is not one of the keys declared by static:regions",
        "multi: multi multi(day=date,region=static:regions)",
        "key format: <day: YYYY-MM-DD>|<region: one of the declared keys>",
        "in memory: MultiPartitionKey({'day': datetime.date(2026, 8, 8), 'region': 'eu-west'})",
        "dimensions: 2026-08-08 eu-west -> 2026-08-08|eu-west",
        "same key from a mapping or a MultiPartitionKey: True",
        "2026-08-08|eu-west -> eu-west shipments on 08 Aug",
        "2026-08-09|us-east -> us-east shipments on 09 Aug",
        "SelectionError: partition_range is not supported by asset 'shipments'",
    ],
    "custom_partition_def.py": [
        "shard keys selected: 3",
        "shard 0 present=True",
        "shard '' present=True",
        "shard False present=True",
        "tenant keys selected: 2",
        "plan document mentions a tenant: False",
        "['invoices for acme', 'invoices for globex']",
        "SelectionError: partition_keys[1] is rejected by asset 'invoices' (tenant): "
        "tenant keys must be 3 to 20 letters or digits",
    ],
    "selection_forms.py": [
        "keys: keys, 2 keys, 5 attempts",
        "range: range, 7 keys, 15 attempts",
        "empty: empty, 0 keys, 1 attempts",
        "range() as keys: keys, 7 keys, 15 attempts",
        "deduplicated: ['2026-08-09', '2026-08-08']",
        "no selector: SelectionError: assets 'extract', 'load' are partitioned",
        "two forms: SelectionError: choose exactly one selection form",
        "unpartitioned closure: SelectionError: partition_keys given, but no selected asset is partitioned",
        "unpartitioned, no selector: unpartitioned, 0 keys, 1 attempts",
        "two domains: PlanningError: the selected assets span 2 partition domains",
        "bad key: SelectionError: partition_keys[1] is rejected by asset 'extract' (date)",
        "unknown field: ConfigurationError: unknown config field(s): partition_key",
        "empty run: extract skipped (no_partition_keys), 0 attempts",
        "empty run: load skipped (no_partition_keys), 0 attempts",
        "empty run: refresh_dashboard skipped (no_partition_keys), 1 attempts",
        "plan document contains the key: False",
    ],
    "partition_groups.py": [
        "groups: [{'assets': ['download', 'parse'], 'max_active_keys': 1}]",
        "task groups: {'download': 0, 'parse': 0}",
        "whole chain: ok",
        "partial selection: PlanningError: partition_groups[0]: members 'parse' are not in the planned closure",
        "not a direct chain: PlanningError: partition_groups[0]: member 'audit' does not directly depend",
        "leaves and re-enters: PlanningError: partition group 'parse'..'publish': a dependency path leaves",
        "overlapping groups: PlanningError: partition_groups[1]: asset 'download' already belongs",
        "declaration: DefinitionError: PartitionGroup max_active_keys must be at least 1",
    ],
    "cli_entries.py": ["factory flow: success 1008 visits"],
    "group_admission.py": [
        "start  extract_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "without the group, 2026-08-09 starts before 2026-08-08 is published: True",
        "retry  extract_daily 2026-08-08 in 5s",
        "start  extract_daily 2026-08-08 (invocation 2)",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "max_active_keys=2, keys in the chain at once: 2",
    ],
    "outcome_retry.py": [
        "run status: failed",
        "settlements 2026-08-08 success",
        "settlements 2026-08-09 failed",
        "settlements 2026-08-10 failed",
        "settlements 2026-08-11 skipped (resource_circuit_open)",
        "settlements 2026-08-12 skipped (resource_circuit_open)",
        "ledger 2026-08-09 skipped (dependency_failed)",
        "ledger 2026-08-12 skipped (dependency_failed)",
        "failed: ['2026-08-09', '2026-08-10']",
        "circuit skipped: ['2026-08-11', '2026-08-12']",
        "ledger circuit skipped: ()",
        "run status: success",
        "settlements 2026-08-09 success",
        "settlements 2026-08-12 success",
        "ledger 2026-08-12 success",
    ],
    "resource_policies.py": [
        "t=  0s start  berlin (invocation 1)",
        "t=  0s start  lisbon (invocation 1)",
        "t=  0s start  oslo (invocation 1)",
        "t=  0s retry  lisbon in 30s",
        "t= 30s start  rome (invocation 1)",
        "t= 30s finish rome failed",
        "t= 60s start  vienna (invocation 1)",
        "t= 60s start  zurich (invocation 1)",
        "t= 60s start  lisbon (invocation 2)",
        "t= 60s finish lisbon success",
        "run status: failed",
        "waits requested from the clock: [30.0, 30.0, 30.0]",
        "warehouse_api: 7 invocations, 5 succeeded, 2 failed",
        "retries scheduled: 1",
        "admission waits: 4, 60s in total",
    ],
    "retries_and_callbacks.py": [
        "backoff schedule: [1.0, 2.0, 3.0]",
        "on_complete run status failed, attempts {'success': 2, 'failed': 1}",
        "news success invocations: ['ok']",
        "sports success invocations: ['failed', 'failed', 'ok']",
        "weather failed invocations: ['failed', 'failed', 'failed', 'failed']",
        "failed keys: ('weather',)",
        "delays waited: [1.0, 1.0, 2.0, 2.0, 3.0]",
        "on_failure headlines weather gave up after invocation 4",
        "on_retry   headlines sports invocation 1 raised TimeoutError('feed server timed out')",
        "on_retry   headlines weather invocation 3 raised TimeoutError('feed server timed out')",
        "callback error: flow.on_failure builtins.RuntimeError the pager service is offline",
        "events: {'AttemptFinished': 3, 'AttemptRetrying': 5, 'AttemptStarted': 8, 'RunFinished': 1, 'RunStarted': 1}",
    ],
    "cancellation.py": [
        "run_async raised CancelledError",
        "run status: cancelled",
        "compress s1 success s1.gz",
        "compress s2 success s2.gz",
        "upload s1 cancelled reason: cancelled",
        "upload s2 cancelled reason: cancelled",
        "report - cancelled reason: cancelled",
    ],
    "executors.py": [
        "process executor: success total 1199996",
        "checksum bodies ran in this process: False",
        "unpicklable output: partita.errors.ExecutionError - asset 'lock_holder': "
        "its output cannot be sent back from the worker process",
        "custom executor: success total 1199996",
        "bodies submitted: {'checksum': 3, 'total': 1}",
    ],
    "terminal_assets.py": [
        "terminal assets: revenue, headcount",
        "run status: success revenue: [30, 60]",
    ],
}

# Every `partita ...` command shown in README.md and docs/*.md: exit code and
# substrings expected on stdout+stderr. Keys are the command as written.
CLI_COMMANDS: dict[str, tuple[int, list[str]]] = {
    # README
    "partita run examples/quickstart.py --partition-range 2026-08-08 2026-08-10 --yes": (
        0,
        ["daily_report", "status: success"],
    ),
    "partita partitions examples/readme_example.py": (0, ["raw_events", "YYYY-MM-DD"]),
    "partita plan examples/readme_example.py --partition-range 2026-08-08 2026-08-10": (
        0,
        ["selection: range in domain date, 3 keys", "attempts: 7"],
    ),
    "partita run examples/readme_example.py --partition-key 2026-08-08 --partition-key 2026-08-09 --yes": (
        0,
        ["status: success"],
    ),
    # docs/getting-started.md
    "partita partitions examples/first_asset.py": (0, ["daily_visits", "date", "YYYY-MM-DD"]),
    "partita plan examples/first_asset.py --partition-key 2026-08-08": (
        0,
        ["selection: keys in domain date, 1 key", "attempts: 1"],
    ),
    "partita plan examples/first_asset.py --partition-key 2026-08-08 --json": (0, ['"schema": "partita.plan"']),
    "partita run examples/first_asset.py --partition-key 2026-08-08 --yes": (0, ["status: success"]),
    "partita plan examples/first_asset.py": (2, ["select partitions with partition_keys"]),
    "partita plan examples/quickstart.py --partition-range 2026-08-08 2026-08-10": (
        0,
        ["exchange_rates", "attempts: 10"],
    ),
    # docs/partitions-and-selection.md
    "partita plan examples/first_asset.py --partition-key 2026-08-08 --partition-key 2026-08-09": (
        0,
        ["selection: keys in domain date, 2 keys"],
    ),
    "partita plan examples/first_asset.py --partition-range 2026-08-08 2026-08-14": (
        0,
        ["selection: range in domain date, 7 keys"],
    ),
    "partita plan examples/first_asset.py --empty-partitions": (0, ["deliberately empty"]),
    "partita plan examples/first_asset.py --partition-key 2025-12-31": (2, ["earlier than the definition's start"]),
    "partita plan examples/partition_groups.py --partition-key 2026-08-08 --partition-key 2026-08-09": (
        0,
        ["download", "parse", "attempts: 4"],
    ),
    # docs/execution.md
    "partita run examples/group_admission.py --partition-key 2026-08-08 --partition-key 2026-08-09 --yes": (
        0,
        ["extract_daily", "publish_daily", "status: success", "attempts: 4"],
    ),
    # docs/cli.md
    "partita --help": (0, ["assets", "partitions", "plan", "run"]),
    "partita run --help": (0, ["--partition-key", "--yes", "--json"]),
    "partita assets examples/quickstart.py": (0, ["orders", "exchange_rates", "daily_report"]),
    "partita assets examples/quickstart.py --target daily_summary": (0, ["daily_summary"]),
    "partita assets examples/terminal_assets.py": (0, ["revenue", "headcount"]),
    "partita partitions examples/quickstart.py --json": (0, ['"schema": "partita.partitions"']),
    "partita plan examples/cli_entries.py --partition-key 2026-08-08": (3, ["none named 'flow'"]),
    "partita plan examples/cli_entries.py:visits_flow --partition-key 2026-08-08": (0, ["visits", "attempts: 1"]),
    "partita plan examples/cli_entries.py:make_flow --partition-key 2026-08-08": (
        0,
        ["visit_summary", "max concurrency: 2"],
    ),
    "partita assets examples.cli_entries:summary_flow": (0, ["visit_summary"]),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --max-concurrency 2": (
        0,
        ["max concurrency: 2"],
    ),
    "partita plan examples/quickstart.py --partition-key 2026-8-8": (2, ["not canonical YYYY-MM-DD"]),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --empty-partitions": (
        2,
        ["choose exactly one selection form"],
    ),
    "partita plan examples/quickstart.py --partition-key 2026-08-08 --json": (0, ['"schema": "partita.plan"']),
    "partita run examples/quickstart.py --partition-key 2026-08-08": (2, ["pass --yes"]),
    "partita run examples/quickstart.py --partition-key 2026-08-08 --json": (2, ['"schema": "partita.error"']),
    "partita run examples/quickstart.py --partition-key 2026-08-08 --yes --json": (
        0,
        ['"schema": "partita.run-result"'],
    ),
    "partita assets examples/missing.py --json": (3, ['"schema": "partita.error"', "does not exist"]),
}


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["QUICKSTART_OUTPUT"] = str(tmp_path / "quickstart-out")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PARTITA_STORE", None)
    return env


def _partita_command() -> list[str]:
    script = Path(sys.executable).with_name("partita")
    return [str(script)] if script.exists() else [sys.executable, "-m", "partita"]


def _assert_in_order(output: str, expected: list[str]) -> None:
    position = 0
    for line in expected:
        found = output.find(line, position)
        assert found >= 0, f"missing (in order): {line!r}\n--- output ---\n{output}"
        position = found + len(line)


def _example_files() -> list[str]:
    return sorted(path.name for path in EXAMPLES.glob("*.py"))


def test_every_example_has_expected_output():
    assert sorted(EXPECTED_OUTPUT) == _example_files()


@pytest.mark.parametrize("name", _example_files())
def test_example_runs_as_a_script(name: str, tmp_path: Path):
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    _assert_in_order(completed.stdout, EXPECTED_OUTPUT.get(name, []))


def _example_output(name: str, tmp_path: Path) -> list[str]:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def test_group_admission_moves_one_key_through_the_whole_chain_before_the_next(tmp_path: Path):
    lines = _example_output("group_admission.py", tmp_path)
    assert lines[:8] == [
        "start  extract_daily 2026-08-08",
        "finish extract_daily 2026-08-08 success",
        "start  publish_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
        "start  extract_daily 2026-08-09",
        "finish extract_daily 2026-08-09 success",
        "start  publish_daily 2026-08-09",
        "finish publish_daily 2026-08-09 success",
    ]
    # A key waiting for a retry keeps its group slot: the next key starts only afterwards.
    retried = lines[lines.index("without the group, 2026-08-09 starts before 2026-08-08 is published: True") + 1 :]
    assert retried[:6] == [
        "start  extract_daily 2026-08-08",
        "retry  extract_daily 2026-08-08 in 5s",
        "start  extract_daily 2026-08-08 (invocation 2)",
        "finish extract_daily 2026-08-08 success",
        "start  publish_daily 2026-08-08",
        "finish publish_daily 2026-08-08 success",
    ]
    assert retried[6] == "start  extract_daily 2026-08-09"


def test_outcome_retry_reruns_exactly_the_failed_and_circuit_skipped_keys(tmp_path: Path):
    lines = _example_output("outcome_retry.py", tmp_path)
    second = lines[lines.index("run status: success") + 1 :]
    assert [line.split()[:2] for line in second] == [
        [asset_name, day]
        for asset_name in ("settlements", "ledger")
        for day in ("2026-08-09", "2026-08-10", "2026-08-11", "2026-08-12")
    ]
    assert all(line.endswith(" success") for line in second)


def _documented_commands() -> list[tuple[Path, str]]:
    found = []
    for document in DOCUMENTS:
        in_shell_block = False
        for line in document.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith("```"):
                in_shell_block = not in_shell_block and stripped in ("```bash", "```console", "```sh")
                continue
            if not in_shell_block:
                continue
            match = re.search(r"(?:^|/)partita\s+(.*)$", stripped.removeprefix("$ "))
            if match:
                found.append((document, "partita " + " ".join(match.group(1).split())))
    return found


def test_every_documented_command_is_tested():
    documented = _documented_commands()
    assert documented, "no partita commands found in README.md or docs/"
    untested = sorted({f"{path.name}: {command}" for path, command in documented if command not in CLI_COMMANDS})
    assert not untested, "commands shown in the docs but not tested here:\n" + "\n".join(untested)
    shown = {command for _, command in documented}
    stale = sorted(command for command in CLI_COMMANDS if command not in shown)
    assert not stale, "commands tested here but no longer shown in the docs:\n" + "\n".join(stale)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "examples").symlink_to(EXAMPLES, target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize("command", sorted(CLI_COMMANDS))
def test_documented_command(command: str, workdir: Path):
    expected_code, expected_text = CLI_COMMANDS[command]
    arguments = command.split()[1:]
    completed = subprocess.run(
        [*_partita_command(), *arguments],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == expected_code, output
    _assert_in_order(output, expected_text)
    if "--json" in arguments and "--help" not in arguments:
        document = json.loads(completed.stdout)  # exactly one document on stdout
        assert document["version"] == 1


def test_quickstart_range_writes_one_report_per_day(workdir: Path):
    command = "partita run examples/quickstart.py --partition-range 2026-08-08 2026-08-10 --yes"
    completed = subprocess.run(
        [*_partita_command(), *command.split()[1:]],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    reports = sorted(path.name for path in (workdir / "quickstart-out").glob("*.csv"))
    assert reports == ["report-2026-08-08.csv", "report-2026-08-09.csv", "report-2026-08-10.csv"]
    header = (workdir / "quickstart-out" / reports[0]).read_text().splitlines()[0]
    assert header == "product,units,revenue_eur"


def test_run_json_document_carries_no_raw_keys(workdir: Path):
    completed = subprocess.run(
        [*_partita_command(), "run", "examples/first_asset.py", "--partition-key", "2026-08-08", "--yes", "--json"],
        cwd=workdir,
        env=_environment(workdir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["schema"] == "partita.run-result"
    assert document["plan"]["schema"] == "partita.plan"
    assert document["result"]["selection"] == {"kind": "keys", "domain": "date", "key_count": 1}
    assert "2026-08-08" not in completed.stdout


def _python_blocks(document: Path) -> list[tuple[str, str]]:
    """(example file named before the block, block text) for each python block."""
    text = document.read_text()
    blocks = []
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL):
        before = text[: match.start()]
        named = re.findall(r"examples/(\w+\.py)", before)
        blocks.append((named[-1] if named else "", match.group(1)))
    return blocks


def _chunks(block: str) -> list[list[str]]:
    """Split a block at elision lines (`# ...`) into dedented line runs."""
    chunks: list[list[str]] = [[]]
    for line in block.splitlines():
        if line.strip() in ("# ...", "..."):
            chunks.append([])
        else:
            chunks[-1].append(line)
    result = []
    for chunk in chunks:
        while chunk and not chunk[0].strip():
            chunk.pop(0)
        while chunk and not chunk[-1].strip():
            chunk.pop()
        if chunk:
            result.append(textwrap.dedent("\n".join(chunk)).splitlines())
    return result


def _contains_run(source: list[str], run: list[str]) -> bool:
    for start in range(len(source) - len(run) + 1):
        window = textwrap.dedent("\n".join(source[start : start + len(run)])).splitlines()
        if window == run:
            return True
    return False


@pytest.mark.parametrize("document", sorted((REPO / "docs").glob("*.md")), ids=lambda path: path.name)
def test_python_blocks_in_docs_are_excerpts_of_examples(document: Path):
    blocks = _python_blocks(document)
    for named, block in blocks:
        assert named, f"{document.name}: a python block is not preceded by the examples/ file it shows"
        source = (EXAMPLES / named).read_text().splitlines()
        for run in _chunks(block):
            assert _contains_run(source, run), (
                f"{document.name}: block is not an excerpt of examples/{named}:\n" + "\n".join(run)
            )
