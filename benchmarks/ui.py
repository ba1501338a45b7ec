"""Every page and API route of ``partita ui`` over a store of 100,000 attempts and 1,000,000 events (target: < 300 ms).

Setup: a store partita creates (its schema and indexes), then bulk rows
through its own tables and `Database.insert` (COPY on PostgreSQL): 1,000
finished runs of a daily chain (``exports`` then ``daily_total``, 50 keys
each, keys recorded, launched by the CLI, Python, triggers and the UI, with
tags), so 100,000 attempts with their plan, failures (2 % of ``exports``,
traceback and invocation rows) and the dependency skips they cause; the
outlet event of every success, published events on ``exports`` (with dedupe
keys) up to ``--events`` in all, one log line per ``exports`` attempt, a
trigger daemon and open consumer requests. The keys are the last 50,000
days, so the default windows read real history.

Then the app is built as ``partita ui`` builds it and each GET route of
``partita.ui.routes`` (read when the benchmark runs, so routes added later
are timed too; the live stream is left out: it never ends) is requested
through the ASGI client, path parameters filled with a real run and asset,
plus variants with filters and deep cursors. One line per request: the
median of ``--repeat`` requests after one warm-up, and whether it is under
300 ms. The ASGI client adds about a millisecond of its own.

    python benchmarks/ui.py [--attempts 100000] [--events 1000000] [--repeat 5] [--keys-per-run 50] [--postgres URL] [--only TEXT]

``--keys-per-run 50000`` seeds the same number of attempts as one run
(its run page, attempts and timeline at their largest).

``--postgres URL`` seeds and times a PostgreSQL store instead (the URL names
an empty database the benchmark may fill; nothing is dropped).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from partita.entry import load_entry
from partita.store import open_store
from partita.store.liveness import current_owner_token
from partita.store.schema import attempt_logs, attempts, daemons, events, invocations, run_tags, runs, trigger_requests
from partita.ui import UiSettings, create_app
from partita.ui.api.assets import MAX_API_STATUS_KEYS
from partita.ui.asset_window import MAX_GRID_KEYS
from partita.ui.routes import ROUTERS

KEYS_PER_RUN = 50
DAYS = 50_000
TARGET_MS = 300.0
TOKEN = "benchmark-token-0123456789"
ENTRY = '''
from partita import DatePartitionDef, Flow, OnAssetEvents, asset

days = DatePartitionDef(start="{first}")


@asset(partition_def=days)
def exports(context) -> int:
    context.logger.info("reading the export")
    return 1


@asset(partition_def=days)
def daily_total(exports: int) -> int:
    return exports + 1


@asset(partition_def=days)
def archive(context) -> None:
    return None


flow = Flow(["daily_total"], name="daily_totals", record_partition_keys=True)
archiving = Flow(["archive"], name="archiving", trigger=OnAssetEvents(["daily_total"]), record_partition_keys=True)
'''
LAUNCHES = ("cli", "python", "trigger", "ui")
TRACEBACK = (
    'Traceback (most recent call last):\n  File "entry.py", line 9, in exports\n'
    "    raise FileNotFoundError(path)\nFileNotFoundError: the export for this day has not arrived\n"
)
_CHUNK = 50_000


def _chunks(rows: Iterator[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == _CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


class Seed:
    """Bulk rows shaped as partita writes them, through the store's own tables."""

    def __init__(self, url: str, entry: Path, run_count: int, event_count: int, keys_per_run: int = KEYS_PER_RUN) -> None:
        self.url, self.entry, self.run_count, self.event_count = url, entry, run_count, event_count
        self.keys_per_run = keys_per_run
        self.today = dt.datetime.now(dt.UTC).date()
        self.first = self.today - dt.timedelta(days=DAYS - 1)
        self.base = time.time() - run_count * 600.0
        self.owner = (socket.gethostname(), os.getpid(), current_owner_token())
        self.run_ids = [f"{number:08x}" + "0" * 24 for number in range(run_count)]

    def key(self, index: int) -> str:
        return (self.first + dt.timedelta(days=index % DAYS)).isoformat()

    def run_keys(self, number: int) -> list[str]:
        """The newest runs cover the newest days: run n covers a 50-day block counted back from today."""
        offset = DAYS - self.keys_per_run * (self.run_count - number)
        return [self.key(offset + index) for index in range(self.keys_per_run)]

    def plan(self) -> str:
        keys = self.run_keys(0)
        document = load_entry(str(self.entry)).plan({"partition_range": (keys[0], keys[-1])}).to_dict()
        return json.dumps(document)

    def _runs(self, plan: str) -> Iterator[tuple[Any, ...]]:
        host, pid, token = self.owner
        for number, run_id in enumerate(self.run_ids):
            started = self.base + number * 600.0
            failed = number % 7 == 0
            launch = LAUNCHES[number % len(LAUNCHES)]
            finished = started + max(30.0, self.keys_per_run * 0.5 + 1.0)  # after its last attempt
            yield (
                run_id, "failed" if failed else "success", started, finished, '["daily_total"]', "range", "date",
                self.keys_per_run, 2 * self.keys_per_run, plan, '{"resources": {}, "callback_errors": []}', True, host, pid,
                token, finished, launch, "archiving" if launch == "trigger" else "daily_totals", None,
            )

    def _attempt_rows(self) -> Iterator[tuple[str, tuple[Any, ...] | None]]:
        """(kind, row): attempts, the invocation of each failure, outlet events, log lines."""
        for number, run_id in enumerate(self.run_ids):
            started = self.base + number * 600.0
            for index, key in enumerate(self.run_keys(number)):
                at = started + index * 0.5
                failed = number % 7 == 0 and index % 25 == 3  # 2 % of the failing runs' exports
                if failed:
                    yield "attempt", (
                        run_id, "exports", index, "failed", None, True, key, 1, at, at + 0.2, 0.2,
                        "builtins.FileNotFoundError", "the export for this day has not arrived", TRACEBACK,
                        None, None, None,
                    )
                    yield "invocation", (
                        run_id, "exports", index, 1, at, at + 0.2, False, "builtins.FileNotFoundError",
                        "the export for this day has not arrived",
                    )
                    yield "attempt", (
                        run_id, "daily_total", index, "skipped", "dependency_failed", True, key, 0, None, None, 0.0,
                        None, None, None, json.dumps([["exports", index]]), None, None,
                    )
                else:
                    yield "attempt", (
                        run_id, "exports", index, "success", None, True, key, 1, at, at + 0.2, 0.2, None, None, None,
                        None, "executed", None,
                    )
                    yield "attempt", (
                        run_id, "daily_total", index, "success", None, True, key, 1, at + 0.3, at + 0.4, 0.1, None,
                        None, None, None, "executed", None,
                    )
                    for asset, finished in (("exports", at + 0.2), ("daily_total", at + 0.4)):
                        yield "event", (asset, key, None, "{}", finished, "outlet", run_id, asset, True, 1, None, None)
                yield "log", (  # a run's lines are numbered in its write order
                    run_id, index + 1, "exports", index, 1, 1, at + 0.01, "log", 20, "partita.asset.exports",
                    "reading the export",
                )

    def _published(self, count: int) -> Iterator[tuple[Any, ...]]:
        for number in range(count):
            at = self.base + number * 0.005
            key = self.key(number % DAYS)
            yield (
                "exports", key, None, json.dumps({"rows": number % 1000}), at, "external", None, None, None, None,
                f"key:feed-{number}", f"{number:064x}",
            )

    def build(self) -> None:
        store = open_store(self.url)  # partita's schema and indexes
        database = store.database
        try:
            with database.write() as connection:
                database.insert(connection, runs, list(self._runs(self.plan())))
                database.insert(
                    connection, run_tags, [(run_id, "team", "data") for run_id in self.run_ids[::3]]
                )
            kinds: dict[str, list[tuple[Any, ...]]] = {"attempt": [], "invocation": [], "event": [], "log": []}
            tables = {"attempt": (attempts, 0), "invocation": (invocations, 0), "event": (events, 1), "log": (attempt_logs, 0)}
            outlets = 0
            for kind, row in self._attempt_rows():
                assert row is not None
                kinds[kind].append(row)
                outlets += kind == "event"
                if len(kinds[kind]) >= _CHUNK:
                    self._flush(database, tables[kind], kinds[kind])
            for kind, rows in kinds.items():
                if rows:
                    self._flush(database, tables[kind], rows)
            for batch in _chunks(self._published(max(0, self.event_count - outlets))):
                self._flush(database, (events, 1), batch)
            self._triggers(database)
            if database.dialect == "sqlite":
                with database.write() as connection:
                    connection.exec_driver_sql("ANALYZE")
            else:
                with database.engine.connect() as connection:
                    connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
        finally:
            store.close()

    @staticmethod
    def _flush(database: Any, table: tuple[Any, int], rows: list[tuple[Any, ...]]) -> None:
        with database.write() as connection:
            database.insert(connection, table[0], rows, skip=table[1])
        rows.clear()

    def _triggers(self, database: Any) -> None:
        now = time.time()
        host, pid, _ = self.owner
        with database.write() as connection:
            database.insert(connection, daemons, [("d" * 32, host, pid, now - 86400, now - 2, None)])
            database.insert(
                connection,
                trigger_requests,
                [
                    ("archiving", self.key(DAYS - 1 - index), 0, "pending", "[1]", None, now, None, None, 0, 0, None, None)
                    for index in range(500)
                ],
                skip=1,
            )


