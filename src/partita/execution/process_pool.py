"""Worker processes owned by the process executor, one job in flight per worker.

`concurrent.futures.ProcessPoolExecutor` breaks as a whole when one worker
dies and fails every pending future with it, so one body calling
``os._exit`` failed unrelated attempts. Here each worker holds at most one
job: a dead worker identifies exactly the attempt it held, that attempt
fails with an error naming the exit code or signal, a replacement starts,
and every other attempt runs as if nothing happened.

Workers end with their driver, even when it is killed outright. On Linux
the kernel sends a worker SIGKILL when the driver thread that forked it
ends (``PR_SET_PDEATHSIG``). On every platform a thread in the worker also
watches a pipe that only the driver holds open, and ends the worker when
that pipe closes.

Threads: jobs are sent and workers started on the event loop's thread
(so the forking thread lives as long as the run). One daemon thread per
pool waits on the workers' pipes and process sentinels; it hands the next
queued job to a worker that finished and posts completions to the loop in
batches. It never keeps the interpreter alive.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import enum
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from partita.errors import ExecutionError
from partita.events.emission import activate, deactivate
from partita.execution.run_constants import install, load_call
from partita.execution.worker_async import CANCEL_SIGNAL, ignore_cancel_signal, run_coroutine
from partita.execution.workers import Completion, CompletionInbox

__all__ = ["WorkerPool"]

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_STOP = b""  # an empty job: the worker returns
#: Before a message of the run's shared objects (a job is a pickle, whose first byte is never this one).
_SHARED = b"\x01"
_SHARED_TOKEN = "process-pool"  # a worker process serves one pool, so one token


class _Reply(enum.IntEnum):
    """What a worker sends back for one job (pickled with the value)."""

    RETURNED = 0
    RAISED = 1
    UNSENDABLE = 2  # the job or its outcome could not cross the process boundary; the value says why


@dataclass(slots=True, eq=False)
class _Job:
    token: Any
    asset_name: str
    payload: bytes
    submitted: float


@dataclass(slots=True, eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection
    job: _Job | None = None
    gone: bool = False
    #: Whether the worker was sent the run's shared objects (before its first job).
    shared: bool = False


class WorkerPool:
    """``size`` worker processes for one run, each replaced when it dies; jobs wait in a queue for an idle one."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Callable[[list[Completion]], None],
        size: int,
        *,
        parent_death_signal: bool = True,
    ) -> None:
        self._forks = sys.platform.startswith("linux")
        self._context = multiprocessing.get_context("fork" if self._forks else "spawn")
        self._loop = loop
        self._size = size
        self._death_signal = parent_death_signal and _prctl() is not None
        self._inbox = CompletionInbox(loop, deliver)
        self._lock = threading.Lock()  # guards the fields below; held only for bookkeeping
        self._workers: list[_Worker] = []
        self._idle: list[_Worker] = []
        self._queue: collections.deque[_Job] = collections.deque()
        self._closed = False
        self._shared: bytes | None = None
        self._version = 0  # bumped when the set of workers changes: the collector rebuilds its wait list
        self._alive_reader, self._alive_writer = self._context.Pipe(duplex=False)
        self._wake_reader, self._wake_writer = self._context.Pipe(duplex=False)
        self._collector = threading.Thread(target=self._collect, name="partita-process-workers", daemon=True)
        self._collector.start()

    # -- the loop's side --------------------------------------------------------

    def fill(self) -> None:
        """Start every missing worker: before the run's work begins, and to replace one that died.

        A forked child inherits the SQLite lock state of the driver's
        threads at that instant; forking before the run's journal gets busy
        keeps a store write in progress from being copied into a worker as
        a lock that never ends there.
        """
        while True:
            with self._lock:
                if self._closed or len(self._workers) >= self._size:
                    return
            if not self._spawn():
                return

    def submit(self, token: Any, asset_name: str, payload: bytes) -> None:
        """Run the pickled job on an idle worker, or queue it (starting a worker if there is room)."""
        job = _Job(token, asset_name, payload, time.time())
        with self._lock:
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._queue.append(job)
                room = len(self._workers) < self._size
            else:
                worker.job = job
        if worker is not None:
            self._send(worker, job)
        elif room:
            self._spawn()

    def _spawn(self) -> bool:
        driver_end, worker_end = self._context.Pipe()
        with self._lock:
            siblings = [worker.conn for worker in self._workers]
        # A forked worker inherits every descriptor of the driver: it closes the
        # driver's ends, so that only the driver keeps the liveness pipe open
        # and a dead worker's pipe reads as closed.
        inherited = (
            (self._alive_writer, self._wake_reader, self._wake_writer, driver_end, *siblings) if self._forks else ()
        )
        process = self._context.Process(
            target=_serve,
            args=(worker_end, self._alive_reader, inherited, os.getpid(), self._death_signal),
            name="partita-process-worker",
        )
        try:
            process.start()
        except OSError as exc:
            driver_end.close()
            worker_end.close()
            self._cannot_spawn(exc)
            return False
        worker_end.close()
        worker = _Worker(process, driver_end)
        with self._lock:
            self._workers.append(worker)
            self._version += 1
            job = self._queue.popleft() if self._queue else None
            if job is None:
                self._idle.append(worker)
            else:
                worker.job = job
        self._wake()
        if job is not None:
            self._send(worker, job)
        return True

    def _wake(self) -> None:
        """Make the collector rebuild its wait list."""
        try:
            self._wake_writer.send_bytes(b"w")
        except OSError:
            pass  # the collector has ended

    def _cannot_spawn(self, exc: OSError) -> None:
        with self._lock:
            if self._workers:
                return  # the live workers take the queue over
            stranded = list(self._queue)
            self._queue.clear()
        for job in stranded:
            error = ExecutionError(
                f"asset {job.asset_name!r}: the process executor cannot start a worker process: {exc}"
            )
            self._inbox.put((job.token, False, error, job.submitted, time.time()))

    def cancel_async_bodies(self) -> None:
        """Signal every busy worker: an async body there is cancelled, a sync body ignores it."""
        with self._lock:
            busy = [worker.process.pid for worker in self._workers if worker.job is not None and not worker.gone]
        for pid in busy:
            if pid is None:
                continue
            try:
                os.kill(pid, CANCEL_SIGNAL)
            except OSError:
                pass  # it ended meanwhile

    def share(self, table: bytes) -> None:
        """The run's shared objects (`partita.execution.run_constants`): each worker gets them once, first."""
        self._shared = _SHARED + table

    def _send(self, worker: _Worker, job: _Job) -> None:
        try:
            if not worker.shared and self._shared is not None:
                worker.conn.send_bytes(self._shared)
                worker.shared = True
            worker.conn.send_bytes(job.payload)
        except OSError:
            # The worker died before taking the job: it never ran, so it goes
            # back to the queue; the collector buries the worker and a
            # replacement takes the job.
            with self._lock:
                if worker.job is job:
                    worker.job = None
                    self._queue.appendleft(job)

    def shutdown(self, wait: float | None = None) -> bool:
        """Stop idle workers, kill busy ones (their run is over); True once all have ended within ``wait``."""
        with self._lock:
            closing, self._closed = not self._closed, True
            self._queue.clear()
            self._idle.clear()
            workers = list(self._workers)
        if closing:
            for worker in workers:
                if worker.job is None:
                    try:
                        worker.conn.send_bytes(_STOP)
                    except OSError:
                        pass  # already gone
                else:
                    worker.process.kill()
            self._alive_writer.close()  # and any worker the collector has not seen yet ends too
            self._wake()
        self._collector.join(wait)
        return not self._collector.is_alive()

    # -- the collector thread ---------------------------------------------------

    def _collect(self) -> None:
        version = -1
        by_object: dict[Any, _Worker] = {}
        waitables: list[Any] = []
        while True:
            with self._lock:
                if self._closed and not self._workers:
                    break
                if version != self._version:
                    version = self._version
                    by_object = {}
                    for worker in self._workers:
                        by_object[worker.conn] = worker
                        by_object[worker.process.sentinel] = worker
                    waitables = [self._wake_reader, *by_object]
            for ready in wait(waitables):
                if ready is self._wake_reader:
                    while self._wake_reader.poll():
                        self._wake_reader.recv_bytes()
                    continue
                worker = by_object[ready]
                if worker.gone:
                    continue
                if ready is worker.conn:
                    if self._receive(worker):
                        continue
                else:
                    # It may have replied before it ended: take the reply first.
                    while worker.conn.poll() and self._receive(worker):
                        pass
                self._bury(worker)
        # The wake-up writer is left to the garbage collector: the loop's thread may still be writing to it.
        self._wake_reader.close()
        self._alive_reader.close()

    def _receive(self, worker: _Worker) -> bool:
        """Take one reply and hand the worker its next job; False when its pipe has closed."""
        try:
            data = worker.conn.recv_bytes()
        except (EOFError, OSError):
            return False
        next_job = None
        with self._lock:
            job, worker.job = worker.job, None
            if not self._closed:
                if self._queue:
                    next_job = worker.job = self._queue.popleft()
                else:
                    self._idle.append(worker)
        if next_job is not None:
            self._send(worker, next_job)  # before decoding: the worker gets busy again at once
        if job is not None and not self._closed:
            self._inbox.put(_completion(job, data))
        return True

    def _bury(self, worker: _Worker) -> None:
        worker.process.join(5)  # its sentinel fired or its pipe closed: it has ended, or is about to
        with self._lock:
            worker.gone = True
            self._workers.remove(worker)
            if worker in self._idle:
                self._idle.remove(worker)
            job, worker.job = worker.job, None
            self._version += 1
            refill = not self._closed
        worker.conn.close()
        if job is not None and not self._closed:
            error = ExecutionError(
                f"asset {job.asset_name!r}: its worker process died while running it ({_how(worker.process.exitcode)})"
            )
            self._inbox.put((job.token, False, error, job.submitted, time.time()))
        if refill:
            try:
                self._loop.call_soon_threadsafe(self.fill)
            except RuntimeError:
                pass  # the loop closed: the run was abandoned


