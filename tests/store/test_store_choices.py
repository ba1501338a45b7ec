"""Store choices that used to lose history silently (SPEC §1.4, §6, §12, §13).

A command that records history refuses a store where nothing would persist
(in memory) or nothing may be written (``?mode=ro``); readers honour
``?mode=ro`` and read a store on a read-only filesystem; an empty file is
not a store; pausing names a flow that exists; ``plan --pending`` creates
nothing and takes no selection of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import partita
from partita.cli.main import cli
from partita.errors import StoreError
from partita.store import open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BATCH_VALIDATION = str(EXAMPLES / "batch_validation.py")
IN_MEMORY = ["sqlite://", "sqlite:///", "sqlite:///:memory:"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTITA_STORE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def entry(tmp_path: Path) -> Path:
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


def _body_ran(tmp_path: Path) -> bool:
    return (tmp_path / "ran").exists()


@pytest.fixture
def recorded_store(tmp_path: Path, entry: Path) -> Path:
    """A store file holding one recorded run."""
    path = tmp_path / "stores" / "partita.db"
    result = _cli("run", str(entry), "--yes", "--store", f"sqlite:///{path}")
    assert result.exit_code == 0, result.output
    (tmp_path / "ran").unlink()
    return path


@pytest.mark.parametrize("url", IN_MEMORY)
def test_run_refuses_an_in_memory_store_before_any_body_runs(tmp_path: Path, entry: Path, url: str):
    result = _cli("run", str(entry), "--yes", "--store", url)
    assert result.exit_code == 2, result.output
    assert "in-memory" in result.output
    assert "recorded as run" not in result.output
    assert not _body_ran(tmp_path)


@pytest.mark.parametrize("url", IN_MEMORY)
def test_events_emit_refuses_an_in_memory_store(entry: Path, url: str):
    result = _cli("events", "emit", "body", str(entry), "--store", url, "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["type"] == "ConfigurationError"


def test_readers_honour_mode_ro_and_leave_the_file_unchanged(recorded_store: Path):
    before = recorded_store.read_bytes()
    url = f"sqlite:///{recorded_store}?mode=ro"
    for command in (("runs", "list"), ("events", "list")):
        result = _cli(*command, "--store", url, "--json")
        assert result.exit_code == 0, result.output
    assert len(json.loads(_cli("runs", "list", "--store", url, "--json").stdout)["runs"]) == 1
    assert recorded_store.read_bytes() == before


def test_run_refuses_a_mode_ro_store_before_any_body_runs(tmp_path: Path, entry: Path, recorded_store: Path):
    before = recorded_store.read_bytes()
    result = _cli("run", str(entry), "--yes", "--store", f"sqlite:///{recorded_store}?mode=ro")
    assert result.exit_code == 2, result.output
    assert "mode=ro" in result.output
    assert not _body_ran(tmp_path)
    assert recorded_store.read_bytes() == before


def test_a_mode_ro_store_opened_in_python_reads_and_refuses_writes(recorded_store: Path):
    before = recorded_store.read_bytes()
    url = f"sqlite:///{recorded_store}?mode=ro"
    registry = partita.AssetRegistry()
    ran: list[int] = []

    @partita.asset(registry=registry)
    def body() -> int:
        ran.append(1)
        return 1

    store = open_store(url)
    try:
        assert len(store.list_runs()) == 1
    finally:
        store.close()
    with pytest.raises(StoreError, match="read-only") as caught:
        partita.Flow(["body"], registry=registry, store=url).run()
    assert caught.value.exit_code == 4
    assert ran == []
    assert recorded_store.read_bytes() == before


def test_a_mode_ro_url_for_a_missing_store_creates_nothing(tmp_path: Path):
    path = tmp_path / "missing.db"
    assert _cli("runs", "list", "--store", f"sqlite:///{path}?mode=ro").exit_code == 0
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{path}?mode=ro")
    assert not path.exists()


def test_an_unknown_sqlite_url_option_is_refused_instead_of_ignored(entry: Path, tmp_path: Path):
    result = _cli("run", str(entry), "--yes", "--store", f"sqlite:///{tmp_path}/h.db?mode=rwc")
    assert result.exit_code == 2, result.output
    result = _cli("runs", "list", "--store", f"sqlite:///{tmp_path}/h.db?journal=off")
    assert result.exit_code == 2, result.output
    assert "'journal' is not supported" in result.output


def test_a_zero_byte_store_file_is_a_store_error_and_stays_untouched(tmp_path: Path, entry: Path):
    path = tmp_path / "empty.db"
    path.touch()
    for command in (("run", str(entry), "--yes"), ("runs", "list"), ("events", "emit", "body", str(entry))):
        result = _cli(*command, "--store", f"sqlite:///{path}")
        assert result.exit_code == 4, result.output
        assert "empty (0 bytes)" in result.output
    assert not _body_ran(tmp_path)
    assert path.stat().st_size == 0


def test_a_new_store_is_never_visible_as_an_empty_file(tmp_path: Path):
    # Created under a temporary name and linked into place: concurrent openers never see 0 bytes.
    path = tmp_path / "fresh.db"
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.created
        assert path.stat().st_size > 0
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".new")) == []
    finally:
        store.close()


_READ_ONLY_FILESYSTEM = """
set -e
mount -t tmpfs -o size=8m tmpfs "$1"
cp "$2" "$1/partita.db"
if [ -e "$2-wal" ]; then cp "$2-wal" "$1/partita.db-wal"; cp "$2-shm" "$1/partita.db-shm"; fi
mount -o remount,ro "$1"
shift 2
exec "$@"
"""


def _on_read_only_filesystem(mount_point: Path, store: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with ``store`` copied to ``mount_point``/partita.db, a read-only tmpfs in a private mount namespace."""
    mount_point.mkdir(parents=True, exist_ok=True)
    script = ["unshare", "-m", "sh", "-c", _READ_ONLY_FILESYSTEM, "sh", str(mount_point), str(store), *command]
    return subprocess.run(script, capture_output=True, text=True, timeout=120, check=False)


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs root and unshare to mount a read-only filesystem")
@pytest.mark.parametrize("with_wal", [False, True], ids=["checkpointed", "with-write-ahead-log"])
def test_a_store_on_a_read_only_filesystem_can_be_listed(tmp_path: Path, recorded_store: Path, entry: Path, with_wal):
    if with_wal:
        # Leave committed transactions in the write-ahead log, as a running writer would.
        import sqlite3

        keep = sqlite3.connect(recorded_store)
        keep.execute("PRAGMA wal_autocheckpoint = 0")
        keep.execute("UPDATE partita_runs SET heartbeat_at = heartbeat_at + 1")
        keep.commit()
        assert Path(f"{recorded_store}-wal").stat().st_size > 0
    mount_point = tmp_path / "readonly"
    url = f"sqlite:///{mount_point}/partita.db"
    partita_cli = [sys.executable, "-m", "partita"]
    listed = _on_read_only_filesystem(mount_point, recorded_store, *partita_cli, "runs", "list", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["runs"]) == 1
    run = _on_read_only_filesystem(mount_point, recorded_store, *partita_cli, "run", str(entry), "--yes", "--store", url)
    assert run.returncode == 4, run.stderr
    assert "read-only" in run.stderr
    assert "Traceback" not in run.stderr
    assert not _body_ran(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_a_store_without_write_permission_can_be_listed(recorded_store: Path):
    folder = recorded_store.parent
    for wal in folder.glob("*-wal"):
        wal.unlink()
    recorded_store.chmod(0o444)
    folder.chmod(0o555)
    try:
        result = _cli("runs", "list", "--store", f"sqlite:///{recorded_store}", "--json")
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.stdout)["runs"]) == 1
    finally:
        folder.chmod(0o755)
        recorded_store.chmod(0o644)


