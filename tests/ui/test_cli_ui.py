"""``partita ui`` end to end: a real process on a free port, real signals, and its bad inputs' exit codes."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from partita.store import open_store

from .support import ENTRY, TOKEN

START_SECONDS = 30.0


class UiProcess:
    """``partita ui`` as a child process; its stderr lines arrive on a queue as they are printed."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "partita", "ui", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, starting: str, deadline: float = START_SECONDS) -> str:
        """The next stderr line that starts with ``starting`` (fails at end of output or after ``deadline``)."""
        end = time.monotonic() + deadline
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line starting {starting!r} within {deadline:g} s; saw {self.seen}") from None
            if line is None:
                raise AssertionError(f"output ended without a line starting {starting!r}; saw {self.seen}")
            self.seen.append(line)
            if line.startswith(starting):
                return line

    def url(self) -> str:
        """The printed base address, once the server answers there (a signal before that stops the start-up)."""
        url = self.line("partita ui: http").split()[2].rstrip("/")
        assert _get(f"{url}/login")[0] == 200
        return url

    def rest(self) -> str:
        """Everything printed after the process ended."""
        self.process.wait(START_SECONDS)
        while (line := self.lines.get(timeout=START_SECONDS)) is not None:
            self.seen.append(line)
        return "\n".join(self.seen)

    def stop(self, number: signal.Signals) -> int:
        self.process.send_signal(number)
        return self.process.wait(START_SECONDS)


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """A child environment without the caller's store or token, and a configuration folder of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARTITA_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["PARTITA_UI_TOKEN"] = TOKEN
    return env


@pytest.fixture
def start(environment: dict[str, str], tmp_path: Path) -> Iterator[object]:
    started: list[UiProcess] = []

    def run(*args: str, env: dict[str, str] | None = None) -> UiProcess:
        process = UiProcess([ENTRY, *args], env if env is not None else environment, tmp_path)
        started.append(process)
        return process

    yield run
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait()


def _get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _post(url: str, body: dict[str, object] | None = None) -> tuple[int, dict[str, object]]:
    data = json.dumps(body or {}).encode()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_partita_ui_serves_until_a_signal_stops_it_with_exit_0(start, tmp_path: Path, number: signal.Signals) -> None:
    store = tmp_path / "new" / "partita.db"
    ui = start("--store", f"sqlite:///{store}", "--port", "0")
    url = ui.url()
    assert ui.line("token: the value of PARTITA_UI_TOKEN")
    assert store.exists()  # a store that does not exist yet is created, as partita run creates it
    status, page = _get(f"{url}/")
    assert status in (200, 404)  # the overview page belongs to another part of the UI
    assert _get(f"{url}/login")[0] == 200
    status, body = _get(f"{url}/api/v1/runs")
    assert status == 200 and json.loads(body)["schema"] == "partita.runs"
    assert ui.stop(number) == 0
    output = ui.rest()
    assert "partita ui: stopped (0 runs launched here cancelled)" in output and "Traceback" not in output


def test_stopping_partita_ui_cancels_the_runs_it_launched_and_records_them(
    start, environment: dict[str, str], tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    store_url = f"sqlite:///{tmp_path}/partita.db"
    ui = start("--store", store_url, "--port", "0", env={**environment, "PARTITA_TEST_HOLD": str(hold)})
    url = ui.url()
    status, planned = _post(f"{url}/api/v1/plans", {"partition_keys": ["2026-08-01"]})
    assert status == 201, planned
    status, started = _post(f"{url}/api/v1/plans/{planned['plan_id']}/run")
    assert status == 202, started
    run_id = started["run"]["run_id"]  # type: ignore[index]
    assert ui.stop(signal.SIGTERM) == 0
    assert "partita ui: stopped (1 run launched here cancelled)" in ui.rest()
    store = open_store(store_url)
    try:
        assert store.get_run(run_id).status == "cancelled"
    finally:
        store.close()


def test_a_read_only_server_says_so_and_refuses_changes(start, tmp_path: Path) -> None:
    ui = start("--store", f"sqlite:///{tmp_path}/partita.db", "--port", "0", "--read-only")
    url = ui.url()
    assert ui.line("read-only: nothing can be changed")
    status, body = _post(f"{url}/api/v1/plans", {"partition_keys": ["2026-08-01"]})
    assert status == 403 and "--read-only" in body["error"]["message"]  # type: ignore[index]
    assert ui.stop(signal.SIGINT) == 0


def test_without_partita_ui_token_a_token_is_generated_printed_and_kept_owner_only(
    start, environment: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in environment.items() if k != "PARTITA_UI_TOKEN"}
    ui = start("--store", f"sqlite:///{tmp_path}/partita.db", "--port", "0", env=env)
    ui.url()
    line = ui.line("token (for changes; generated and saved in")
    token = line.rsplit(": ", 1)[1]
    saved = Path(env["XDG_CONFIG_HOME"]) / "partita" / "ui-token"
    assert saved.read_text().strip() == token and saved.stat().st_mode & 0o777 == 0o600
    assert ui.stop(signal.SIGINT) == 0


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "partita", "ui", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60
    )


def test_an_entry_that_cannot_be_loaded_exits_3(environment: dict[str, str], tmp_path: Path) -> None:
    done = _run([str(tmp_path / "missing.py"), "--port", "0"], environment, tmp_path)
    assert done.returncode == 3 and "does not exist" in done.stderr and "Traceback" not in done.stderr


def test_serving_beyond_loopback_without_partita_ui_token_exits_2_and_writes_no_token(
    environment: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in environment.items() if k != "PARTITA_UI_TOKEN"}
    done = _run([ENTRY, "--host", "0.0.0.0", "--port", "0"], env, tmp_path)
    assert done.returncode == 2 and "set PARTITA_UI_TOKEN" in done.stderr and "Traceback" not in done.stderr
    assert not (Path(env["XDG_CONFIG_HOME"]) / "partita" / "ui-token").exists()
    assert not (tmp_path / ".partita").exists()  # refused before any store was opened


def test_a_port_in_use_exits_2_with_a_clear_message(environment: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run([ENTRY, "--store", f"sqlite:///{tmp_path}/s.db", "--port", str(port)], environment, tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1 port {port}: the address is already in use" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "70000"], "--port"),
        (["--host", "no-such-host.invalid", "--port", "0"], "--host"),
    ],
)
def test_bad_listening_options_exit_2(environment: dict[str, str], tmp_path: Path, args: list[str], words: str) -> None:
    done = _run([ENTRY, "--store", f"sqlite:///{tmp_path}/s.db", *args], environment, tmp_path)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr
