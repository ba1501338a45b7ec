"""One run's use of a Dask cluster for the Dask executor: its futures, output handles and summaries.

Bodies are queued on the event loop's thread and sent once per loop pass,
in one graph update. The run's shared objects (its catalog and partition
definitions) reach every worker once, as a worker plugin, at the first
submit. Workers publish each body's summary on the run's topic; the
client's thread posts it to the loop in batches (`CompletionInbox`).
Outputs stay on the workers behind `DaskOutput` handles; an input held on
the cluster is handed to Dask as its future, so the value moves between
workers and never through the driver.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from partita.errors import ExecutionError
from partita.execution.inputs import PartitionedOutputs
from partita.execution.log_capture import RemoteOutcome
from partita.execution.workers import Completion, CompletionInbox
from partita.results.deferred import DeferredOutput

if TYPE_CHECKING:
    from partita.execution.run_constants import RunConstants

__all__ = ["DaskOutput", "DaskSession"]

Deliver = Callable[[list[Completion]], None]


class DaskOutput(DeferredOutput):
    """A body's output kept on the cluster: passed downstream as a future, fetched only when asked."""

    __slots__ = ("_future", "_value", "_state", "__weakref__")

    _HELD, _FETCHED, _RELEASED = 0, 1, 2

    def __init__(self, future: Any) -> None:
        self._future = future
        self._value: Any = None
        self._state = self._HELD

    @property
    def held(self) -> bool:
        """Whether the cluster still holds the value for this handle."""
        return self._state == self._HELD

    def as_input(self) -> tuple[bool, Any]:
        """``(True, future)`` while the cluster holds it, else ``(False, value)``."""
        if self._state == self._HELD:
            return True, self._future
        if self._state == self._FETCHED:
            return False, self._value
        raise ExecutionError("a released Dask output was asked for as an input; this is a scheduling fault")

    def resolve(self) -> Any:
        if self._state == self._FETCHED:
            return self._value
        if self._state == self._RELEASED:
            raise LookupError(
                "this output was released on the Dask cluster once every attempt that reads it had finished; "
                "outputs that no asset of the run reads are kept (DaskExecutor(keep_unread_outputs=True))"
            )
        try:
            value = self._future.result().value
        except Exception as exc:  # noqa: BLE001 - a lost worker or a closed client: named, never a raw traceback
            raise ExecutionError(f"the output cannot be fetched from the Dask cluster: {type(exc).__name__}: {exc}") from None
        self.fetched(value)
        return value

    def fetched(self, value: Any) -> None:
        self._value, self._future, self._state = value, None, self._FETCHED

    def release(self) -> None:
        if self._state == self._HELD:
            self._future, self._state = None, self._RELEASED  # dropping the future lets Dask forget the key

    def __repr__(self) -> str:
        state = ("held on the cluster", "fetched", "released")[self._state]
        return f"DaskOutput(<{state}>)"

@dataclass(slots=True, eq=False)
class _Pending:
    """One submitted body: what the driver needs when its summary or its failure comes back."""

    token: Any
    asset_name: str
    submitted: float
    key: str
    #: The task's arguments until it is sent (then dropped): payload, shared-objects token, inputs, gathered, topic.
    call: tuple[Any, ...] | None
    body: Any = None

class DaskSession:
    """One run's use of a cluster: its futures, its output handles, its summaries topic."""

    def __init__(
        self, client: Any, cluster: Any, *, owns_client: bool, loop: asyncio.AbstractEventLoop, deliver: Deliver
    ) -> None:
        import cloudpickle  # with dask: this module is imported without the extra installed

        from partita.execution.dask_tasks import SharedObjects, cancel_async_bodies, run_body
        from partita.execution.run_constants import RunConstants, shared_objects_of

        self._client, self._cluster, self._owns_client = client, cluster, owns_client
        self._loop = loop
        self._run_body, self._loads = run_body, cloudpickle.loads
        self._shared_objects = lambda emitter: RunConstants(shared_objects_of(emitter), by_value=True)
        self._plugin, self._cancel_on_workers = SharedObjects, cancel_async_bodies
        #: The run's shared objects and the token its workers know them by, sent at the first submit.
        self._constants: tuple[RunConstants, str] | None = None
        self._inbox = CompletionInbox(loop, deliver)
        self._lock = threading.Lock()  # guards _pending: the loop adds, Dask's threads remove
        self._pending: dict[str, _Pending] = {}
        self._outputs: weakref.WeakSet[DaskOutput] = weakref.WeakSet()
        self._closed = False
        self._queued: list[_Pending] = []  # submitted in this loop pass, not yet sent
        self._flush_scheduled = False
        # Workers publish each body's summary on this run's topic; the scheduler forwards it here.
        self._topic = f"partita-summaries-{uuid.uuid4().hex}"
        client.subscribe_topic(self._topic, self._summary_arrived)

    def submit(self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any) -> None:
        """Queue one body for the cluster; the bodies queued in one loop pass go in one graph update."""
        run_id = getattr(emitter, "run_id", None) or "run"
        invocation = getattr(emitter, "invocation", None) or 1
        key = f"partita-{run_id}-{asset_name}-{token[1]}-{invocation}"
        plain, inputs, gathered = _split_inputs(kwargs)
        _pickle_unimportable_modules(fn)
        submitted = time.time()
        try:
            constants, shared = self._constants or self._ship_constants(emitter)
            payload = constants.dumps((fn, plain, emitter))
        except Exception as exc:  # noqa: BLE001 - what cannot be sent fails its own attempt
            self._inbox.put((token, False, _unsendable(asset_name, exc), submitted, time.time()))
            return
        entry = _Pending(token, asset_name, submitted, key, (payload, shared, inputs, gathered, self._topic))
        with self._lock:
            self._pending[key] = entry
        self._queued.append(entry)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """On the loop: send the queued bodies to the scheduler as one graph update (``Client.map``).

        One update per loop pass, not one per body, is what keeps the
        driver's scheduler and sockets from growing busier than the bodies.
        """
        self._flush_scheduled = False
        queued, self._queued = self._queued, []
        if not queued:
            return
        columns = [list(column) for column in zip(*(entry.call for entry in queued), strict=True)]
        try:
            # Under the lock: a summary that arrives at once finds its entry's future already set,
            # and a run closed meanwhile sends nothing.
            with self._lock:
                if self._closed:
                    return
                futures = self._client.map(
                    self._run_body, *columns, key=[entry.key for entry in queued], pure=False, retries=0
                )
                for entry, future in zip(queued, futures, strict=True):
                    entry.body, entry.call = future, None
        except Exception:  # noqa: BLE001 - one body whose inputs cannot be sent must not fail the others
            for entry in queued:
                self._submit_one(entry)
            return
        for future in futures:
            future.add_done_callback(self._body_done)

    def _submit_one(self, entry: _Pending) -> None:
        assert entry.call is not None
        try:
            with self._lock:
                if self._closed:
                    return
                entry.body = self._client.submit(self._run_body, *entry.call, key=entry.key, pure=False, retries=0)
                entry.call = None
        except Exception as exc:  # noqa: BLE001 - what cannot be sent fails its own attempt
            with self._lock:
                self._pending.pop(entry.key, None)
            self._inbox.put((entry.token, False, _unsendable(entry.asset_name, exc), entry.submitted, time.time()))
            return
        entry.body.add_done_callback(self._body_done)

    def _ship_constants(self, emitter: Any) -> tuple[RunConstants, str]:
        """Send the run's shared objects to every worker once, as a plugin that workers joining later get too."""
        constants = self._shared_objects(emitter)
        token = f"partita-shared-{uuid.uuid4().hex}"
        self._client.register_plugin(self._plugin(token, constants.table), name=token)
        self._constants = (constants, token)
        return self._constants

    def _summary_arrived(self, event: tuple[float, Any]) -> None:
        """On the client's thread: a body's summary, published by its worker when the body ended."""
        message = event[1]
        with self._lock:
            entry = None if self._closed else self._pending.pop(message["key"], None)
        if entry is None:
            return  # the run is over, or the cluster failed the task first
        try:
            summary = self._loads(message["summary"])
        except Exception as exc:  # noqa: BLE001 - a summary that cannot be rebuilt here fails its attempt
            error = ExecutionError(
                f"asset {entry.asset_name!r}: its outcome cannot be received from the Dask worker: "
                f"{type(exc).__name__}: {exc}"
            )
            self._inbox.put((entry.token, False, error, entry.submitted, time.time()))
            return
        self._inbox.put(self._completion(entry, summary))

    def _body_done(self, future: Any) -> None:
        """On Dask's callback thread: only a task the cluster failed (its worker died, it was cancelled) matters here."""
        if future.status == "finished":
            return  # its summary arrives (or arrived) on the topic
        with self._lock:
            entry = None if self._closed else self._pending.pop(future.key, None)
        if entry is None:
            return
        try:
            exc: BaseException = future.exception()
        except BaseException as cancelled:  # noqa: BLE001 - a cancelled future raises instead
            exc = cancelled
        self._inbox.put((entry.token, False, _cluster_failure(entry.asset_name, exc), entry.submitted, time.time()))

    def _completion(self, entry: _Pending, summary: Any) -> Completion:
        value: Any
        if summary.succeeded:
            value = DaskOutput(entry.body)
            with self._lock:  # close() walks the handles from the loop's thread
                self._outputs.add(value)
        else:
            value = summary.error
        if summary.lines is not None:
            value = RemoteOutcome(value, not summary.succeeded, summary.lines)
        return (entry.token, summary.succeeded, value, summary.started, summary.finished)

    # -- the end of the run -----------------------------------------------------

    def cancel_async_bodies(self) -> None:
        """The run is cancelled: every worker cancels the run's async bodies it is running (not waited for)."""
        if self._constants is None:
            return  # nothing was sent
        try:
            self._client.run(self._cancel_on_workers, self._constants[1], wait=False)
        except Exception:  # noqa: BLE001 - a cluster that cannot be reached: the bodies end with the grace
            pass

    def close(self, wait: float | None) -> bool:
        """Cancel what is still queued or running, fetch kept outputs if the cluster ends now, let go of it."""
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        self._queued.clear()
        shared, self._constants = self._constants, None
        client = self._client
        futures = [entry.body for entry in pending if entry.body is not None]
        try:
            client.unsubscribe_topic(self._topic)
            if futures:
                # Bodies already running on workers run to their end; their results are dropped.
                client.cancel(futures)
            if self._cluster is not None:
                self._fetch_kept_outputs()
            else:
                _forget_topic(client, self._topic)
                if shared is not None:
                    _forget_shared_objects(client, shared[1])
        finally:
            if self._owns_client:
                client.close()
            if self._cluster is not None:
                self._cluster.close()
        return True

    def _fetch_kept_outputs(self) -> None:
        """The cluster ends with the run: the outputs still held come to the driver first (one gather)."""
        with self._lock:
            held = [output for output in self._outputs if output.held]
        if not held:
            return
        try:
            envelopes = self._client.gather([output.as_input()[1] for output in held])
        except Exception:  # noqa: BLE001 - lost outputs are released: asking for one says so
            for output in held:
                output.release()
            return
        for output, envelope in zip(held, envelopes, strict=True):
            output.fetched(envelope.value)


