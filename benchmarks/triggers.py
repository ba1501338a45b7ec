"""Trigger benchmarks on SQLite or PostgreSQL: event-to-consumer latency, consumer-run throughput, notify cost.

    python benchmarks/triggers.py [--store sqlite|postgresql] [--events 1000] [--keys 10000]
                                  [--max-in-flight 4] [--poll-interval 0.05]
                                  [--only latency|throughput|notify-cost] [--no-listen] [--diagnose]
                                  [--events-first | --producer-process]

(a) latency: a `TriggerDaemon` serves in a background thread; one event at a
    time is published (`publish_event`, each with its own key) and the time
    from the returned receipt to the consumer body starting is measured.
    Prints p50 and p99 (and max). It is measured twice in the same run:
    polling only (``listen=False``, the baseline) and woken (PostgreSQL:
    LISTEN/NOTIFY; SQLite: the local wake-up socket), with the ratio of the
    medians.
(b) throughput: a daemon serves while one producer run emits ``--keys``
    events (``context.emit``, one per key, each durable before the next);
    the time from the producer's start until all consumer runs (no-op
    bodies) finished. ``--events-first`` emits them all before the daemon
    starts and times the consumer runs alone, from the daemon's start. Prints the seconds (and runs per second). ``--no-listen`` makes a
    PostgreSQL daemon poll only, to compare. ``--diagnose`` adds, per consumer
    key, each kind of thread's processor time (daemon, consumer runs, body
    workers, journal, checkpointer, the producer's run) and how long runnable
    threads waited for a processor, with the processors busy on average (Linux).
(c) notify-cost (PostgreSQL only): what the notification trigger of schema
    revision 0005 adds to writing events: single-row emissions (each its own
    transaction) and one COPY of ``--keys`` rows, with the trigger enabled and
    disabled (``ALTER TABLE ... DISABLE TRIGGER``), median of 3, with ratios.

Each figure is one line. On SQLite every part uses a new file in a temporary
folder. ``--store postgresql`` needs ``$PARTITA_BENCH_POSTGRES_URL``, a server
the benchmark may create databases on: each part runs in a scratch database
that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import thread_times

from partita import AssetContext, AssetRegistry, Flow, StaticPartitionDef, asset, open_store, publish_event
from partita.automation.daemon import TriggerDaemon
from partita.automation.triggers import OnAssetEvents
from partita.store.sql import SqlStore


def build(count: int, on_start, on_finish, max_keys_per_run: int = 1) -> tuple[Flow, AssetRegistry]:
    registry = AssetRegistry()
    keys = StaticPartitionDef("bench_keys", [f"k{index:06d}" for index in range(count)])

    @asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Announced by `producer` (or published from outside); never runs."""

    @asset(registry=registry)
    def producer(context: AssetContext) -> int:
        """One producer run announces every key: an event per key, each durable before the next."""
        for key in keys.keys:
            context.emit("source", partition_key=key)
        return len(keys.keys)

    @asset(partition_def=keys, registry=registry)
    def consumer(context: AssetContext) -> None:
        on_start(context.partition_key)
        on_finish(context.partition_key)

    flow = Flow(["consumer"], registry=registry, name="bench_consumer", trigger=OnAssetEvents(["source"], max_keys_per_run=max_keys_per_run))
    return flow, registry


@contextlib.contextmanager
def scratch_store(backend: str, part: str) -> Iterator[SqlStore]:
    """A new, empty store for one part: a SQLite file, or a PostgreSQL database dropped afterwards."""
    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix=f"partita-bench-{part}-"))
        store = open_store(f"sqlite:///{folder / 'partita.db'}")
        try:
            yield store
        finally:
            store.close()
        return
    import psycopg

    server = os.environ.get("PARTITA_BENCH_POSTGRES_URL")
    if not server:
        raise SystemExit("set PARTITA_BENCH_POSTGRES_URL to a PostgreSQL server the benchmark may create databases on")
    name = f"partita_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, rest = server.partition("?")
    url = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{rest}" if rest else "")
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _nothing(key: str) -> None:
    """A consumer hook that does nothing (the figures time the runs, not the hooks)."""


