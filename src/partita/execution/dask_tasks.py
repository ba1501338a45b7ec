"""What runs on a Dask worker for the Dask executor: one body per task, its outcome split in two.

A body's task returns an `Envelope` holding the output, which stays in the
worker's memory and moves only to the workers of the bodies that read it.
What the driver needs (whether it succeeded, its exception, its log lines,
its times) is a small `BodySummary` the worker publishes on the run's event
topic before the task ends; the scheduler forwards it to the driver's
client. An output reaches the driver only when someone asks for it.

A body's exception is caught here and travels in the summary, so a task
errs on the cluster only when the cluster itself failed it (its worker
died, its inputs could not be loaded): the driver tells the two apart.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import cloudpickle
import distributed
from dask.sizeof import sizeof

from partita.errors import ExecutionError
from partita.events.emission import Emitter, RunLiveness, activate, deactivate
from partita.execution.inputs import PartitionedOutputs
from partita.execution.log_capture import RemoteOutcome
from partita.execution.run_constants import forget, install, load_call
from partita.execution.worker_async import cancel_bodies_of, cancellable_as, run_coroutine
from partita.partitions.base import PartitionDef
from partita.results.logs import LogRow

__all__ = ["BodySummary", "Envelope", "SharedObjects", "cancel_async_bodies", "run_body"]


@dataclass(frozen=True, slots=True)
class BodySummary:
    """What the driver needs of a finished body (small: never the output)."""

    succeeded: bool
    error: BaseException | None
    #: The attempt's log lines when the run keeps them (None: the body ran without log capture).
    lines: tuple[LogRow, ...] | None
    started: float
    finished: float


@dataclass(frozen=True, slots=True, eq=False)
class Envelope:
    """A body's task result on the cluster: the output and its summary."""

    value: Any
    summary: BodySummary | None


@sizeof.register(Envelope)
def _sizeof_envelope(envelope: Envelope) -> int:
    # Dask's memory limits and spilling see the output's size, not the envelope's.
    return int(sizeof(envelope.value)) + 64


#: A gathered input: the upstream's definition, keys and per-key outputs (envelopes where they ran on the cluster).
Gathered = tuple[PartitionDef, tuple[Any, ...], list[Any]]


def run_body(
    payload: bytes, token: str, inputs: dict[str, Envelope], gathered: dict[str, Gathered], topic: str
) -> Envelope:
    """Call one body on a worker with its inputs unwrapped; publish its summary; keep its output.

    ``payload`` is the body, its plain arguments and its emitter, pickled by
    the driver with cloudpickle (Dask's own pickling would send a body from
    an entry file by name, which workers cannot import) and with the run's
    shared objects as references (`partita.execution.run_constants`), which
    every worker installs under ``token`` through `SharedObjects`. Not a
    dependency of the task: a dependency held on every worker would let the
    scheduler place a body away from the worker holding its upstream output.
    """
    with cancellable_as(token):
        envelope = _call_body(payload, token, inputs, gathered)
    summary = cloudpickle.dumps(envelope.summary, protocol=5)
    # Published before the task ends; a summary that cannot be published fails the task instead.
    distributed.get_worker().log_event(topic, {"key": distributed.get_worker().get_current_task(), "summary": summary})
    return Envelope(envelope.value, None)


def _call_body(payload: bytes, token: str, inputs: dict[str, Envelope], gathered: dict[str, Gathered]) -> Envelope:
    fn, kwargs, emitter = load_call(payload, token)
    del payload
    if isinstance(emitter, Emitter):
        emitter.liveness = _liveness_of(token)
    for name, envelope in inputs.items():
        kwargs[name] = envelope.value
    for name, (definition, keys, outputs) in gathered.items():
        values = [output.value if isinstance(output, Envelope) else output for output in outputs]
        kwargs[name] = PartitionedOutputs(definition, keys, values)
    active = activate(emitter)
    started = time.time()
    raised = False
    try:
        value = fn(**kwargs)
        if asyncio.iscoroutine(value):
            value = run_coroutine(value)  # an async body gets a loop of its own on the worker
    except BaseException as exc:  # noqa: BLE001 - returned as the attempt's failure
        value, raised = exc, True
    finished = time.time()
    deactivate(active)
    lines = None
    if type(value) is RemoteOutcome:  # the body ran inside its attempt's log scope
        value, raised, lines = value.value, value.raised, value.lines
    if not raised:
        return Envelope(value, BodySummary(True, None, lines, started, finished))
    return Envelope(None, BodySummary(False, _sendable(value), lines, started, finished))


async def cancel_async_bodies(token: str) -> None:
    """On a worker (run by the driver on each): cancel the run's async bodies running there."""
    cancel_bodies_of(token)


class SharedObjects(distributed.WorkerPlugin):
    """A run's shared objects as a worker plugin: every worker installs them, those that join later too.

    The scheduler hands its registered plugins to each worker that
    connects, so a worker started (or restarted by its nanny) mid-run has
    them before it runs a body of the run; unregistering drops them.
    """

    def __init__(self, token: str, table: bytes) -> None:
        self.token, self.table = token, table

    def setup(self, worker: Any) -> None:
        install(self.token, self.table)

    def teardown(self, worker: Any) -> None:
        """The run has ended: its shared objects go, and a body it abandoned here can no longer emit."""
        forget(self.token)
        with _liveness_lock:
            liveness = _liveness.pop(self.token, None)
        if liveness is not None:
            liveness.ended = True


_liveness: dict[str, RunLiveness] = {}  # on a worker: per run token, ended when the run lets go of the worker
_liveness_lock = threading.Lock()


def _liveness_of(token: str) -> RunLiveness:
    with _liveness_lock:
        liveness = _liveness.get(token)
        if liveness is None:
            liveness = _liveness[token] = RunLiveness()
        return liveness


def _sendable(exc: BaseException) -> BaseException:
    """The body's exception, or an ExecutionError naming it when it cannot travel to the driver."""
    try:
        cloudpickle.dumps(exc)
    except Exception as reason:  # noqa: BLE001 - reported by name instead
        return ExecutionError(
            f"the body raised {type(exc).__name__}: {exc}; the exception cannot be sent back from the Dask worker: {reason}"
        )
    return exc
