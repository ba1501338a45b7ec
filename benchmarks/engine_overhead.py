"""Per-attempt engine overhead on a three-asset daily chain with no-op bodies.

Prints one line per size: workload, N keys, attempts, median microseconds per
attempt over several runs, and peak traced memory per attempt. Run by hand:

    python benchmarks/engine_overhead.py [--sizes 1000 10000 100000] [--repeat 3]
        [--store none|sqlite|postgresql] [--executor in-process|process] [--logs] [--cross-domain [DAYS]]
        [--diagnose]

With ``--store`` each run is also recorded: ``sqlite`` in a temporary file,
``postgresql`` at ``$PARTITA_BENCH_POSTGRES_URL``. The store is opened once,
as a long-lived process would; the no-store figure is measured in the same
invocation, interleaved with the other figure's runs, so the ratio (the
median of the repeats' ratios) is comparable. With ``--executor process`` every body
runs in a worker process; the in-process figure is measured alongside for the
ratio (pick smaller sizes: a process round trip costs far more than a thread's).

``--cross-domain`` measures a run that spans two domains instead: a daily
report over hourly events (UTC) through ``RollupMapper("day")``, one year by
default (8,760 hourly and 365 daily attempts). It prints the median time to
plan it, and its plan + run and run-only costs per attempt beside those of
a same-domain three-asset chain with about as many attempts, and their
ratios.

``--diagnose`` adds, per size, one more run of each measured flow (the
no-store chain, and the store's with ``--store``) that says where its time
goes, per attempt: the cyclic garbage collector's time and collections, the
process's context switches, each kind of thread's processor time (the
engine's, the body workers', the store journal's, the checkpointer's) and
how long runnable threads waited for a processor (``runq_us``, Linux).

``--logs`` measures attempt log capture instead, with the SQLite store: the
same chain whose bodies each log one INFO line through ``context.logger``,
with capture on (the default) and off, beside the no-logging chain; it prints
each median and the ratios capture-on/capture-off and capture-on/no-logging.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import logging
import os
import statistics
import tempfile
import time
import tracemalloc

import thread_times

import partita
from partita.store import Store, open_store

# Module level, so that worker processes of the process executor find the bodies.
REGISTRY = partita.AssetRegistry()
DAYS = partita.DatePartitionDef()


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def extract() -> None:
    return None


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def transform(extract: None) -> None:
    return None


@partita.asset(partition_def=DAYS, registry=REGISTRY)
def publish(transform: None) -> None:
    return None


CROSS = partita.AssetRegistry()
HOURS = partita.HourlyPartitionDef("UTC")


@partita.asset(partition_def=HOURS, registry=CROSS)
def hourly_events() -> None:
    return None


@partita.asset(partition_def=DAYS, deps={"hourly_events": partita.RollupMapper("day")}, registry=CROSS)
def daily_report(hourly_events: object) -> None:
    return None


LOGGING = partita.AssetRegistry()


@partita.asset(name="extract", partition_def=DAYS, registry=LOGGING)
def logged_extract(context: partita.AssetContext) -> None:
    context.logger.info("loaded %d rows", 120)


@partita.asset(name="transform", partition_def=DAYS, registry=LOGGING)
def logged_transform(context: partita.AssetContext, extract: None) -> None:
    context.logger.info("loaded %d rows", 120)


@partita.asset(name="publish", partition_def=DAYS, registry=LOGGING)
def logged_publish(context: partita.AssetContext, transform: None) -> None:
    context.logger.info("loaded %d rows", 120)


class _NoCapture(partita.Flow):
    """The same flow with attempt logs off: the records are made and dropped by partita."""

    def _options(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        options = super()._options(*args, **kwargs)
        return dataclasses.replace(options, logs=None)


def build_flow(store: Store | bool = False, executor: str | None = None) -> partita.Flow:
    return partita.Flow(["publish"], registry=REGISTRY, store=store, executor=executor)


def keys_for(count: int) -> list[dt.date]:
    start = dt.date(1800, 1, 1)
    return [start + dt.timedelta(days=offset) for offset in range(count)]


def measure(flow: partita.Flow, keys: list[dt.date]) -> float:
    """Seconds for plan + run of the whole selection."""
    gc.collect()
    started = time.perf_counter()
    result = flow.run({"partition_keys": keys})
    elapsed = time.perf_counter() - started
    assert result.succeeded, result.status
    assert sum(len(task.attempts) for task in result.tasks.values()) == 3 * len(keys)
    return elapsed


def peak_memory(flow: partita.Flow, keys: list[dt.date]) -> int:
    gc.collect()
    tracemalloc.start()
    result = flow.run({"partition_keys": keys})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def _timed(flow: partita.Flow, keys: list[dt.date]) -> tuple[float, float]:
    """Wall and CPU seconds (all threads of this process) for plan + run of the selection."""
    gc.collect()
    cpu = time.process_time()
    wall = measure(flow, keys)
    return wall, time.process_time() - cpu


def _context_switches() -> int:
    """Voluntary and involuntary context switches of every thread of this process so far (Linux)."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as status:
                total += sum(int(line.split()[1]) for line in status if "ctxt_switches" in line)
        except OSError:  # the thread ended meanwhile
            continue
    return total


