"""Waking a daemon on a SQLite store from writers on the same machine (`partita.store.local_wakeup`)."""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from pathlib import Path

import pytest

import partita as p
from partita.automation.daemon import TriggerDaemon
from partita.store.local_wakeup import WakeupReceiver, WakeupSender, local_wakeup_supported, wakeup_folder
from partita.store.sql import SqlStore

pytestmark = pytest.mark.skipif(not local_wakeup_supported(), reason="abstract sockets are Linux's")

#: Far longer than any test waits: a run that starts in time was woken, not polled.
POLL_SECONDS = 60.0


def _flow(started: threading.Event) -> tuple[p.Flow, p.AssetRegistry]:
    registry = p.AssetRegistry()
    days = p.DatePartitionDef()

    @p.asset(partition_def=days, registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=days, registry=registry)
    def consumer() -> None:
        started.set()

    return p.Flow(["consumer"], registry=registry, name="woken", trigger=p.OnAssetEvents(["raw"])), registry


@contextlib.contextmanager
def _serving(daemon: TriggerDaemon):
    thread = threading.Thread(target=daemon.serve)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while daemon._wakeup is None and time.monotonic() < deadline:  # noqa: SLF001 - serving has begun
            time.sleep(0.01)
        time.sleep(0.3)  # its first pass is over: what follows is woken
        yield
    finally:
        daemon.stop()
        thread.join()


def test_a_published_event_wakes_the_daemon_long_before_its_poll(tmp_path: Path) -> None:
    started = threading.Event()
    flow, registry = _flow(started)
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path}/partita.db")) as store:
        daemon = TriggerDaemon([flow], store, poll_interval=POLL_SECONDS)
        with _serving(daemon):
            assert daemon.listening
            p.publish_event(store, registry, "raw", partition_key="2024-01-01")
            assert started.wait(10)
        assert daemon.started_runs == 1
    assert list(wakeup_folder(f"{tmp_path}/partita.db").iterdir()) == []  # the daemon's marker left with it


@pytest.mark.parametrize("keys", [1, 12])  # one outlet, and a batch SQLite takes as one JSON text
def test_outlet_events_of_a_run_in_another_store_handle_wake_the_daemon(tmp_path: Path, keys: int) -> None:
    started = threading.Event()
    flow, registry = _flow(started)
    url = f"sqlite:///{tmp_path}/partita.db"
    with contextlib.closing(SqlStore(url)) as store, contextlib.closing(SqlStore(url)) as producer_store:
        daemon = TriggerDaemon([flow], store, poll_interval=POLL_SECONDS)
        with _serving(daemon):
            producer = p.Flow(["raw"], registry=registry, store=producer_store)
            assert producer.run({"partition_keys": [f"2024-01-{day:02d}" for day in range(1, keys + 1)]}).succeeded
            assert started.wait(10)


def test_a_marker_whose_daemon_is_gone_is_dropped_and_never_fails_a_writer(tmp_path: Path) -> None:
    database = f"{tmp_path}/partita.db"
    folder = wakeup_folder(database)
    folder.mkdir()
    (folder / ("0" * 32)).touch()  # a daemon killed before it could remove its marker
    live = WakeupReceiver(database)
    try:
        WakeupSender(database).send(["raw"])
        assert select.select([live], [], [], 5)[0]
        assert live.drain(frozenset({"raw"}))
        assert sorted(path.name for path in folder.iterdir()) == [live._name]  # noqa: SLF001
    finally:
        live.close()


def test_two_daemons_are_both_woken_and_other_assets_wake_neither(tmp_path: Path) -> None:
    database = f"{tmp_path}/partita.db"
    receivers = [WakeupReceiver(database), WakeupReceiver(database)]
    sender = WakeupSender(database)
    try:
        sender.send(["raw"])
        for receiver in receivers:
            assert select.select([receiver], [], [], 5)[0]
            assert receiver.drain(frozenset({"raw"}))
        sender.send(["unrelated"])
        for receiver in receivers:
            assert select.select([receiver], [], [], 5)[0]
            assert not receiver.drain(frozenset({"raw"}))
        sender.send(["x" * 3000])  # too long to name: any asset
        assert select.select([receivers[0]], [], [], 5)[0] and receivers[0].drain(frozenset({"raw"}))
    finally:
        for receiver in receivers:
            receiver.close()


