"""Shared resource pools: slots leased from the store, so a limit holds across runs and processes.

A `ResourcePolicy(shared=True)` gate admits an invocation only once the
store granted it a slot of the policy's pool. Acquiring, renewing and
releasing are store writes, so they run on one thread per run (`_PoolThread`),
never on the event loop: a denied attempt waits while other work proceeds,
and asks again after a backoff (`LeaseTiming`), or at once when an
invocation of the same pool finishes in this run. The engine talks to the
store through the `PoolLeases` protocol; `partita.store.pools` implements it.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from partita.errors import ConfigurationError, PartitaError, StoreError

if TYPE_CHECKING:
    from partita.definitions.policies import ResourcePolicy
    from partita.execution.graph import TaskState, Token

__all__ = [
    "LEASE_TIMING",
    "LeaseTiming",
    "PoolAccess",
    "PoolLeases",
    "PoolSlots",
    "PooledGate",
    "SharedPools",
    "SlotRequest",
]

_log = logging.getLogger("partita.pools")


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How long a lease lasts unrenewed, how often a holder renews, and how a denied acquirer polls.

    A killed holder's slot comes back at most ``lease_seconds`` after its
    last renewal; renewing three times per lease rides out a slow write.
    """

    lease_seconds: float = 15.0
    renew_seconds: float = 5.0
    poll_min_seconds: float = 0.05
    poll_max_seconds: float = 0.5


#: The timing a run reads when it starts (an internal setting: tests of killed holders shorten it).
LEASE_TIMING = LeaseTiming()


@dataclass(frozen=True, slots=True)
class SlotRequest:
    """One invocation asking its pool for a slot; ``waiting`` counts the run's attempts queued on the pool."""

    pool: str
    limit: int
    run_id: str
    asset: str
    key_index: int
    partition_key: str | None
    waiting: int
    lease_seconds: float


class PoolLeases(Protocol):
    """Leased pool slots in a store shared by every process that runs flows on it."""

    def acquire_slot(self, request: SlotRequest) -> str | None:
        """A lease id when a slot was free (one transaction), else None (and the run is recorded as waiting)."""
        ...

    def renew_leases(self, lease_ids: Sequence[str], run_id: str, lease_seconds: float) -> int:
        """Push back the expiry of these leases and of the run's waiting rows; how many leases were still held."""
        ...

    def release_leases(self, lease_ids: Sequence[str]) -> None: ...

    def withdraw_run(self, run_id: str) -> None:
        """Release every lease and waiting row the run still has."""
        ...


class PooledGate(Protocol):
    """What a pool needs of a resource gate (`admission.ResourceGate`, which holds the pool)."""

    policy: ResourcePolicy
    #: A heap of (priority, task, key index): its head is ``queue[0]``.
    queue: list[tuple[tuple[int, int], Any, int]]
    pool: PoolSlots | None

    def forget(self, token: tuple[object, int]) -> None: ...


@dataclass(frozen=True, slots=True)
class PoolAccess:
    """What a run needs to use shared pools: the store's leases, and whether key text may be recorded."""

    leases: PoolLeases
    record_partition_keys: bool = False


class _PoolThread:
    """Runs the store calls of one run's pools in order, and renews its leases between them."""

    def __init__(self, leases: PoolLeases, run_id: str, timing: LeaseTiming, live: Callable[[], list[str]]) -> None:
        self._leases = leases
        self._run_id = run_id
        self._timing = timing
        self._live = live
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="partita-pools", daemon=True)
        self._thread.start()

    def submit(self, work: Callable[[], None]) -> None:
        self._work.put(work)

    def _loop(self) -> None:
        renew_every = self._timing.renew_seconds
        renewed = time.monotonic()
        while True:
            try:
                work = self._work.get(timeout=max(0.0, renewed + renew_every - time.monotonic()))
            except queue.Empty:
                work = _renew_only
            if work is None:
                return
            if work is not _renew_only:
                work()
            if time.monotonic() - renewed >= renew_every:
                renewed = time.monotonic()
                self._renew()

    def _renew(self) -> None:
        leases = self._live()
        try:
            held = self._leases.renew_leases(leases, self._run_id, self._timing.lease_seconds)
        except Exception as exc:  # noqa: BLE001 - renewed again at the next period; the lease outlives one miss
            _log.warning("could not renew pool leases of run %s: %s", self._run_id, exc)
            return
        if held < len(leases):
            _log.warning(
                "run %s lost %d pool lease(s): they expired before renewal and may have been reclaimed",
                self._run_id, len(leases) - held,
            )

    def stop(self) -> None:
        self._work.put(None)
        self._thread.join()


