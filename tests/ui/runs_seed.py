"""Seeding runs for the runs and live tests, and reading a server's event stream as a client would."""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from partita import RunResult
from partita.entry import load_entry
from partita.flow import Flow

from .support import ENTRY


def entry_flow() -> Flow:
    return load_entry(ENTRY)


def run_days(
    store_url: str, first: str, last: str, *, keys: bool = True, tags: dict[str, str] | None = None
) -> RunResult:
    """Run the entry's daily chain over [first, last] into ``store_url``."""
    flow = entry_flow().with_store(store_url, record_partition_keys=keys)
    if tags:
        flow = flow.with_tags(tags)
    return flow.run({"partition_range": (dt.date.fromisoformat(first), dt.date.fromisoformat(last))})


@dataclass(frozen=True)
class Message:
    event: str
    data: str
    #: When the client received it (``time.time()``).
    at: float


class StreamReader:
    """Reads ``/api/v1/stream`` in a thread; messages wait in a queue for `next`."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self._headers = headers or {}
        self.messages: queue.Queue[Message] = queue.Queue()
        self.comments: list[str] = []
        self.status: int | None = None
        self.ended = threading.Event()
        self._received: list[Message] = []
        self._response: httpx.Response | None = None
        self._positions: dict[str, int] = {}
        self._client = httpx.Client(timeout=httpx.Timeout(30.0, read=60.0))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event, data = "message", ""
        try:
            with self._client.stream("GET", self.url, headers=self._headers) as response:
                self._response = response
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith(":"):
                        self.comments.append(line)
                    elif line.startswith("event: "):
                        event = line[len("event: ") :]
                    elif line.startswith("data: "):
                        data = line[len("data: ") :]
                    elif line == "" and data:
                        self.messages.put(Message(event, data, time.time()))
                        event, data = "message", ""
        except httpx.HTTPError:
            pass
        finally:
            self.ended.set()

    @classmethod
    def with_headers(cls, url: str, headers: dict[str, str]) -> StreamReader:
        return cls(url, headers)

    def next(self, event: str, where: Callable[[Message], bool] = lambda _: True, timeout: float = 10.0) -> Message:
        """The next message named ``event`` that ``where`` accepts; messages of other names stay for their own `next`."""
        deadline = time.monotonic() + timeout
        position = self._positions.get(event, 0)
        while True:
            while position < len(self._received):
                message = self._received[position]
                position += 1
                if message.event == event and where(message):
                    self._positions[event] = position
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {event!r} message within {timeout} s")
            try:
                self._received.append(self.messages.get(timeout=remaining))
            except queue.Empty:
                continue

    def drain(self, settle: float = 0.0) -> list[Message]:
        """Every message waiting now (after ``settle`` seconds of quiet, when given)."""
        found: list[Message] = []
        while True:
            try:
                found.append(self.messages.get(timeout=settle) if settle else self.messages.get_nowait())
            except queue.Empty:
                return found

    def close(self) -> None:
        """Hang up, as a closed browser tab does (the reading thread's socket is shut under it)."""
        if self._response is not None:
            # Shut the socket itself: closing the response from this thread would not wake the reading one.
            stream = self._response.extensions.get("network_stream")
            connection = None if stream is None else stream.get_extra_info("socket")
            if connection is not None:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        self._client.close()
        self._thread.join(timeout=5)


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """Poll ``condition`` until it is truthy (its value) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.02)