def _woken(receiver: WakeupReceiver) -> bool:
    """Whether a datagram reached ``receiver`` (read, so the next check starts empty)."""
    if not select.select([receiver], [], [], 0.2)[0]:
        return False
    return receiver.drain()


def test_a_writer_sends_only_to_the_daemons_that_watch_an_asset_it_wrote(tmp_path: Path) -> None:
    database = f"{tmp_path}/partita.db"
    raw_watcher, other_watcher = WakeupReceiver(database, ["raw"]), WakeupReceiver(database, ["other", "more"])
    any_watcher = WakeupReceiver(database)  # no list: every asset, as a marker written before lists were
    sender = WakeupSender(database)
    try:
        sender.send(["consumer"])  # a consumer run's own outlet event: nobody follows it
        assert [_woken(raw_watcher), _woken(other_watcher), _woken(any_watcher)] == [False, False, True]
        sender.send(["raw", "consumer"])
        assert [_woken(raw_watcher), _woken(other_watcher), _woken(any_watcher)] == [True, False, True]
        sender.send(["more"])
        assert [_woken(raw_watcher), _woken(other_watcher), _woken(any_watcher)] == [False, True, True]
        sender.send([])  # assets not named: every daemon
        assert [_woken(raw_watcher), _woken(other_watcher), _woken(any_watcher)] == [True, True, True]
    finally:
        for receiver in (raw_watcher, other_watcher, any_watcher):
            receiver.close()


def test_a_daemon_that_starts_in_the_same_timestamp_tick_as_the_last_listing_is_still_woken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two markers created within the folder's mtime granularity leave one mtime: the sender lists again."""
    import partita.store.local_wakeup as local_wakeup

    database = f"{tmp_path}/partita.db"
    first = WakeupReceiver(database, ["raw"])
    sender = WakeupSender(database)
    second = None
    real_stat = local_wakeup.os.stat
    frozen = real_stat(wakeup_folder(database))

    def stat(path: object, *args: object, **kwargs: object) -> object:
        return frozen if str(path) == str(wakeup_folder(database)) else real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    try:
        monkeypatch.setattr(local_wakeup.os, "stat", stat)  # the folder's mtime never moves
        monkeypatch.setattr(local_wakeup, "_MTIME_GRANULARITY_NS", 10**18)  # every listing is that recent
        sender.send(["raw"])
        assert _woken(first)
        second = WakeupReceiver(database, ["raw"])
        sender.send(["raw"])
        assert _woken(first) and _woken(second)
    finally:
        for receiver in (first, second):
            if receiver is not None:
                receiver.close()


def test_a_marker_is_never_seen_half_written_and_a_dot_name_is_never_a_daemon(tmp_path: Path) -> None:
    """The list is written beside the folder and renamed into it; names starting with a dot are left alone."""
    from partita.store.local_wakeup import _markers

    database = f"{tmp_path}/partita.db"
    receiver = WakeupReceiver(database, ["b", "a"])
    try:
        folder = wakeup_folder(database)
        assert [path.name for path in folder.iterdir()] == [receiver._name]  # noqa: SLF001
        network, *assets = (folder / receiver._name).read_text().splitlines()  # noqa: SLF001
        assert network.startswith("#network ") and assets == ["a", "b"]
        assert list(tmp_path.glob(".*.draft")) == []  # no draft left beside the folder
        (folder / ".not-a-daemon").write_text("ra")
        assert list(_markers(str(folder), None)) == [receiver._name]  # noqa: SLF001
        sender = WakeupSender(database)
        sender.send(["ra"])
        sender.send(["a"])
        assert _woken(receiver)
        assert (folder / ".not-a-daemon").exists()  # never sent to, so never taken for a dead daemon
    finally:
        receiver.close()


