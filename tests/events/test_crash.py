"""An acknowledged event survives the death of its producer (SPEC §1.4, §8).

A real producer process publishes an event, prints the receipt's id to
stdout, flushes and then blocks; the test reads the id and kills the process
with SIGKILL — no cleanup, no atexit, no journal flush. A fresh connection
to the store (SQLite, then PostgreSQL) finds the event with that id, its
payload and its provenance.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import partita as p

DEADLINE_SECONDS = 60.0

BODY_PRODUCER = """
import sys
import threading

import partita as p

registry = p.AssetRegistry()


@p.asset(registry=registry)
def batches():
    return 1


@p.asset(partition_def=p.StaticPartitionDef("tenants", ["acme-private-7731"]), registry=registry)
def ingest(context):
    receipt = context.emit("batches", extra={"batch": 41})
    print(f"RECEIPT {receipt.id} {receipt.timestamp.isoformat()}", flush=True)
    threading.Event().wait()  # still running when it is killed


if __name__ == "__main__":
    p.Flow(["ingest"], registry=registry, store=sys.argv[1]).run({"partition_keys": ["acme-private-7731"]})
"""

EXTERNAL_PRODUCER = """
import sys
import threading

import partita as p

registry = p.AssetRegistry()


@p.asset(registry=registry)
def batches():
    return 1


if __name__ == "__main__":
    store = p.open_store(sys.argv[1])
    receipt = p.publish_event(store, registry, "batches", extra={"batch": 41}, dedupe_key="batch-41")
    print(f"RECEIPT {receipt.id} {receipt.timestamp.isoformat()}", flush=True)
    threading.Event().wait()
"""


def _receipt_line(process: subprocess.Popen[str]) -> str:
    """The producer's RECEIPT line, read with a deadline (never a sleep)."""
    assert process.stdout is not None
    deadline = time.monotonic() + DEADLINE_SECONDS
    buffered = ""
    while "\n" not in buffered:
        remaining = deadline - time.monotonic()
        assert remaining > 0, "the producer never printed its receipt"
        ready, _, _ = select.select([process.stdout], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(process.stdout.fileno(), 4096).decode()
        if not chunk:
            stderr = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"the producer exited without a receipt (code {process.wait()}):\n{stderr}")
        buffered += chunk
    line = buffered.split("\n", 1)[0]
    assert line.startswith("RECEIPT "), line
    return line


@pytest.mark.parametrize("source", ["body", "external"])
def test_an_acknowledged_event_survives_sigkill_of_its_producer(tmp_path: Path, store_url, source):
    script = tmp_path / "producer.py"
    script.write_text(textwrap.dedent(BODY_PRODUCER if source == "body" else EXTERNAL_PRODUCER))
    env = {key: value for key, value in os.environ.items() if key != "PARTITA_STORE"}
    process = subprocess.Popen(
        [sys.executable, str(script), store_url],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, event_id, timestamp = _receipt_line(process).split()
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    store = p.open_store(store_url)
    try:
        events = {event.id: event for event in store.list_events(asset="batches")}
    finally:
        store.close()
    event = events[int(event_id)]
    assert event.extra == {"batch": 41}
    assert event.timestamp.isoformat() == timestamp
    if source == "body":
        assert event.source.kind is p.SourceKind.ATTEMPT
        assert (event.source.asset, event.source.partition_key_present, event.source.invocation) == ("ingest", True, 1)
        assert event.source.run_id
    else:
        assert event.source.kind is p.SourceKind.EXTERNAL