#: The process's threads by what they do for a run, from their names (the thread calling `Flow.run` is the engine's).
ROLES = (("partita-worker", "workers"), ("partita-store-journal", "journal"), ("partita-wal-checkpoint", "checkpoint"))


def diagnose(flow: partita.Flow, keys: list[dt.date], store: str) -> None:
    """One run's garbage collection, context switches and each kind of thread's processor time, per attempt.

    Processor time per thread role (``cpu_us_*``) says which thread does a
    store's work, and ``runq_us`` how long runnable threads waited for one
    of the machine's processors: on a machine with few cores, work a store
    moves to another thread only overlaps the run if a processor is free.
    """
    spent_gc = [0.0, 0.0, 0.0]
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent_gc[info["generation"]] += time.perf_counter() - began[0]

    gc.collect()
    collections_before = [generation["collections"] for generation in gc.get_stats()]
    switches = _context_switches() if os.path.isdir("/proc/self/task") else None
    threads_before = thread_times.snapshot()
    gc.callbacks.append(timed)
    try:
        elapsed = measure(flow, keys)
    finally:
        gc.callbacks.remove(timed)
    threads_after = thread_times.snapshot()
    collections = [after["collections"] - before for after, before in zip(gc.get_stats(), collections_before, strict=True)]
    attempts = 3 * len(keys)
    switched = "n/a" if switches is None else f"{(_context_switches() - switches) / attempts:.2f}"
    roles = ""
    if threads_before is not None and threads_after is not None:
        spent = thread_times.by_role(threads_before, threads_after, ROLES, caller="engine")
        roles = " " + thread_times.describe(spent, attempts)
    print(
        f"engine_overhead diagnose store={store} keys={len(keys)} attempts={attempts} "
        f"us_per_attempt={elapsed / attempts * 1e6:.1f} "
        f"gc_us_per_attempt={sum(spent_gc) / attempts * 1e6:.2f} gc_full_us_per_attempt={spent_gc[2] / attempts * 1e6:.2f} "
        f"gc_collections={'/'.join(map(str, collections))} context_switches_per_attempt={switched}{roles}"
    )


def log_capture_figures(folder: str, sizes: list[int], repeat: int) -> None:
    """Capture on vs off vs no logging, SQLite store, one INFO line per body.

    CPU time is printed beside wall time: on a shared machine it moves less
    with other processes' load, and capture's cost is CPU on this process's
    threads (the body's and the journal's writer).
    """
    # The level a user sets to see INFO: in every variant, so the records are made in both logging ones.
    logging.getLogger("partita.asset").setLevel(logging.INFO)
    store = open_store(f"sqlite:///{folder}/logs.db")
    flows = {
        "no_logging": partita.Flow(["publish"], registry=REGISTRY, store=store),
        "capture_off": _NoCapture(["publish"], registry=LOGGING, store=store),
        "capture_on": partita.Flow(["publish"], registry=LOGGING, store=store),
    }
    for flow in flows.values():
        flow.run({"partition_keys": keys_for(100)})
    for size in sizes:
        keys = keys_for(size)
        attempts = 3 * size
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in flows}
        for _ in range(repeat):  # interleaved: the machine's noise hits each variant alike
            for name, flow in flows.items():
                samples[name].append(_timed(flow, keys))
        wall = {name: statistics.median(wall for wall, _ in values) for name, values in samples.items()}
        cpu = {name: statistics.median(cpu for _, cpu in values) for name, values in samples.items()}
        for name in flows:
            print(
                f"engine_overhead chain=3 store=sqlite logs={name} keys={size} attempts={attempts} "
                f"median_us_per_attempt={wall[name] / attempts * 1e6:.1f} "
                f"median_cpu_us_per_attempt={cpu[name] / attempts * 1e6:.1f} runs={repeat}"
            )
        for figure, medians in (("wall", wall), ("cpu", cpu)):
            print(
                f"engine_overhead log_capture keys={size} {figure} "
                f"ratio_on_to_off={medians['capture_on'] / medians['capture_off']:.3f} "
                f"ratio_on_to_no_logging={medians['capture_on'] / medians['no_logging']:.3f} runs={repeat}"
            )


