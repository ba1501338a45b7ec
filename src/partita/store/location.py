"""Where a store lives: its URL parsed and checked before anything connects (SPEC §6).

Every rejection happens here, before a file is created or a server is
contacted, and no message repeats a password. A malformed URL is a
configuration error (exit 2); a location the operating system refuses (a
name too long, no permission, an empty file where a store should be) is a
store error (exit 4).
"""

from __future__ import annotations

import contextlib
import enum
import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from partita.errors import ConfigurationError, MissingStoreError, StoreError
from partita.partitions.base import storable_text_problem

__all__ = ["SqliteAccess", "StoreBackend", "StoreLocation", "parse_store_url"]

_URL_FORMS = "use sqlite:///PATH or postgresql://USER@HOST/DATABASE"
_MEMORY_DATABASES = (None, "", ":memory:")
#: The only option a sqlite:/// URL takes; others would be silently ignored by the driver.
_SQLITE_OPTIONS = {"mode": ("ro",)}


class StoreBackend(enum.Enum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


class SqliteAccess(enum.Enum):
    """How a SQLite file is opened."""

    READ_WRITE = "rw"
    #: ``?mode=ro``, or a reader without write permission: SQLite refuses every write.
    READ_ONLY = "ro"
    #: A reader on a read-only filesystem: no lock or shared-memory file can be created, and nothing can change the file.
    IMMUTABLE = "immutable"


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed store URL: backend, SQLite file (None in memory) and whether the URL asks for read-only access."""

    backend: StoreBackend
    url: URL
    path: Path | None
    read_only: bool

    @property
    def in_memory(self) -> bool:
        """A SQLite database in this process's memory: nothing outlives the process."""
        return self.backend is StoreBackend.SQLITE and self.path is None

    @property
    def display(self) -> str:
        """The URL as it may be shown: the password hidden."""
        return self.url.render_as_string(hide_password=True)


def parse_store_url(url: Any) -> StoreLocation:
    """``url`` checked and parsed; ConfigurationError naming the rule (never the password) otherwise."""
    if not isinstance(url, str) or not url:
        raise ConfigurationError("store URL must be a non-empty string such as sqlite:///.partita/partita.db")
    problem = storable_text_problem(url)
    if problem is not None:
        raise ConfigurationError(f"store URL {problem}; {_URL_FORMS}")
    try:
        parsed = make_url(url)
        backend_name = parsed.get_backend_name()
    except (ArgumentError, ValueError, TypeError):
        # ValueError: a malformed host or port (postgresql://u:p@[::1:5432/db).
        raise ConfigurationError(f"store URL is not a valid URL; {_URL_FORMS}") from None
    if backend_name == "postgresql":
        return StoreLocation(StoreBackend.POSTGRESQL, parsed, None, False)
    if backend_name != "sqlite":
        raise ConfigurationError(f"store URL scheme {parsed.drivername!r} is not supported; use sqlite:/// or postgresql://")
    read_only = _sqlite_options(parsed)
    path = None if parsed.database in _MEMORY_DATABASES else Path(parsed.database)  # type: ignore[arg-type]
    if path is None and read_only:
        raise ConfigurationError("store URL asks for a read-only (mode=ro) in-memory database, which is always empty")
    return StoreLocation(StoreBackend.SQLITE, parsed, path, read_only)


def _sqlite_options(parsed: URL) -> bool:
    for name, value in parsed.query.items():
        accepted = _SQLITE_OPTIONS.get(name)
        if accepted is None:
            raise ConfigurationError(
                f"store URL option {name!r} is not supported by sqlite:/// stores; the only option is mode=ro (read-only)"
            )
        if value not in accepted:
            raise ConfigurationError("store URL option mode accepts only ro (read-only); leave it out to read and write")
    return "mode" in parsed.query


def sqlite_access(location: StoreLocation, *, create: bool) -> tuple[SqliteAccess, bool]:
    """How to open ``location``'s file, and whether opening it creates the store.

    Nothing is created with ``create=False`` or ``?mode=ro``. A store that
    cannot be written (``?mode=ro``, a read-only file, folder or filesystem)
    is opened read-only: reading works, and a write fails with a StoreError
    saying the store is read-only.
    """
    path = location.path
    assert path is not None
    try:
        return _access(location, path, create)
    except OSError as exc:  # a name too long, a component that is a file, no permission ...
        raise StoreError(f"store {location.display}: cannot use the path: {exc.strerror or type(exc).__name__}") from None


def _access(location: StoreLocation, path: Path, create: bool) -> tuple[SqliteAccess, bool]:
    if path.is_dir():
        raise StoreError(f"store path {str(path)!r} is a directory; name a database file inside it")
    created = False
    if not path.exists():
        if not create or location.read_only:
            raise MissingStoreError(f"no run-history store exists at {str(path)!r} yet")
        created = _create_store_file(path)
    elif path.stat().st_size == 0:
        # SQLite would silently start a new store in it: an empty file is a truncated or foreign one.
        raise StoreError(
            f"store file {str(path)!r} is empty (0 bytes), so it is not a partita store; "
            "remove it to start a new store there, or point the store at another file"
        )
    if _on_read_only_filesystem(path) and not _has_write_ahead_log(path):
        return SqliteAccess.IMMUTABLE, created
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    if location.read_only or not writable:
        # Reading works; the first write fails with a StoreError saying the store is read-only.
        return SqliteAccess.READ_ONLY, created
    return SqliteAccess.READ_WRITE, created


def _create_store_file(path: Path) -> bool:
    """Publish an empty WAL-mode database at ``path``; False when another process published one first.

    The file is prepared under a temporary name and hard-linked into place,
    so no opener ever sees a half-created, zero-byte store (which is refused
    as foreign). Without hard links, SQLite creates the file in place.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store's folder {str(path.parent)!r}: {exc.strerror}") from None
    if not os.access(path.parent, os.W_OK):
        raise StoreError(
            f"cannot create the store {str(path)!r}: its folder is read-only (permissions or a read-only filesystem)"
        )
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.new")
    try:
        connection = sqlite3.connect(temporary)
        try:
            connection.execute("PRAGMA journal_mode = WAL")  # writes the header: the file is never empty
        finally:
            connection.close()
        os.link(temporary, path)
    except FileExistsError:
        return False
    except (OSError, sqlite3.Error):
        return not path.exists()  # no hard links here: SQLite creates the file when it connects
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return True


def _on_read_only_filesystem(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _has_write_ahead_log(path: Path) -> bool:
    """Committed transactions not yet copied into the file: an immutable open would not see them."""
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def sqlite_connector(path: Path, access: SqliteAccess, timeout: float) -> Callable[[], sqlite3.Connection] | None:
    """A connection factory for a read-only or immutable open (a SQLite URI); None to let the URL connect."""
    if access is SqliteAccess.READ_WRITE:
        return None
    flag = "mode=ro" if access is SqliteAccess.READ_ONLY else "immutable=1"
    uri = f"file:{quote(str(path.absolute()))}?{flag}"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)

    return connect
