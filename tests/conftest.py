"""Shared fixtures: a throwaway PostgreSQL server, store URLs for both backends and a store opened on each.

PostgreSQL tests use ``$PARTITA_TEST_POSTGRES_URL`` when it is set; otherwise
this starts a private cluster (initdb in a temporary folder, a free port,
its own socket directory) and stops it at the end of the session. Without
PostgreSQL binaries the tests are skipped locally and fail under CI=true:
CI must exercise the PostgreSQL store.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from partita.store.sql import SqlStore


def _postgres_bindir() -> Path | None:
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        output = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if output:
            candidates.append(Path(output))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Cluster:
    """A private PostgreSQL cluster owned by a non-root user."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.folder = Path(tempfile.mkdtemp(prefix="partita-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, user="postgres")
        os.chmod(self.folder, 0o777)

    def _run(self, *command: str) -> None:
        result = subprocess.run([*self.as_user, *command], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "partita", "--no-sync")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self) -> None:
        subprocess.run(
            [*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql://partita@127.0.0.1:{self.port}/postgres"


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server's maintenance database."""
    configured = os.environ.get("PARTITA_TEST_POSTGRES_URL")
    if configured:
        yield configured
        return
    bindir = _postgres_bindir()
    if bindir is None or (os.geteuid() == 0 and shutil.which("runuser") is None):
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL binaries are required in CI (install Debian's postgresql package)")
        pytest.skip("PostgreSQL binaries not found; set PARTITA_TEST_POSTGRES_URL or install postgresql")
    cluster = _Cluster(bindir)
    cluster.start()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@contextlib.contextmanager
def _new_database(server_url: str, template: str | None = None) -> Iterator[str]:
    """A new database on the test server (a copy of ``template``, or an empty one), as its URL.

    Dropped on exit, ending whatever connections a test left open to it.
    """
    import psycopg

    name = f"partita_test_{uuid.uuid4().hex[:12]}"
    copied = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"{copied}')
    try:
        yield f"{server_url.rsplit('/', 1)[0]}/{name}"
    finally:
        deadline = time.monotonic() + 10
        with psycopg.connect(server_url, autocommit=True) as connection:
            while True:
                try:
                    connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    break
                except psycopg.Error:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty database on the test server, dropped afterwards."""
    with _new_database(postgres_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_head_template(postgres_server_url: str) -> Iterator[str]:
    """The name of a database that partita's migrations brought to the head schema, once per session.

    Copying it (``CREATE DATABASE ... TEMPLATE``) gives a test a store at
    head without running every migration again, which took most of a
    PostgreSQL test's setup. The migrations themselves are tested on empty
    databases (`postgres_url`, and `store_url` where a module overrides it).
    """
    from partita.store import open_store

    with _new_database(postgres_server_url) as url:
        open_store(url).close()  # every connection closed: a template must have none
        yield url.rsplit("/", 1)[1]


@pytest.fixture
def postgres_store_url(postgres_server_url: str, postgres_head_template: str) -> Iterator[str]:
    """A fresh database on the test server whose schema is already partita's head, dropped afterwards."""
    with _new_database(postgres_server_url, postgres_head_template) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One store URL per backend: every store contract test runs on both.

    The PostgreSQL database already has the head schema (`postgres_store_url`);
    a module that tests how a store is created or upgraded overrides this
    fixture with empty databases.
    """
    return _store_url(request, tmp_path, "postgres_store_url")


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One store URL per backend, where no store was ever opened: for tests of how a store is created or upgraded."""
    return _store_url(request, tmp_path, "postgres_url")


def _store_url(request: pytest.FixtureRequest, tmp_path: Path, postgres_fixture: str) -> str:
    """A new SQLite file's URL, or the PostgreSQL database the named fixture gives."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/partita.db"
    return str(request.getfixturevalue(postgres_fixture))


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    """The store at ``store_url`` (one per backend), opened and closed around the test."""
    from partita.store import open_store

    opened = open_store(store_url)
    try:
        yield opened
    finally:
        opened.close()