def test_a_dead_daemons_marker_is_removed_when_the_folder_is_listed_whatever_it_watched(tmp_path: Path) -> None:
    database = f"{tmp_path}/partita.db"
    folder = wakeup_folder(database)
    folder.mkdir()
    (folder / ("0" * 32)).write_text("other")  # killed before it could remove its marker; no writer sends to it
    live = WakeupReceiver(database, ["raw"])
    try:
        WakeupSender(database).send(["raw"])
        assert _woken(live)
        assert sorted(path.name for path in folder.iterdir()) == [live._name]  # noqa: SLF001
    finally:
        live.close()


def test_a_daemon_of_another_network_namespace_is_neither_sent_to_nor_removed(tmp_path: Path) -> None:
    """Abstract socket names are per network namespace: from here its socket refuses, though its daemon lives."""
    database = f"{tmp_path}/partita.db"
    folder = wakeup_folder(database)
    folder.mkdir()
    elsewhere = folder / ("1" * 32)
    elsewhere.write_text("#network 1\nraw")  # no namespace here has inode 1
    live = WakeupReceiver(database, ["raw"])
    try:
        sender = WakeupSender(database)
        sender.send(["raw"])
        assert _woken(live)
        assert elsewhere.exists()
        assert list(sender._current_targets()) == [live._name]  # noqa: SLF001
    finally:
        live.close()


def test_a_settled_listing_is_not_read_again_until_the_folder_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import partita.store.local_wakeup as local_wakeup

    database = f"{tmp_path}/partita.db"
    receiver = WakeupReceiver(database, ["raw"])
    listings: list[int] = []
    markers = local_wakeup._markers

    def counted(folder: str, network: object) -> object:
        listings.append(1)
        return markers(folder, network)

    monkeypatch.setattr(local_wakeup, "_markers", counted)
    monkeypatch.setattr(local_wakeup, "_MTIME_GRANULARITY_NS", -1)  # every listing counts as settled,
    monkeypatch.setattr(local_wakeup, "_COARSE_MTIME_GRANULARITY_NS", -1)  # on whole-second filesystems too
    sender = WakeupSender(database)
    try:
        for _ in range(5):
            sender.send(["raw"])
        assert len(listings) == 1  # one stat per send, one listing in all
        time.sleep(0.05)  # past the filesystem's timestamp tick: the change shows in the mtime
        other = WakeupReceiver(database, ["raw"])
        sender.send(["raw"])
        assert len(listings) == 2 and _woken(other)
        other.close()
    finally:
        receiver.close()


def test_without_a_writable_wakeup_folder_the_daemon_polls(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    wakeup_folder(f"{tmp_path}/partita.db").write_text("not a folder")  # the folder cannot be made
    started = threading.Event()
    flow, registry = _flow(started)
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path}/partita.db")) as store:
        daemon = TriggerDaemon([flow], store, poll_interval=0.05)
        with caplog.at_level(logging.WARNING, logger="partita.daemon"), _serving(daemon):
            assert not daemon.listening
            p.publish_event(store, registry, "raw", partition_key="2024-01-01")  # the writer does not fail
            assert started.wait(10)  # the poll found it
    assert "no local wake-up" in caplog.text and "polling only" in caplog.text