def _renew_only() -> None:
    """Marker: the thread woke to renew, with no other work."""


class PoolSlots:
    """One shared gate's pool: the slot granted to the gate's head attempt, and the slots its invocations hold."""

    __slots__ = ("name", "limit", "pending", "granted", "held", "backoff", "retry", "_pools")

    def __init__(self, pools: SharedPools, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        #: The attempt an acquisition is in flight for.
        self.pending: Token | None = None
        self.granted: tuple[Token, str] | None = None
        self.held: dict[Token, str] = {}
        self.backoff = pools.timing.poll_min_seconds
        self.retry: asyncio.TimerHandle | None = None
        self._pools = pools

    def admits(self, gate: PooledGate, token: Token) -> bool:
        """Whether ``token`` (the gate's head) holds a granted slot; else its acquisition is under way."""
        granted = self.granted
        if granted is not None:
            if granted[0] == token:
                return True
            self.granted = None  # the head changed (a circuit opened): give the slot back
            self._pools.release(self, granted[1])
        if self.pending is None and self.retry is None:
            self._pools.request(self, gate, token)
        return False

    def started(self, token: Token) -> None:
        assert self.granted is not None and self.granted[0] == token
        self.held[token] = self.granted[1]
        self.granted = None

    def finished(self, token: Token) -> None:
        lease = self.held.pop(token, None)
        if lease is not None:
            self._pools.release(self, lease)


class SharedPools:
    """The shared pools of one run: its requests to the store, on one thread, answered on the loop."""

    def __init__(
        self,
        access: PoolAccess,
        run_id: str,
        gates: Mapping[str, PooledGate],
        timing: LeaseTiming,
    ) -> None:
        self.timing = timing
        self._access = access
        self._run_id = run_id
        self._lock = threading.Lock()
        self._live: set[str] = set()
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatch: Callable[[], None] = _nothing
        self._fail: Callable[[TaskState, int, BaseException], None] = _nothing_failed
        self._slots: list[PoolSlots] = []
        for name, gate in gates.items():
            pool = gate.policy.pool_name(name)
            if pool is not None:
                assert gate.policy.max_concurrency is not None  # the policy requires it when shared
                gate.pool = PoolSlots(self, pool, gate.policy.max_concurrency)
                self._slots.append(gate.pool)
        self._thread: _PoolThread | None = None

    @classmethod
    def bind(
        cls, access: PoolAccess | None, run_id: str, gates: Mapping[str, PooledGate]
    ) -> SharedPools | None:
        """The run's shared pools, or None when no gate is shared; refused without a store to lease from."""
        shared = sorted({gate.policy.pool_name(name) or "" for name, gate in gates.items()} - {""})
        if not shared:
            return None
        if access is None:
            raise ConfigurationError(
                "a ResourcePolicy with shared=True needs a store to lease its pool's slots from "
                "(Flow store= or $PARTITA_STORE); without one its limit could hold only within this run"
            )
        return cls(access, run_id, gates, LEASE_TIMING)

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        dispatch: Callable[[], None],
        fail: Callable[[TaskState, int, BaseException], None],
    ) -> None:
        """Begin answering on ``loop``: ``dispatch`` when a slot may be free, ``fail`` when the store refused."""
        self._loop, self._dispatch, self._fail = loop, dispatch, fail
        self._thread = _PoolThread(self._access.leases, self._run_id, self.timing, self._live_leases)

    def _live_leases(self) -> list[str]:
        with self._lock:
            return list(self._live)

    def request(self, slots: PoolSlots, gate: PooledGate, token: Token) -> None:
        assert self._thread is not None and self._loop is not None
        task, key_index = token
        slots.pending = token
        key_text = None
        definition = task.definition
        if self._access.record_partition_keys and definition.partition_def is not None:
            with contextlib.suppress(Exception):  # the attempt itself reports an unformattable key
                key_text = definition.partition_def.format_key(task.keys[key_index])
        request = SlotRequest(
            slots.name, slots.limit, self._run_id, task.name, key_index, key_text, len(gate.queue),
            self.timing.lease_seconds,
        )
        leases, loop = self._access.leases, self._loop

        def acquire() -> None:
            try:
                lease: str | None | BaseException = leases.acquire_slot(request)
            except Exception as exc:  # noqa: BLE001 - answered on the loop, where the attempt fails
                lease = exc if isinstance(exc, PartitaError) else StoreError(
                    f"cannot acquire a slot of pool {slots.name!r}: {exc}"
                )
            if isinstance(lease, str):
                with self._lock:
                    self._live.add(lease)
            with contextlib.suppress(RuntimeError):  # the loop closed: close() releases the lease
                loop.call_soon_threadsafe(self._answered, slots, gate, token, lease)

        self._thread.submit(acquire)

    def _answered(self, slots: PoolSlots, gate: PooledGate, token: Token, lease: str | None | BaseException) -> None:
        slots.pending = None
        if self._closed:
            return
        if isinstance(lease, BaseException):
            self._refused(gate, token, lease)
        elif lease is not None:
            slots.granted = (token, lease)
            slots.backoff = self.timing.poll_min_seconds
            self._dispatch()
        else:
            assert self._loop is not None
            slots.retry = self._loop.call_later(slots.backoff, self._poll, slots)
            slots.backoff = min(slots.backoff * 2, self.timing.poll_max_seconds)

    def _refused(self, gate: PooledGate, token: Token, error: BaseException) -> None:
        """The store failed while acquiring: the attempt fails as on any store error, the run goes on."""
        if gate.queue and (gate.queue[0][1], gate.queue[0][2]) == token:
            heapq.heappop(gate.queue)
            gate.forget(token)
            self._fail(token[0], token[1], error)
        self._dispatch()

    def _poll(self, slots: PoolSlots) -> None:
        slots.retry = None
        if not self._closed:
            self._dispatch()

    def release(self, slots: PoolSlots, lease: str) -> None:
        assert self._thread is not None and self._loop is not None
        leases, loop = self._access.leases, self._loop

        def release() -> None:
            with self._lock:
                self._live.discard(lease)
            try:
                leases.release_leases([lease])
            except Exception as exc:  # noqa: BLE001 - the lease expires on its own; close() tries again
                _log.warning("could not release a lease of pool %r: %s", slots.name, exc)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._released, slots)

        self._thread.submit(release)

    def _released(self, released: PoolSlots) -> None:
        """A slot of this pool came back: the gates waiting on it ask now instead of at their next poll."""
        if self._closed:
            return
        for slots in self._slots:
            if slots.name == released.name and slots.retry is not None:
                slots.retry.cancel()
                slots.retry = None
                slots.backoff = self.timing.poll_min_seconds
        self._dispatch()

    def close(self) -> None:
        """Release every lease and waiting row of the run (success, failure or cancellation alike)."""
        if self._closed:
            return
        self._closed = True
        for slots in self._slots:
            if slots.retry is not None:
                slots.retry.cancel()
        if self._thread is None:
            return  # never started (the run was refused before any body): nothing was leased
        self._thread.stop()
        try:
            self._access.leases.withdraw_run(self._run_id)
        except Exception as exc:  # noqa: BLE001 - the leases expire on their own within their lease
            _log.warning("could not release the pool leases of run %s: %s", self._run_id, exc)


def _nothing() -> None:
    pass


def _nothing_failed(task: Any, key_index: int, error: BaseException) -> None:
    pass
