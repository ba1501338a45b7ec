"""Bad store input and store faults (SPEC §1.4, §6, §13).

Each fault gives a clear error — `ConfigurationError` (exit 2) for a bad
URL, `StoreError` (exit 4) for a store that cannot be used — before any
asset body runs, and leaves an existing file exactly as it was. SQLite runs
in WAL mode with a busy timeout: a reader never waits for a writer, and a
writer waits for another writer instead of failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import partita
from partita.cli.main import cli
from partita.errors import ConfigurationError, DefinitionError, StoreError
from partita.store import open_store
from partita.store.checkpointer import WAL_RESET_FIXED
from partita.store.host_lock import lock_file_of

DEADLINE_SECONDS = 30.0
UNREACHABLE_POSTGRES = "postgresql://partita@127.0.0.1:1/x"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


def _cli(*args: str, **kwargs: Any) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


@pytest.fixture
def entry(tmp_path: Path) -> Path:
    """An entry file whose body leaves a marker file when it runs."""
    path = tmp_path / "entry.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import pathlib
            from partita import asset

            @asset
            def body():
                pathlib.Path({str(tmp_path / "ran")!r}).write_text("ran")
                return 1
            """
        )
    )
    return path


@pytest.fixture
def body_ran(tmp_path: Path) -> Callable[[], bool]:
    return lambda: (tmp_path / "ran").exists()


def _python_flow(store: Any) -> tuple[partita.Flow, list[int]]:
    registry = partita.AssetRegistry()
    ran: list[int] = []

    @partita.asset(registry=registry)
    def body() -> int:
        ran.append(1)
        return 1

    return partita.Flow(["body"], registry=registry, store=store), ran


def _record_runs(url: str, count: int = 1) -> list[str]:
    return [_python_flow(url)[0].run().run_id for _ in range(count)]


def _wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


#: A written store's folder once it is closed: the file, and the writers' lock file where SQLite has the
#: WAL-reset bug (`host_lock`).
_CLOSED_STORE_FILES = {"partita.db"} | (set() if WAL_RESET_FIXED else {lock_file_of("partita.db")})


def _listing(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


# -- bad URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["mysql://user@localhost/db", "foo://bar", "http://example.com/store", "not a url", "", "sqlite3:///x.db"],
)
def test_an_unusable_store_url_is_a_configuration_error(url):
    with pytest.raises(ConfigurationError) as caught:
        open_store(url)
    assert caught.value.exit_code == 2
    assert "sqlite:///" in str(caught.value)


def test_an_unknown_scheme_names_the_scheme():
    with pytest.raises(ConfigurationError, match="'mysql'"):
        open_store("mysql://user@localhost/db")


def test_the_python_api_refuses_an_unknown_scheme_before_any_body_runs():
    flow, ran = _python_flow("mysql://user@localhost/db")

    with pytest.raises(ConfigurationError, match="not supported"):
        flow.run()
    assert ran == []


def test_a_store_that_is_not_a_url_or_store_is_a_definition_error():
    with pytest.raises(DefinitionError, match="store"):
        partita.Flow(["x"], registry=partita.AssetRegistry(), store=42)


@pytest.mark.parametrize("url", ["mysql://user@localhost/db", "foo://bar", "not a url"])
def test_the_cli_exits_2_for_an_unusable_store_url(url, entry, body_ran, tmp_path):
    for args in (
        ["run", str(entry), "--yes", "--store", url],
        ["runs", "list", "--store", url],
        ["runs", "show", "abcd1234", "--store", url],
        ["runs", "compare", "abcd1234", "abcd5678", "--store", url],
    ):
        result = _cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "store URL" in result.stderr
        assert "Traceback" not in result.output
    assert not body_ran()
    assert not (tmp_path / ".partita").exists()