def test_a_burst_of_events_is_evaluated_a_few_at_a_time_and_every_key_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Announcements inside the evaluation gap wait for one pass: not a pass per committed event."""
    from partita.automation.evaluation import TriggerEvaluator

    registry = p.AssetRegistry()
    days = p.DatePartitionDef()
    ran: list[object] = []
    finished = threading.Event()
    count = 100

    @p.asset(partition_def=days, registry=registry)
    def raw() -> int:
        return 1

    @p.asset(partition_def=days, registry=registry)
    def consumer(context: p.AssetContext) -> None:
        ran.append(context.partition_key)
        if len(ran) == count:
            finished.set()

    flow = p.Flow(
        ["consumer"], registry=registry, name="burst", trigger=p.OnAssetEvents(["raw"], max_keys_per_run=count)
    )
    passes: list[int] = []
    evaluate = TriggerEvaluator.evaluate

    def counted(self: TriggerEvaluator, **kwargs: object) -> object:
        passes.append(1)
        return evaluate(self, **kwargs)

    monkeypatch.setattr(TriggerEvaluator, "evaluate", counted)
    reads: list[int] = []
    drain = WakeupReceiver.drain

    def read(self: WakeupReceiver, assets: object) -> bool:
        reads.append(1)
        return drain(self, assets)  # type: ignore[arg-type]

    monkeypatch.setattr(WakeupReceiver, "drain", read)
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path}/partita.db")) as store:
        daemon = TriggerDaemon([flow], store, poll_interval=POLL_SECONDS)
        with _serving(daemon):
            before, read_before = len(passes), len(reads)
            for offset in range(count):  # one event every 2 ms: a pass each would keep up with them
                key = f"2024-{1 + offset // 28:02d}-{1 + offset % 28:02d}"
                p.publish_event(store, registry, "raw", partition_key=key)
                time.sleep(0.002)
            assert finished.wait(60), f"{len(ran)} of {count} consumer keys ran"
            evaluations, woken, ended = len(passes) - before, len(reads) - read_before, daemon.started_runs
    assert sorted(ran) == sorted(set(ran)) and len(ran) == count  # each key once
    assert evaluations < 0.7 * count, f"{evaluations} passes for {count} events"
    # Announced once, the daemon sleeps until the pass instead of waking for every commit: it reads
    # the socket at most once per evaluation, plus once per wake-up by a run's end (200 reads before).
    assert woken <= evaluations + ended + 2, f"read {woken} times for {evaluations} passes and {ended} runs"


def test_a_flood_of_slot_wakeups_is_read_in_a_few_waits_and_then_the_wait_sleeps() -> None:
    """The daemon's self-pipe is read once per wait: what is left ends the next wait at once, until it is empty."""
    from partita.automation.daemon import _Wakeup

    wakeup = _Wakeup()
    try:
        for _ in range(10_000):
            wakeup.set()
        reads = 0
        while select.select([wakeup.fileno()], [], [], 0)[0]:
            wakeup.clear()
            reads += 1
            assert reads <= 10_000 // 4096 + 1
        started = time.monotonic()
        assert select.select([wakeup.fileno()], [], [], 0.2)[0] == []
        assert time.monotonic() - started >= 0.15
        wakeup.clear()  # nothing to read: no error
        wakeup.set()
        assert select.select([wakeup.fileno()], [], [], 0)[0] == [wakeup.fileno()]
    finally:
        wakeup.close()


@pytest.mark.parametrize("fixed", [False, True])
def test_the_daemon_warns_at_start_when_sqlite_has_the_wal_reset_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fixed: bool
) -> None:
    from partita.store import checkpointer

    monkeypatch.setattr(checkpointer, "WAL_RESET_FIXED", fixed)
    flow, _ = _flow(threading.Event())
    with contextlib.closing(SqlStore(f"sqlite:///{tmp_path}/partita.db")) as store:
        daemon = TriggerDaemon([flow], store, poll_interval=0.05)
        with caplog.at_level(logging.WARNING, logger="partita.daemon"), _serving(daemon):
            pass
    cautions = [record for record in caplog.records if "WAL-reset bug" in record.getMessage()]
    if fixed:
        assert cautions == []
    else:
        (caution,) = cautions
        assert caution.levelno == logging.WARNING
        assert "3.51.3" in caution.getMessage() and "PostgreSQL" in caution.getMessage()