def _how(exitcode: int | None) -> str:
    if exitcode is None:
        return "it did not exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def _completion(job: _Job, data: bytes) -> Completion:
    try:
        reply, value, started, finished = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - an outcome that cannot be rebuilt here fails its attempt
        error = ExecutionError(
            f"asset {job.asset_name!r}: its outcome cannot be received from the worker process: "
            f"{type(exc).__name__}: {exc}"
        )
        return (job.token, False, error, job.submitted, time.time())
    if reply is _Reply.RETURNED or reply is _Reply.RAISED:
        return (job.token, reply is _Reply.RETURNED, value, started, finished)
    return (job.token, False, ExecutionError(f"asset {job.asset_name!r}: {value}"), started, finished)


# -- the worker's side ------------------------------------------------------------


_prctl_function: Any = None


def _prctl() -> Any:
    """libc's ``prctl`` on Linux, looked up once in the driver (forked workers inherit it); else None."""
    global _prctl_function
    if _prctl_function is None and sys.platform.startswith("linux"):
        try:
            _prctl_function = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl_function = False
    return _prctl_function or None


def _serve(
    conn: Connection, alive: Connection, inherited: tuple[Connection, ...], driver_pid: int, death_signal: bool
) -> None:
    """A worker's life: run one job at a time until the driver stops it or goes away."""
    for other in inherited:
        other.close()
    prctl = _prctl() if death_signal else None
    if prctl is not None and prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != driver_pid:
        os._exit(1)  # the driver died before the signal was armed
    threading.Thread(target=_exit_with_driver, args=(alive,), name="partita-driver-watch", daemon=True).start()
    # Ctrl-C reaches the whole process group: the driver cancels the run and stops workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ignore_cancel_signal()
    try:
        signal.set_wakeup_fd(-1)  # a forked worker must not wake the driver's event loop
    except ValueError:
        pass
    while True:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if payload == _STOP:
            return
        if payload[:1] == _SHARED:
            try:
                install(_SHARED_TOKEN, payload[1:])
            except Exception:  # noqa: BLE001 - each job then fails, saying its inputs cannot be loaded
                pass
            continue
        reply = _run(payload)
        del payload
        try:
            conn.send_bytes(reply)
        except OSError:
            return
        del reply