def _forget_topic(client: Any, topic: str) -> None:
    """Drop the run's summaries from the scheduler's event log (best effort: it is bounded anyway)."""

    def forget(dask_scheduler: Any, topic: str = topic) -> None:
        broker = getattr(dask_scheduler, "_broker", None)  # no public call drops a topic's log
        if broker is not None:
            broker.truncate(topic)

    try:
        client.run_on_scheduler(forget)
    except Exception:  # noqa: BLE001 - a scheduler that refuses keeps a bounded log
        pass


def _forget_shared_objects(client: Any, token: str) -> None:
    """Let the workers drop the run's shared objects (best effort: each keeps a few runs' at most)."""
    try:
        client.unregister_worker_plugin(token)
    except Exception:  # noqa: BLE001 - a worker that misses this drops them when newer runs come
        pass


def _unsendable(asset_name: str, exc: BaseException) -> ExecutionError:
    return ExecutionError(
        f"asset {asset_name!r}: its body or inputs cannot be sent to the Dask cluster: {type(exc).__name__}: {exc}"
    )


def _cluster_failure(asset_name: str, exc: BaseException) -> BaseException:
    """Why the cluster failed a task (its worker died, it was cancelled, its inputs were lost), named for the attempt."""
    name = type(exc).__name__
    if name == "KilledWorker":
        return ExecutionError(f"asset {asset_name!r}: its Dask worker died while running it ({exc})")
    if name == "CancelledError" or isinstance(exc, asyncio.CancelledError):
        return ExecutionError(f"asset {asset_name!r}: its task was cancelled on the Dask cluster")
    return ExecutionError(f"asset {asset_name!r}: the Dask cluster could not run it: {name}: {exc}")


def _split_inputs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Plain arguments, and the inputs held on the cluster (as futures, so Dask moves them between workers)."""
    plain: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    gathered: dict[str, Any] = {}
    for name, value in kwargs.items():
        if isinstance(value, DaskOutput):
            remote, item = value.as_input()
            (inputs if remote else plain)[name] = item
        elif isinstance(value, PartitionedOutputs) and any(isinstance(item, DaskOutput) for item in value.values()):
            outputs = [item.as_input()[1] if isinstance(item, DaskOutput) else item for item in value.values()]
            gathered[name] = (value.definition, value.keys_in_order, outputs)
        else:
            plain[name] = value
    return plain, inputs, gathered


_by_value: dict[str, bool] = {}


def _pickle_unimportable_modules(fn: Any) -> None:
    """Send a body's module by value when workers could not import it by name (an entry file the CLI loaded)."""
    while isinstance(fn, functools.partial):
        for part in (*fn.args, fn.func):
            if callable(part) and not isinstance(part, functools.partial):
                _register(getattr(part, "__module__", None))
        fn = fn.func
    _register(getattr(fn, "__module__", None))


def _register(module_name: str | None) -> None:
    if not module_name or module_name in _by_value:
        return
    top = module_name.partition(".")[0]
    by_value = top != "__main__" and not _importable(top)  # cloudpickle sends __main__ by value itself
    _by_value[module_name] = by_value
    module = sys.modules.get(module_name)
    if by_value and module is not None:
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)


def _importable(top: str) -> bool:
    """Whether a fresh interpreter could import ``top`` by name (asked of the import finders, not sys.modules)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            if find(top, None) is not None:
                return True
        except Exception:  # noqa: BLE001 - a finder that cannot answer does not know it
            continue
    return False