#: Requests timed as a first view too: the server keeps run pages it drew, so a repeat costs less.
FIRST_VIEW = " (first view)"


def _median_ms(client: TestClient, url: str, repeat: int) -> tuple[float, int]:
    first_view = url.endswith(FIRST_VIEW)
    url = url.removesuffix(FIRST_VIEW)
    client.get(url)  # warm-up: the first request of a route compiles its queries
    timings, status = [], 0
    for _ in range(repeat):
        if first_view:
            client.app.state.run_pages = None  # type: ignore[attr-defined]  # forget every page drawn
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        status = response.status_code
    return statistics.median(timings), status


def _routes() -> list[str]:
    """Every GET route the app mounts, read now; the live stream never ends, so it is left out."""
    found = []
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and "GET" in route.methods and not route.path.endswith("/stream"):
                found.append(route.path)
    return list(dict.fromkeys(found))


def _requests(seed: Seed) -> list[str]:
    """The routes with sample parameters, then variants with filters and deep cursors."""
    newest = seed.run_ids[-1]
    failing = next(run_id for number, run_id in reversed(list(enumerate(seed.run_ids))) if number % 7 == 0)
    fill = {"{run_id}": newest, "{name}": "exports", "{flow}": "archiving", "{id}": newest}
    requests = []
    for path in _routes():
        for placeholder, value in fill.items():
            path = path.replace(placeholder, value)
        if "{" not in path:
            requests.append(path)
    window = (seed.key(DAYS - MAX_API_STATUS_KEYS), seed.key(DAYS - 1))  # the largest window one request covers
    # The grid's largest window: 100,000 days from the first, half of them with history.
    widest = f"start={seed.key(0)}&end={(seed.first + dt.timedelta(days=MAX_GRID_KEYS - 1)).isoformat()}"
    history = f"start={seed.key(0)}&end={seed.key(DAYS - 1)}"
    middle = seed.run_ids[len(seed.run_ids) // 2]
    requests += [
        "/api/v1/runs?limit=500",
        f"/api/v1/runs?before={middle}&limit=50",
        "/api/v1/runs?launched_by=ui&tag=team=data",
        "/api/v1/runs?status=failed&flow=daily_totals",
        f"/api/v1/runs/{failing}",
        f"/api/v1/runs/{failing}/attempts?status=failed",
        f"/api/v1/runs/{failing}/attempts?limit=1000",
        f"/api/v1/runs/{failing}/logs?partition_key={seed.run_keys(len(seed.run_ids) - 7)[0]}",
        f"/api/v1/assets/exports/status?start={seed.key(DAYS - 30)}&end={seed.key(DAYS - 1)}",
        f"/api/v1/assets/exports/status?start={window[0]}&end={window[1]}",
        f"/api/v1/assets/daily_total/status?start={window[0]}&end={window[1]}",
        "/api/v1/events?limit=1000",
        f"/api/v1/events?since={seed.event_count - 100}",
        f"/api/v1/events?asset=exports&partition_key={seed.key(DAYS - 1)}",
        f"/runs/{failing}",
        f"/runs/{newest}{FIRST_VIEW}",
        "/runs?status=failed",
        f"/assets/exports?{history}",
        f"/assets/exports?{widest}",
        f"/assets/daily_total/grid?{widest}",
        f"/api/v1/assets/exports/status/ranges?{widest}",
        f"/api/v1/assets/exports/status/ranges?{history}&limit=10000",
    ]
    return [request for request in dict.fromkeys(requests) if not request.endswith("/stream")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--keys-per-run", type=int, default=KEYS_PER_RUN,
        help="Keys of each run (two attempts each): 50,000 makes the store one run of 100,000 attempts.",
    )  # fmt: skip
    parser.add_argument("--postgres", metavar="URL", default=None, help="Seed and time this PostgreSQL store instead.")
    parser.add_argument("--only", metavar="TEXT", default="", help="Time only the requests whose path holds TEXT.")
    arguments = parser.parse_args()
    keys_per_run = arguments.keys_per_run
    run_count = max(1, arguments.attempts // (2 * keys_per_run))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        url = arguments.postgres or f"sqlite:///{root}/ui.db"
        entry = root / "ui_entry.py"
        seed = Seed(url, entry, run_count, arguments.events, keys_per_run)
        entry.write_text(ENTRY.format(first=seed.first.isoformat()))
        started = time.perf_counter()
        seed.build()
        built = time.perf_counter() - started
        backend = "postgresql" if arguments.postgres else "sqlite"
        print(
            f"setup ({backend}): {run_count * 2 * keys_per_run:,} attempts in {run_count:,} runs, "
            f"{arguments.events:,} events, built in {built:.1f} s",
            file=sys.stderr,
        )
        settings = UiSettings(entry=str(entry), store_url=url, token=TOKEN)
        with TestClient(create_app(settings), raise_server_exceptions=False) as client:
            slow = 0
            for request in (request for request in _requests(seed) if arguments.only in request):
                try:
                    median, status = _median_ms(client, request, arguments.repeat)
                except Exception:  # noqa: BLE001 - one failing route is reported, the others still timed
                    print(f"GET {request}: failed\n{traceback.format_exc()}")
                    continue
                under = median < TARGET_MS
                slow += not under
                print(
                    f"GET {request} ({backend}, {arguments.attempts:,} attempts, {arguments.events:,} events): "
                    f"HTTP {status}, median {median:.1f} ms of {arguments.repeat}, "
                    f"{'under' if under else 'OVER'} {TARGET_MS:.0f} ms"
                )
        print(f"{slow} request{'s' if slow != 1 else ''} over {TARGET_MS:.0f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
