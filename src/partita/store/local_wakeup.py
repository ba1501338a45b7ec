"""Waking trigger daemons on this machine when events of a SQLite store commit.

SQLite cannot notify, so a daemon would learn of new events only at its
next poll. Each serving daemon therefore binds a datagram socket in Linux's
abstract namespace (no file, so no path-length limit) and leaves a marker
file naming it in ``<database file>.wakeup/`` beside the database. Every
commit that inserts events sends one byte to each socket named there; the
daemon's wait ends and it evaluates at once. The byte string names the
assets written (comma-separated; empty: any), so a daemon whose triggers
follow none of them sleeps on. The marker lists the assets its daemon
watches (one per line; empty: any), and a writer sends only to the daemons
that watch an asset it wrote: a consumer run's own outlet events, which
its daemon does not follow, wake nobody.

A wake-up is a shortcut, never the record: sending never blocks and never
fails a commit, a full socket buffer already means a pending wake-up, and
a marker whose daemon is gone is removed by the next sender that finds its
socket refused. Polling stays the safety net, and the only path across
machines (a store on a network filesystem shared by several hosts) and on
systems without abstract sockets.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["WakeupReceiver", "WakeupSender", "local_wakeup_supported", "wakeup_folder"]

_PREFIX = b"\0partita-wakeup-"
#: Longer lists of asset names are sent as an empty message: any asset.
_MAX_MESSAGE = 2048
#: A folder changed less than this long before it was listed may change again with the same mtime.
_MTIME_GRANULARITY_NS = 50_000_000


def local_wakeup_supported() -> bool:
    """Abstract-namespace Unix sockets exist on Linux only."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def wakeup_folder(database_file: str) -> Path:
    """Where the daemons serving ``database_file`` leave their markers."""
    return Path(f"{database_file}.wakeup")


def _address(name: str) -> bytes:
    return _PREFIX + name.encode("ascii")


class WakeupReceiver:
    """A serving daemon's end: a socket to select on and its marker beside the database.

    ``watched`` names the assets whose events wake it (None: any). Raises
    `OSError` when the folder cannot be written; the caller then polls.
    """

    def __init__(self, database_file: str, watched: Iterable[str] | None = None) -> None:
        self._folder = wakeup_folder(database_file)
        self._folder.mkdir(mode=0o700, exist_ok=True)
        self._name = uuid.uuid4().hex
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._marker = self._folder / self._name
        try:
            self._socket.bind(_address(self._name))
            self._socket.setblocking(False)
            # Written aside and renamed: a sender never reads half a list. The rename changes the
            # folder's mtime, so senders read it again.
            draft = self._folder / f".{self._name}"
            draft.write_text("" if watched is None else "\n".join(sorted(set(watched))))
            os.replace(draft, self._marker)
        except BaseException:
            self._socket.close()
            raise

    def fileno(self) -> int:
        return self._socket.fileno()

    def drain(self, watched: frozenset[str] | None = None) -> bool:
        """Read every pending wake-up; True when one named an asset of ``watched`` (None: any asset)."""
        woken = False
        with contextlib.suppress(OSError):
            while True:
                message = self._socket.recv(_MAX_MESSAGE + 1)
                names = message.decode("utf-8", "replace").split(",") if message else []
                woken = woken or watched is None or not names or not watched.isdisjoint(names)
        return woken

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._marker.unlink()
        self._socket.close()


class WakeupSender:
    """A writer's end: after a commit of events, one datagram to each daemon that watches one of their assets.

    The folder's markers are read again only when its mtime changes (a
    daemon started or stopped), so a send costs one ``stat`` and one
    ``sendto`` per daemon woken. A listing taken within the filesystem's
    timestamp granularity of its last change is read again at the next
    send: a daemon that started in the same tick leaves the same mtime.
    Where no daemon ever served the database, the folder is missing, and
    asking whether it exists is cheaper than a failing ``stat``: every
    emission pays for this check.
    """

    def __init__(self, database_file: str) -> None:
        self._folder = str(wakeup_folder(database_file))  # a str: os calls on a Path convert it each time
        self._lock = threading.Lock()
        self._seen_mtime: int | None = None
        #: Per daemon's socket name, the assets it watches (None: any).
        self._targets: dict[str, frozenset[str] | None] = {}
        self._socket: socket.socket | None = None

    def _current_targets(self) -> dict[str, frozenset[str] | None]:
        if self._seen_mtime is None and not os.access(self._folder, os.F_OK):
            return {}  # no daemon ever served this database here
        try:
            mtime = os.stat(self._folder).st_mtime_ns
        except OSError:
            self._seen_mtime = None
            self._targets = {}
            return {}  # the folder is gone
        if mtime != self._seen_mtime:
            with contextlib.suppress(OSError):
                self._targets = _markers(self._folder)
                settled = time.time_ns() - mtime > _MTIME_GRANULARITY_NS
                self._seen_mtime = mtime if settled else -1
        return self._targets

    def send(self, assets: Iterable[str] = ()) -> None:
        """Wake the daemons serving this database that watch one of ``assets``; never raises, never blocks."""
        daemons = self._current_targets()
        if not daemons:
            return  # every emission pays for this call: where no daemon serves, it stops here
        written = frozenset(assets)
        targets = [name for name, watched in daemons.items() if watched is None or not written or watched & written]
        if not targets:
            return
        message = ",".join(sorted(written)).encode("utf-8")
        if len(message) > _MAX_MESSAGE:
            message = b""
        with self._lock:
            if self._socket is None:
                try:
                    self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                    self._socket.setblocking(False)
                except OSError:
                    return
            sender = self._socket
            for name in targets:
                try:
                    sender.sendto(message, _address(name))
                except (ConnectionRefusedError, FileNotFoundError):
                    self._forget(name)  # its daemon is gone
                except OSError:
                    pass  # a full buffer already holds a wake-up

    def _forget(self, name: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self._folder, name))

    def close(self) -> None:
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None


def _markers(folder: str) -> dict[str, frozenset[str] | None]:
    """The daemons named in ``folder``, each with the assets it watches (None: any, as an empty marker says).

    A marker being written (its name starts with a dot) is not a daemon yet;
    one removed while the folder is read is left out.
    """
    targets: dict[str, frozenset[str] | None] = {}
    for entry in os.scandir(folder):
        if entry.name.startswith("."):
            continue
        try:
            with open(entry.path, encoding="utf-8") as marker:
                listed = marker.read().split()
        except OSError:
            continue
        targets[entry.name] = frozenset(listed) if listed else None
    return targets