def _produce_elsewhere(url: str, keys: int, ready: Any, go: Any, emitted: Any) -> None:
    """The producer in a process of its own: opens the store, says so, emits when told, reports its seconds."""
    _, registry = build(keys, _nothing, _nothing)
    store = open_store(url)
    try:
        ready.set()
        while not go.wait(1.0):  # a benchmark killed meanwhile must not leave this process holding the store
            parent = multiprocessing.parent_process()
            if parent is None or not parent.is_alive():
                return
        began = time.perf_counter()
        result = Flow(["producer"], registry=registry, store=store).run()
        emitted.put((result.status.value, time.perf_counter() - began))
    except BaseException as exc:  # the benchmark's process reports it, instead of waiting for a status
        emitted.put((f"raised {type(exc).__name__}: {exc}", 0.0))
        raise
    finally:
        store.close()


class _ProducerProcess:
    """The producer run spawned on the same store, as a `partita run` beside `partita serve`: waits for `go`."""

    def __init__(self, url: str, keys: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._ready, self._go, self._emitted = context.Event(), context.Event(), context.Queue()
        self._child = context.Process(
            target=_produce_elsewhere, args=(url, keys, self._ready, self._go, self._emitted), daemon=True
        )
        self._child.start()
        deadline = time.monotonic() + 120
        try:
            while not self._ready.wait(0.5):
                self._check_alive("before it opened the store")
                if time.monotonic() > deadline:
                    raise SystemExit("throughput: the producer process did not open the store within 120 s")
        except BaseException:
            self.close()  # not told to emit: ended
            raise

    def go(self) -> None:
        self._go.set()

    def outcome(self) -> tuple[str, float]:
        """The producer run's status and its seconds, once it has emitted every event."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                return self._emitted.get(timeout=0.5)
            except queue.Empty:
                self._check_alive("without a status")
        raise SystemExit("throughput: the producer process gave no status within 600 s")

    def _check_alive(self, when: str) -> None:
        if not self._child.is_alive() and self._emitted.empty():
            raise SystemExit(f"throughput: the producer process ended {when} (exit code {self._child.exitcode})")

    def close(self) -> None:
        if self._child.is_alive() and not self._go.is_set():
            self._child.terminate()  # the benchmark failed before it was told to emit
        self._child.join(120)


def _serve(daemon: TriggerDaemon) -> threading.Thread:
    thread = threading.Thread(target=daemon.serve, name="trigger-daemon", daemon=True)
    thread.start()
    return thread


def _percentile(samples: list[float], fraction: float) -> float:
    return samples[min(len(samples) - 1, int(len(samples) * fraction))]


def latency(backend: str, events: int, poll_interval: float, max_in_flight: int, listen: bool) -> float:
    """Prints one line; returns the median in milliseconds."""
    started: dict[str, float] = {}
    signals = {f"k{index:06d}": threading.Event() for index in range(events)}

    def on_start(key: str) -> None:
        started[key] = time.perf_counter()
        signals[key].set()

    flow, registry = build(events, on_start, _nothing)
    samples = []
    with scratch_store(backend, "latency") as store:
        daemon = TriggerDaemon([flow], store, max_in_flight=max_in_flight, poll_interval=poll_interval, listen=listen)
        thread = _serve(daemon)
        try:
            for index in range(events):
                key = f"k{index:06d}"
                publish_event(store, registry, "source", partition_key=key)
                received = time.perf_counter()  # the receipt is back: the event is stored
                if not signals[key].wait(60):
                    raise SystemExit(f"latency: the consumer of {key} did not start within 60 s")
                samples.append(started[key] - received)
            listened = daemon.listening
        finally:
            daemon.stop()
            thread.join()
    samples.sort()
    p50 = statistics.median(samples) * 1000
    p99 = _percentile(samples, 0.99) * 1000
    how = _woken_by(backend) if listened else "polling"
    print(
        f"latency receipt->body start ({_label(backend)}, {how}, poll {poll_interval}s, {events} events): "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {samples[-1] * 1000:.1f} ms"
    )
    return p50


#: The benchmark's threads by role, from their names (the producer's run is on the calling thread, unless
#: ``--producer-process`` spawns it).
ROLES = (
    ("trigger-daemon", "daemon"), ("partita-consumer", "consumers"), ("partita-worker", "workers"),
    ("partita-store-journal", "journal"), ("partita-wal-checkpoint", "checkpoint"),
)  # fmt: skip


def throughput(
    backend: str,
    keys: int,
    poll_interval: float,
    max_in_flight: int,
    listen: bool,
    max_keys_per_run: int = 1,
    diagnose: bool = False,
    events_first: bool = False,
    producer_process: bool = False,
) -> float:
    finished = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_finish(key: str) -> None:
        nonlocal finished
        with lock:
            finished += 1
            if finished == keys:
                done.set()

    flow, registry = build(keys, _nothing, on_finish, max_keys_per_run)
    with scratch_store(backend, "throughput") as store, contextlib.ExitStack() as stack:
        daemon = TriggerDaemon([flow], store, max_in_flight=max_in_flight, poll_interval=poll_interval, listen=listen)
        producer = Flow(["producer"], registry=registry, store=store)
        elsewhere = None
        if events_first:  # the consumer runs alone: the clock starts with the daemon
            status = producer.run().status.value
        elif producer_process:
            elsewhere = _ProducerProcess(store.connect_url, keys)
            stack.callback(elsewhere.close)
        threads_before = thread_times.snapshot() if diagnose else None
        begin = time.perf_counter()
        thread = _serve(daemon)  # unless the events came first, consumers start while the producer still emits
        stack.callback(thread.join)  # run in reverse: the daemon stops, then its thread is joined
        stack.callback(daemon.stop)
        if elsewhere is not None:
            elsewhere.go()
            status, emitted = elsewhere.outcome()
        elif not events_first:
            status = producer.run().status.value
            emitted = time.perf_counter() - begin
        assert status == "success", status
        if not events_first:
            where = " in its own process" if producer_process else ""
            print(
                f"producer run{where}: {keys} events emitted (context.emit, each durable), {_label(backend)}: "
                f"{emitted:.2f} s"
            )
        done.wait()
        # The body finished; the request is marked finished right after its run returns.
        elapsed = time.perf_counter() - begin
        threads_after = thread_times.snapshot() if diagnose else None
        how = _woken_by(backend) if daemon.listening else "polling"
    start = (
        "daemon start (events emitted first)" if events_first
        else "producer start (its own process)" if producer_process else "producer start"
    )  # fmt: skip
    print(
        f"throughput: {start} to {keys} consumer runs finished: {elapsed:.2f} s "
        f"({keys / elapsed:.1f} keys/s, --max-in-flight {max_in_flight}, max_keys_per_run {max_keys_per_run}, "
        f"{daemon.started_runs} runs, poll {poll_interval}s, {_label(backend)}, {how})"
    )
    if threads_before is not None and threads_after is not None:
        spent = thread_times.by_role(threads_before, threads_after, ROLES, caller="producer")
        cores = sum(cpu for cpu, _ in spent.values()) / elapsed
        print(
            f"throughput diagnose max_keys_per_run {max_keys_per_run}: per consumer key "
            f"{thread_times.describe(spent, keys)}, processors busy {cores:.2f} of {os.cpu_count()}"
            + (" (this process only: the producer's is not counted)" if producer_process else "")
        )
    return elapsed


def notify_cost(events: int, rows: int) -> None:
    """Emission and COPY with the notification trigger enabled and disabled (PostgreSQL)."""
    registry = AssetRegistry()
    keys = StaticPartitionDef("bench_keys", [f"k{index:06d}" for index in range(max(events, 1))])

    @asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Published to from outside; never runs."""

    columns = "asset, partition_key, extra, timestamp, source_kind"
    with scratch_store("postgresql", "notify-cost") as store:
        import psycopg

        with psycopg.connect(store.connect_url, autocommit=True) as connection:

            def toggle(enabled: bool) -> None:
                state = "ENABLE" if enabled else "DISABLE"
                connection.execute(f"ALTER TABLE partita_events {state} TRIGGER partita_events_notify")

            def emissions() -> float:
                begin = time.perf_counter()
                for index in range(events):
                    publish_event(store, registry, "source", partition_key=f"k{index:06d}")
                return time.perf_counter() - begin

            def copy_batch() -> float:
                begin = time.perf_counter()
                with connection.transaction(), connection.cursor() as cursor:
                    with cursor.copy(f"COPY partita_events ({columns}) FROM STDIN") as copy:
                        for index in range(rows):
                            copy.write_row(("source", f"k{index:06d}", "{}", 0.0, "attempt"))
                return time.perf_counter() - begin

            for name, measure, size in (("emit", emissions, events), ("copy", copy_batch, rows)):
                timings: dict[bool, list[float]] = {False: [], True: []}
                for _ in range(3):  # interleaved, so drift of a shared machine hits both alike
                    for enabled in (False, True):
                        toggle(enabled)
                        timings[enabled].append(measure())
                medians = {enabled: statistics.median(values) for enabled, values in timings.items()}
                print(
                    f"notify-cost {name} {size} events (PostgreSQL): trigger off {medians[False] * 1000:.1f} ms, "
                    f"on {medians[True] * 1000:.1f} ms, ratio_on_to_off={medians[True] / medians[False]:.2f}"
                )


def _woken_by(backend: str) -> str:
    return "local wake-up" if backend == "sqlite" else "LISTEN/NOTIFY"


def _label(backend: str) -> str:
    return "SQLite" if backend == "sqlite" else "PostgreSQL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite", help="backend (default sqlite)")
    parser.add_argument("--events", type=int, default=1000, help="latency samples (default 1000)")
    parser.add_argument("--keys", type=int, default=10_000, help="throughput: keys emitted (default 10000)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="consumer runs at once (default 4)")
    parser.add_argument("--poll-interval", type=float, default=0.05, help="daemon poll interval (default 0.05)")
    parser.add_argument("--only", choices=("latency", "throughput", "notify-cost"), help="run one part only")
    parser.add_argument("--no-listen", action="store_true", help="throughput: poll only, also on PostgreSQL")
    producer = parser.add_mutually_exclusive_group()
    producer.add_argument(
        "--events-first", action="store_true",
        help="throughput: emit every event before the daemon starts, so the consumer runs are timed alone",
    )  # fmt: skip
    producer.add_argument(
        "--producer-process", action="store_true",
        help="throughput: the producer runs in a process of its own (as `partita run` beside `partita serve`)",
    )  # fmt: skip
    parser.add_argument(
        "--diagnose", action="store_true",
        help="throughput: also print each kind of thread's processor time and run-queue wait per key (Linux)",
    )  # fmt: skip
    parser.add_argument(
        "--max-keys-per-run", type=int, nargs="+", default=[1, 1000],
        help="throughput: consumer keys one run serves; each value is measured in turn (default 1 1000)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.only in (None, "latency"):
        polling = latency(args.store, args.events, args.poll_interval, args.max_in_flight, listen=False)
        woken = latency(args.store, args.events, args.poll_interval, args.max_in_flight, listen=True)
        print(
            f"latency p50 ratio {_woken_by(args.store)} to polling ({_label(args.store)}, poll {args.poll_interval}s): "
            f"{woken / polling:.2f}"
        )
    if args.only in (None, "throughput"):
        seconds = {
            size: throughput(
                args.store, args.keys, args.poll_interval, args.max_in_flight, not args.no_listen, size,
                args.diagnose, args.events_first, args.producer_process,
            )  # fmt: skip
            for size in args.max_keys_per_run
        }
        if len(seconds) > 1:
            base = seconds[args.max_keys_per_run[0]]
            for size, elapsed in seconds.items():
                print(f"throughput ratio max_keys_per_run {size} to {args.max_keys_per_run[0]}: {elapsed / base:.2f}")
    if args.only in (None, "notify-cost") and args.store == "postgresql":
        notify_cost(args.events, args.keys)


if __name__ == "__main__":
    main()