def test_pausing_a_flow_no_entry_or_store_knows_is_an_error(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/triggers.db"
    result = _cli("flows", "pause", "no_such_flow", "--store", url, "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["type"] == "ConfigurationError"
    assert not (tmp_path / "triggers.db").exists()  # nothing was created to find out
    result = _cli("flows", "pause", "no_such_flow", "--entry", BATCH_VALIDATION, "--store", url)
    assert result.exit_code == 2, result.output
    assert "validate_batches" in result.output  # the flows the entry does define


def test_a_flow_is_paused_by_entry_then_resumed_by_name_once_the_store_knows_it(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/triggers.db"
    assert _cli("flows", "pause", "validate_batches", "--entry", BATCH_VALIDATION, "--store", url).exit_code == 0
    result = _cli("flows", "resume", "validate_batches", "--store", url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["paused"] is False


def test_plan_pending_creates_no_store(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/pending.db"
    result = _cli("plan", BATCH_VALIDATION, "--pending", "--store", url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["flows"][0]["would_start"] == []
    assert not (tmp_path / "pending.db").exists()


@pytest.mark.parametrize(
    "selection",
    [
        ["--partition-key", "41"],
        ["--partition-range", "41", "42"],
        ["--empty-partitions"],
        ["--target", "batch"],
        ["--max-concurrency", "2"],
    ],
)
def test_plan_pending_refuses_selection_options_instead_of_ignoring_them(tmp_path: Path, selection: list[str]):
    result = _cli("plan", BATCH_VALIDATION, "--pending", *selection, "--store", f"sqlite:///{tmp_path}/p.db")
    assert result.exit_code == 2, result.output
    assert "cannot be combined with it" in result.output