def cross_domain_figures(days: int, repeat: int) -> None:
    """Plan time of days over hours, and plan + run per attempt against a same-domain chain."""
    flow = partita.Flow(["daily_report"], registry=CROSS)
    start = dt.date(2026, 1, 1)
    config = {"partition_range": (start, start + dt.timedelta(days=days - 1))}
    chain, chain_keys = build_flow(), keys_for(round(days * 25 / 3))
    flow.run({"partition_range": (start, start + dt.timedelta(days=2))})  # warm-up
    chain.run({"partition_keys": keys_for(100)})
    plans, runs, chain_plans, chains = [], [], [], []
    for _ in range(repeat):  # interleaved: the machine's noise hits both alike
        gc.collect()
        started = time.perf_counter()
        plan = flow.plan(config)
        plans.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        result = flow.run(plan)
        runs.append(time.perf_counter() - started)
        assert result.succeeded and plan.attempt_count == days * 25
        gc.collect()
        started = time.perf_counter()
        chain_plan = chain.plan({"partition_keys": chain_keys})
        chain_plans.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert chain.run(chain_plan).succeeded
        chains.append(time.perf_counter() - started)
    attempts, chain_attempts = days * 25, 3 * len(chain_keys)
    cross_us = (statistics.median(plans) + statistics.median(runs)) / attempts * 1e6
    run_us = statistics.median(runs) / attempts * 1e6
    chain_us = (statistics.median(chain_plans) + statistics.median(chains)) / chain_attempts * 1e6
    chain_run_us = statistics.median(chains) / chain_attempts * 1e6
    print(
        f"engine_overhead cross_domain days={days} hours={days * 24} attempts={attempts} "
        f"median_plan_ms={statistics.median(plans) * 1e3:.1f} median_us_per_attempt={cross_us:.1f} "
        f"median_run_us_per_attempt={run_us:.1f} runs={repeat}"
    )
    print(
        f"engine_overhead chain=3 keys={len(chain_keys)} attempts={chain_attempts} median_us_per_attempt={chain_us:.1f} "
        f"median_run_us_per_attempt={chain_run_us:.1f} ratio_to_chain={cross_us / chain_us:.2f} "
        f"run_ratio_to_chain={run_us / chain_run_us:.2f} runs={repeat}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", choices=["none", "sqlite", "postgresql"], default="none")
    parser.add_argument("--executor", choices=["in-process", "process"], default="in-process")
    parser.add_argument("--logs", action="store_true", help="measure attempt log capture (SQLite store)")
    parser.add_argument("--diagnose", action="store_true", help="also print GC time and context switches per attempt")
    parser.add_argument("--cross-domain", type=int, nargs="?", const=365, metavar="DAYS", help="days over hours (365)")
    args = parser.parse_args()
    if args.cross_domain:
        cross_domain_figures(args.cross_domain, max(args.repeat, 5))
        return
    with tempfile.TemporaryDirectory() as folder:
        if args.logs:
            log_capture_figures(folder, args.sizes, args.repeat)
            return
        flows = {"none": build_flow()}
        if args.executor == "process":
            flows["process"] = build_flow(executor="process")
        if args.store == "sqlite":
            flows["sqlite"] = build_flow(open_store(f"sqlite:///{folder}/bench.db"))
        elif args.store == "postgresql":
            url = os.environ.get("PARTITA_BENCH_POSTGRES_URL")
            if not url:
                raise SystemExit("set PARTITA_BENCH_POSTGRES_URL to a PostgreSQL database the benchmark may write to")
            flows["postgresql"] = build_flow(open_store(url))
        for flow in flows.values():
            flow.run({"partition_keys": keys_for(100)})  # warm-up: imports, threads, schema
        for size in args.sizes:
            keys = keys_for(size)
            attempts = 3 * size
            # Interleaved: each repeat measures every flow once, so a busier moment of the machine
            # weighs on both sides of a ratio; the ratio is the median of the repeats' ratios.
            times: dict[str, list[float]] = {name: [] for name in flows}
            for _ in range(args.repeat):
                for name, flow in flows.items():
                    times[name].append(measure(flow, keys))
            medians = {name: statistics.median(values) for name, values in times.items()}
            for name, flow in flows.items():
                baseline = "in_process" if name == "process" else "no_store"
                paired = statistics.median(ours / base for ours, base in zip(times[name], times["none"], strict=True))
                ratio = "" if name == "none" else f" ratio_to_{baseline}={paired:.2f}"
                peak = f" peak_bytes_per_attempt={peak_memory(flow, keys) / attempts:.0f}" if name == "none" else ""
                store, executor = ("none", name) if name == "process" else (name, "in-process")
                print(
                    f"engine_overhead chain=3 store={store} executor={executor} keys={size} attempts={attempts} "
                    f"median_us_per_attempt={medians[name] / attempts * 1e6:.1f}{peak}{ratio} runs={args.repeat}"
                )
            if args.diagnose:
                for name, flow in flows.items():
                    if name != "process":
                        diagnose(flow, keys, name)


if __name__ == "__main__":
    main()