def _exit_with_driver(alive: Connection) -> None:
    try:
        alive.recv_bytes()  # the driver never writes: this returns when its end closes
    except (EOFError, OSError):
        pass
    os._exit(1)


def _run(payload: bytes) -> bytes:
    """Call one body and make its outcome portable."""
    try:
        fn, kwargs, emitter = load_call(payload, _SHARED_TOKEN)
    except BaseException as exc:  # noqa: BLE001 - reported as the attempt's failure
        now = time.time()
        message = f"its body or inputs cannot be loaded in the worker process: {type(exc).__name__}: {exc}"
        return pickle.dumps((_Reply.UNSENDABLE, message, now, now))
    active = activate(emitter)
    started = time.time()
    try:
        value = fn(**kwargs)
        if asyncio.iscoroutine(value):
            value = run_coroutine(value)
        reply = _Reply.RETURNED
    except BaseException as exc:  # noqa: BLE001 - returned as the attempt's failure
        value, reply = exc, _Reply.RAISED
    finished = time.time()
    deactivate(active)
    try:
        return pickle.dumps((reply, value, started, finished), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - unpicklable outputs and exceptions are reported by name
        what = "output" if reply is _Reply.RETURNED else f"exception ({type(value).__name__}: {value})"
        message = f"its {what} cannot be sent back from the worker process: {exc}"
        return pickle.dumps((_Reply.UNSENDABLE, message, started, finished))
