"""Waking trigger daemons on this machine when events of a SQLite store commit.

SQLite cannot notify, so a daemon would learn of new events only at its
next poll. Each serving daemon therefore binds a datagram socket in Linux's
abstract namespace (no file, so no path-length limit) and leaves a marker
file naming it in ``<database file>.wakeup/`` beside the database. The
marker lists the assets the daemon watches (one per line; empty: any). A
commit that inserts events sends a datagram naming the assets written
(comma-separated; empty: any) to each daemon that watches one of them; the
daemon's wait ends and it evaluates at once. A consumer run's own outlet
events, which its daemon does not follow, wake nobody.

A wake-up is a shortcut, never the record: sending never blocks and never
fails a commit, a full socket buffer already means a pending wake-up, and
a marker whose daemon is gone is removed by the next sender that lists the
folder (its socket refuses a connection) or whose send it refuses. Polling
stays the safety net, and the only path across machines (a store on a
network filesystem shared by several hosts) and on systems without
abstract sockets.
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
#: The same for a filesystem that keeps whole seconds (the mtime is a round second).
_COARSE_MTIME_GRANULARITY_NS = 2_000_000_000
#: A marker's first line when it names its daemon's network namespace (never an asset name).
_NETWORK = "#network"


def local_wakeup_supported() -> bool:
    """Abstract-namespace Unix sockets exist on Linux only."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def wakeup_folder(database_file: str) -> Path:
    """Where the daemons serving ``database_file`` leave their markers."""
    return Path(f"{database_file}.wakeup")


def _address(name: str) -> bytes:
    return _PREFIX + name.encode("ascii")


def _network_namespace() -> str | None:
    """This process's network namespace (abstract socket names are per namespace); None where unknown."""
    try:
        return str(os.stat("/proc/self/ns/net").st_ino)
    except OSError:
        return None


class WakeupReceiver:
    """A serving daemon's end: a socket to select on and its marker beside the database.

    ``watched`` names the assets whose events wake it (None, or none at
    all: any). The marker also names the daemon's network namespace, which
    its socket's name belongs to. Raises `OSError` when the folder cannot
    be written; the caller then polls.
    """

    def __init__(self, database_file: str, watched: Iterable[str] | None = None) -> None:
        self._folder = wakeup_folder(database_file)
        self._folder.mkdir(mode=0o700, exist_ok=True)
        self._name = uuid.uuid4().hex
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._marker = self._folder / self._name
        # Written beside the folder and renamed into it: a sender never reads half a list, and no
        # sender (of any version) takes the draft for a daemon. The rename changes the folder's
        # mtime, so senders read it again.
        draft = self._folder.parent / f".partita-wakeup-{self._name}.draft"  # a fixed length: any database name fits
        network = _network_namespace()
        lines = ([] if network is None else [f"{_NETWORK} {network}"]) + sorted(set(watched or ()))
        try:
            self._socket.bind(_address(self._name))
            self._socket.setblocking(False)
            draft.write_text("\n".join(lines), encoding="utf-8")
            os.replace(draft, self._marker)
        except BaseException:
            with contextlib.suppress(OSError):
                draft.unlink()
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
    ``sendto`` per daemon woken. A listing taken less than 50 ms after the
    folder's last change (2 s on a filesystem that keeps whole seconds) is
    read again at the next send: a daemon that started within the same
    timestamp tick leaves the same mtime.
    Where no daemon ever served the database, the folder is missing, and
    asking whether it exists is cheaper than a failing ``stat``: every
    emission pays for this check.
    """

    def __init__(self, database_file: str) -> None:
        self._folder = str(wakeup_folder(database_file))  # a str: os calls on a Path convert it each time
        self._lock = threading.Lock()
        #: The folder's mtime when it was listed (-1: list it again), and per daemon's socket name the
        #: assets it watches (None: any); replaced as one tuple, so concurrent senders never mix two listings.
        self._listing: tuple[int | None, dict[str, frozenset[str] | None]] = (None, {})
        self._network = _network_namespace()
        self._socket: socket.socket | None = None

    def _current_targets(self) -> dict[str, frozenset[str] | None]:
        seen, targets = self._listing
        if seen is None and not os.access(self._folder, os.F_OK):
            return {}  # no daemon ever served this database here
        now = time.time_ns()  # before the stat: a listing that took long is not mistaken for settled
        try:
            mtime = os.stat(self._folder).st_mtime_ns
        except OSError:
            self._listing = (None, {})
            return {}  # the folder is gone
        if mtime != seen:
            with contextlib.suppress(OSError):
                targets = _markers(self._folder, self._network)
                coarse = mtime % 1_000_000_000 == 0
                settled = now - mtime > (_COARSE_MTIME_GRANULARITY_NS if coarse else _MTIME_GRANULARITY_NS)
                self._listing = (mtime if settled else -1, targets)
        return targets

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


def _markers(folder: str, network: str | None) -> dict[str, frozenset[str] | None]:
    """The live daemons named in ``folder`` that ``network`` reaches, each with its assets (None: any).

    A name starting with a dot is not a marker. A daemon of another network
    namespace cannot be reached (nor told dead) from this one: it is left
    alone. A marker whose socket refuses a connection (its daemon is gone)
    is removed; one removed while the folder is read is left out.
    """
    targets: dict[str, frozenset[str] | None] = {}
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        for entry in os.scandir(folder):
            if entry.name.startswith("."):
                continue
            try:
                with open(entry.path, encoding="utf-8") as marker:
                    listed = marker.read().splitlines()
                if listed and listed[0].startswith(_NETWORK):
                    if network is not None and listed[0] != f"{_NETWORK} {network}":
                        continue
                    listed = listed[1:]
                probe.connect(_address(entry.name))  # nothing is sent; an unbound address refuses
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                continue
            except (OSError, UnicodeError):
                continue
            targets[entry.name] = frozenset(listed) if listed else None
    return targets
