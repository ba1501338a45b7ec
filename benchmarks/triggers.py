"""Trigger benchmarks on SQLite: event-to-consumer latency and consumer-run throughput.

    python benchmarks/triggers.py [--events 1000] [--keys 10000] [--max-in-flight 4]
                                  [--poll-interval 0.05] [--only latency|throughput]

(a) latency: a `TriggerDaemon` serves in a background thread; one event at a
    time is published (`publish_event`, each with its own key) and the time
    from the returned receipt to the consumer body starting is measured.
    Prints p50 and p99 (and max).
(b) throughput: ``--keys`` events are published first (each its own key),
    then a daemon serves until all consumer runs (no-op bodies) finished.
    Prints the seconds (and runs per second).

Each figure is one line. Every part uses a new SQLite file in a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from partita import AssetContext, AssetRegistry, Flow, StaticPartitionDef, asset, open_store, publish_event
from partita.automation.daemon import TriggerDaemon
from partita.automation.triggers import OnAssetEvents


def build(count: int, on_start, on_finish) -> tuple[Flow, AssetRegistry]:
    registry = AssetRegistry()
    keys = StaticPartitionDef("bench_keys", [f"k{index:06d}" for index in range(count)])

    @asset(partition_def=keys, registry=registry)
    def source() -> None:
        """Published to from outside; never runs."""

    @asset(partition_def=keys, registry=registry)
    def consumer(context: AssetContext) -> None:
        on_start(context.partition_key)
        on_finish(context.partition_key)

    flow = Flow(["consumer"], registry=registry, name="bench_consumer", trigger=OnAssetEvents(["source"]))
    return flow, registry


def _serve(daemon: TriggerDaemon) -> threading.Thread:
    thread = threading.Thread(target=daemon.serve, name="trigger-daemon", daemon=True)
    thread.start()
    return thread


def latency(events: int, poll_interval: float, max_in_flight: int) -> None:
    started: dict[str, float] = {}
    signals = {f"k{index:06d}": threading.Event() for index in range(events)}

    def on_start(key: str) -> None:
        started[key] = time.perf_counter()
        signals[key].set()

    flow, registry = build(events, on_start, lambda key: None)
    folder = Path(tempfile.mkdtemp(prefix="partita-bench-latency-"))
    store = open_store(f"sqlite:///{folder / 'partita.db'}")
    daemon = TriggerDaemon([flow], store, max_in_flight=max_in_flight, poll_interval=poll_interval)
    thread = _serve(daemon)
    samples = []
    try:
        for index in range(events):
            key = f"k{index:06d}"
            publish_event(store, registry, "source", partition_key=key)
            received = time.perf_counter()  # the receipt is back: the event is stored
            if not signals[key].wait(60):
                raise SystemExit(f"latency: the consumer of {key} did not start within 60 s")
            samples.append(started[key] - received)
    finally:
        daemon.stop()
        thread.join()
        store.close()
    samples.sort()
    p50 = statistics.median(samples) * 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000
    print(
        f"latency receipt->body start (SQLite, poll {poll_interval}s, {events} events): "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {samples[-1] * 1000:.1f} ms"
    )


def throughput(keys: int, poll_interval: float, max_in_flight: int) -> None:
    finished = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_finish(key: str) -> None:
        nonlocal finished
        with lock:
            finished += 1
            if finished == keys:
                done.set()

    flow, registry = build(keys, lambda key: None, on_finish)
    folder = Path(tempfile.mkdtemp(prefix="partita-bench-throughput-"))
    store = open_store(f"sqlite:///{folder / 'partita.db'}")
    try:
        begin = time.perf_counter()
        for index in range(keys):
            publish_event(store, registry, "source", partition_key=f"k{index:06d}")
        emitted = time.perf_counter() - begin
        print(f"emit {keys} events (publish_event, one transaction each): {emitted:.2f} s")
        daemon = TriggerDaemon([flow], store, max_in_flight=max_in_flight, poll_interval=poll_interval)
        begin = time.perf_counter()
        thread = _serve(daemon)
        done.wait()
        # The body finished; the request is marked finished right after its run returns.
        elapsed = time.perf_counter() - begin
        daemon.stop()
        thread.join()
    finally:
        store.close()
    print(
        f"throughput: {keys} consumer runs finished in {elapsed:.2f} s "
        f"({keys / elapsed:.1f} runs/s, --max-in-flight {max_in_flight}, poll {poll_interval}s, SQLite)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000, help="latency samples (default 1000)")
    parser.add_argument("--keys", type=int, default=10_000, help="throughput: keys emitted (default 10000)")
    parser.add_argument("--max-in-flight", type=int, default=4, help="consumer runs at once (default 4)")
    parser.add_argument("--poll-interval", type=float, default=0.05, help="daemon poll interval (default 0.05)")
    parser.add_argument("--only", choices=("latency", "throughput"), help="run one part only")
    args = parser.parse_args()
    if args.only in (None, "latency"):
        latency(args.events, args.poll_interval, args.max_in_flight)
    if args.only in (None, "throughput"):
        throughput(args.keys, args.poll_interval, args.max_in_flight)


if __name__ == "__main__":
    main()