def test_the_cli_exits_2_for_an_unusable_partita_store(entry, body_ran, monkeypatch):
    monkeypatch.setenv("PARTITA_STORE", "mysql://user@localhost/db")

    assert _cli("run", str(entry), "--yes").exit_code == 2
    assert _cli("runs", "list").exit_code == 2
    result = _cli("runs", "list", "--json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["schema"] == "partita.error"
    assert document["error"]["type"] == "ConfigurationError"
    assert document["error"]["exit_code"] == 2
    assert not body_ran()


# -- unreachable PostgreSQL ------------------------------------------------------------


def test_an_unreachable_postgresql_is_a_store_error():
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        open_store(UNREACHABLE_POSTGRES)
    assert caught.value.exit_code == 4
    assert "127.0.0.1" in str(caught.value)
    assert time.monotonic() - started < 20


def test_an_unreachable_postgresql_error_never_shows_the_password():
    url = "postgresql://partita:hunter2-very-secret@127.0.0.1:1/x"
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert "hunter2-very-secret" not in str(caught.value)

    result = _cli("runs", "list", "--store", url)
    assert result.exit_code == 4
    assert "hunter2-very-secret" not in result.output


def test_the_python_api_refuses_an_unreachable_postgresql_before_any_body_runs():
    flow, ran = _python_flow(UNREACHABLE_POSTGRES)

    with pytest.raises(StoreError):
        flow.run()
    assert ran == []


def test_the_cli_exits_4_for_an_unreachable_postgresql(entry, body_ran):
    for args in (
        ["run", str(entry), "--yes", "--store", UNREACHABLE_POSTGRES],
        ["run", str(entry), "--yes", "--json", "--store", UNREACHABLE_POSTGRES],
        ["runs", "list", "--store", UNREACHABLE_POSTGRES],
        ["runs", "show", "abcd1234", "--store", UNREACHABLE_POSTGRES],
    ):
        result = _cli(*args)
        assert result.exit_code == 4, (args, result.output)
        assert "cannot open" in result.stderr
        assert "Traceback" not in result.output
    assert not body_ran()


# -- corrupt SQLite file ---------------------------------------------------------------


@pytest.fixture(params=["random-bytes", "damaged-pages", "truncated"])
def corrupt_store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    folder = tmp_path / "stores"
    folder.mkdir()
    path = folder / "partita.db"
    if request.param == "random-bytes":
        path.write_bytes(os.urandom(64 * 1024))
    else:
        _record_runs(f"sqlite:///{path}", 3)
        valid = path.read_bytes()
        assert valid.startswith(b"SQLite format 3\x00")
        if request.param == "damaged-pages":
            path.write_bytes(valid[:100] + os.urandom(len(valid) - 100))
        else:
            path.write_bytes(valid[: len(valid) // 3])
    assert _listing(folder).keys() == ({"partita.db"} if request.param == "random-bytes" else _CLOSED_STORE_FILES)
    return path


def test_a_corrupt_sqlite_file_is_a_store_error_and_is_not_touched(corrupt_store):
    before = _listing(corrupt_store.parent)

    with pytest.raises(StoreError) as caught:
        open_store(f"sqlite:///{corrupt_store}")

    assert caught.value.exit_code == 4
    assert "not a SQLite database or is corrupt" in str(caught.value)
    assert str(corrupt_store) in str(caught.value)
    assert _listing(corrupt_store.parent) == before


def test_the_python_api_refuses_a_corrupt_sqlite_file_before_any_body_runs(corrupt_store):
    before = _listing(corrupt_store.parent)
    flow, ran = _python_flow(f"sqlite:///{corrupt_store}")

    with pytest.raises(StoreError):
        flow.run()
    assert ran == []
    assert _listing(corrupt_store.parent) == before


def test_the_cli_exits_4_for_a_corrupt_sqlite_file(corrupt_store, entry, body_ran, monkeypatch):
    before = _listing(corrupt_store.parent)
    url = f"sqlite:///{corrupt_store}"

    for args in (
        ["run", str(entry), "--yes", "--store", url],
        ["runs", "list", "--store", url],
        ["runs", "list", "--json", "--store", url],
        ["runs", "show", "abcd1234", "--store", url],
        ["runs", "compare", "abcd1234", "abcd5678", "--store", url],
    ):
        result = _cli(*args)
        assert result.exit_code == 4, (args, result.output)
        assert "corrupt" in result.stderr
        assert "Traceback" not in result.output
    monkeypatch.setenv("PARTITA_STORE", url)
    assert _cli("run", str(entry), "--yes").exit_code == 4
    assert not body_ran()
    assert _listing(corrupt_store.parent) == before


# -- read-only SQLite file --------------------------------------------------------------


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A valid store with recorded runs that this process cannot write.

    chmod 0444 is enough for a normal user. Root ignores permission bits, so
    as root the file is also made immutable (``chattr +i``), which binds root
    too; where that is impossible the test is skipped rather than pretending.
    """
    folder = tmp_path / "stores"
    folder.mkdir()
    path = folder / "partita.db"
    run_ids = _record_runs(f"sqlite:///{path}", 2)
    assert _listing(folder).keys() == _CLOSED_STORE_FILES  # closed cleanly: WAL checkpointed
    path.chmod(0o444)
    immutable = False
    try:
        try:
            with path.open("ab"):
                pass
        except PermissionError:
            pass
        else:  # running as root
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
            if done.returncode != 0:
                pytest.skip("running as root and chattr +i is unavailable: a read-only file cannot be made")
            immutable = True
            with pytest.raises(PermissionError):
                path.open("ab")
        yield path, run_ids
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        path.chmod(0o644)


def test_a_read_only_store_can_still_be_read(read_only_store):
    path, run_ids = read_only_store
    before = path.read_bytes()

    store = open_store(f"sqlite:///{path}")
    try:
        assert [run.run_id for run in store.list_runs()] == run_ids[::-1]
        assert store.get_run(run_ids[0]).status == "success"
    finally:
        store.close()
    assert path.read_bytes() == before


def test_recording_into_a_read_only_store_is_a_clear_store_error(read_only_store):
    path, run_ids = read_only_store
    before = path.read_bytes()
    flow, ran = _python_flow(f"sqlite:///{path}")

    with pytest.raises(StoreError, match="read-only") as caught:
        flow.run()

    assert caught.value.exit_code == 4
    assert ran == []
    assert path.read_bytes() == before


def test_the_cli_exits_4_for_a_read_only_store_and_overwrites_nothing(read_only_store, entry, body_ran):
    path, run_ids = read_only_store
    before = path.read_bytes()
    url = f"sqlite:///{path}"

    result = _cli("run", str(entry), "--yes", "--store", url)
    assert result.exit_code == 4, result.output
    assert "read-only" in result.stderr
    assert "Traceback" not in result.output
    assert not body_ran()
    assert path.read_bytes() == before

    listed = _cli("runs", "list", "--json", "--store", url)
    assert listed.exit_code == 0, listed.output
    assert [run["run_id"] for run in json.loads(listed.stdout)["runs"]] == run_ids[::-1]
    assert path.read_bytes() == before


# -- a directory where the file should be --------------------------------------------------


def test_a_directory_where_the_store_file_should_be_is_a_store_error(tmp_path):
    folder = tmp_path / "partita.db"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")

    with pytest.raises(StoreError, match="is a directory") as caught:
        open_store(f"sqlite:///{folder}")
    assert caught.value.exit_code == 4

    flow, ran = _python_flow(f"sqlite:///{folder}")
    with pytest.raises(StoreError, match="is a directory"):
        flow.run()
    assert ran == []
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


def test_the_cli_exits_4_when_the_default_store_path_is_a_directory(tmp_path, entry, body_ran):
    (tmp_path / ".partita" / "partita.db").mkdir(parents=True)

    for args in (["run", str(entry), "--yes"], ["runs", "list"], ["runs", "list", "--json"]):
        result = _cli(*args)
        assert result.exit_code == 4, (args, result.output)
        assert "is a directory" in result.stderr
    assert not body_ran()
    assert list((tmp_path / ".partita" / "partita.db").iterdir()) == []


def test_the_cli_exits_4_when_the_default_store_folder_is_a_file(tmp_path, entry, body_ran):
    (tmp_path / ".partita").write_text("not a folder")

    result = _cli("run", str(entry), "--yes")

    assert result.exit_code == 4, result.output
    assert ".partita" in result.stderr
    assert not body_ran()
    assert (tmp_path / ".partita").read_text() == "not a folder"


# -- WAL, busy timeout, readers and writers -------------------------------------------------


def test_sqlite_stores_use_wal_mode_and_a_busy_timeout(tmp_path):
    path = tmp_path / "partita.db"
    store = open_store(f"sqlite:///{path}")
    try:
        with store._engine.connect() as connection:  # the store's own connection settings
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    finally:
        store.close()
    with sqlite3.connect(path) as other:  # WAL is a property of the file
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()


class _WriteLockHolder:
    """Another connection holding SQLite's write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, path: Path, *, insert_run: bool = False) -> None:
        self.path = path
        self.insert_run = insert_run
        self.locked = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        try:
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=DEADLINE_SECONDS)
            try:
                connection.execute("BEGIN IMMEDIATE")
                if self.insert_run:
                    connection.execute(
                        "INSERT INTO partita_runs (run_id, status, started_at, targets, selection_kind, key_count, "
                        "attempt_count, plan, record_partition_keys, owner_host, owner_pid, owner_token, heartbeat_at) "
                        "VALUES ('uncommitted0000', 'running', 1e10, '[]', 'none', 0, 0, '{}', 0, 'h', 1, '', 1e10)"
                    )
                self.locked.set()
                assert self.release.wait(DEADLINE_SECONDS * 2)
                connection.execute("ROLLBACK")
            finally:
                connection.close()
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            self.error = exc
            self.locked.set()

    def __enter__(self) -> _WriteLockHolder:
        self.thread.start()
        assert self.locked.wait(DEADLINE_SECONDS)
        assert self.error is None, self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(DEADLINE_SECONDS)
        assert self.error is None, self.error


def test_a_reader_does_not_wait_for_a_writer_holding_the_write_lock(tmp_path):
    path = tmp_path / "partita.db"
    url = f"sqlite:///{path}"
    run_ids = _record_runs(url, 2)

    with _WriteLockHolder(path, insert_run=True):
        started = time.monotonic()
        store = open_store(url)
        try:
            assert [run.run_id for run in store.list_runs()] == run_ids[::-1]
            assert store.get_run(run_ids[0]).status == "success"
            assert [t.asset for t in store.get_tasks(run_ids[0])] == ["body"]
        finally:
            store.close()
        listed = _cli("runs", "list", "--json", "--store", url)
        shown = _cli("runs", "show", run_ids[1], "--json", "--store", url)
        elapsed = time.monotonic() - started

    assert listed.exit_code == 0, listed.output
    assert [run["run_id"] for run in json.loads(listed.stdout)["runs"]] == run_ids[::-1]
    assert shown.exit_code == 0, shown.output
    assert elapsed < 5.0  # far below the 30 s busy timeout: nobody waited for the lock


def test_a_reader_holding_a_snapshot_does_not_block_a_running_flow(tmp_path):
    path = tmp_path / "partita.db"
    url = f"sqlite:///{path}"
    _record_runs(url, 1)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM partita_runs").fetchone() == (1,)

        run_ids = _record_runs(url, 2)  # writes while the read transaction is open

        assert reader.execute("SELECT count(*) FROM partita_runs").fetchone() == (1,)  # its snapshot
        reader.execute("COMMIT")
        assert reader.execute("SELECT count(*) FROM partita_runs").fetchone() == (3,)
    finally:
        reader.close()
    store = open_store(url)
    try:
        assert [run.run_id for run in store.list_runs(limit=2)] == run_ids[::-1]
    finally:
        store.close()


def test_a_writer_waits_for_another_writer_instead_of_failing(tmp_path):
    path = tmp_path / "partita.db"
    url = f"sqlite:///{path}"
    _record_runs(url, 1)
    flow, ran = _python_flow(url)
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(flow.run()))

    with _WriteLockHolder(path):
        runner.start()
        runner.join(0.5)
        assert runner.is_alive()  # waiting on the lock, not failed with "database is locked"
        assert ran == []  # the run's start is recorded before any body runs
    runner.join(DEADLINE_SECONDS)

    assert not runner.is_alive()
    assert results and results[0].status is partita.RunStatus.SUCCESS
    assert ran == [1]
    store = open_store(url)
    try:
        assert store.get_run(results[0].run_id).status == "success"
    finally:
        store.close()


_WRITER = """
import pathlib, sys, time
import partita

name, url, folder = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
other = "right" if name == "left" else "left"
registry = partita.AssetRegistry()

@partita.asset(partition_def=partita.DatePartitionDef(), registry=registry, name=name)
def body(context):
    if context.partition_key.day == 1 and context.partition_key.month == 1:
        (folder / f"{name}.ready").write_text("")
        deadline = time.monotonic() + 60
        while not (folder / f"{other}.ready").exists():  # both runs are in progress at once
            if time.monotonic() > deadline:
                raise TimeoutError("the other writer never started")
            time.sleep(0.01)
    return 1

result = partita.Flow([name], registry=registry, store=url).run({"partition_range": ("2026-01-01", "2026-06-30")})
print(result.run_id)
sys.exit(0 if result.status is partita.RunStatus.SUCCESS else 1)
"""


def test_two_processes_write_one_sqlite_store_at_once(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    url = f"sqlite:///{tmp_path}/partita.db"
    env = {key: value for key, value in os.environ.items() if key != "PARTITA_STORE"}
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), name, url, str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("left", "right")
    ]
    outputs = []
    for process in processes:
        try:
            stdout, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, stderr
        outputs.append(stdout.strip())

    store = open_store(url)
    try:
        assert {run.run_id for run in store.list_runs()} == set(outputs)
        for run_id in outputs:
            run = store.get_run(run_id)
            assert run.status == "success"
            assert run.counts == {"success": 181}
            assert [len(t.attempts) for t in store.get_tasks(run_id)] == [181]
    finally:
        store.close()
