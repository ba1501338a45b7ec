"""`DaskExecutor`: bodies run on a Dask cluster; the driver keeps every decision.

Planning, admission, groups, resources, retries, circuits and the journal
stay in the driver. Each invocation becomes one task on the cluster (its key
names the run, the asset, the key position and the invocation, so
concurrent runs never collide); its worker publishes the body's summary
(outcome, times, log lines) on the run's event topic before the task ends
(see `partita.execution.dask_tasks`). The output stays on the worker: the engine receives a `DaskOutput` handle, passes it
to downstream bodies (the executor hands Dask the future itself, so the
value moves between workers, never through the driver), and releases it
once no attempt of the run reads it (`partita.execution.inputs.OutputRelease`).

The per-run state (futures, handles, the collector thread) is a
`partita.execution.dask_session.DaskSession`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from partita.errors import ConfigurationError, ExecutionError
from partita.execution.dask_session import DaskOutput, DaskSession
from partita.execution.workers import Completion

__all__ = ["DaskExecutor", "DaskOutput", "parse_dask_address"]

Deliver = Callable[[list[Completion]], None]
_INSTALL = "pip install 'partita[dask]'"


def _distributed() -> Any:
    """The ``distributed`` module, or a ConfigurationError naming the extra that provides it."""
    try:
        import distributed
    except ImportError:
        raise ConfigurationError(f"the Dask executor needs dask and distributed: {_INSTALL}") from None
    return distributed


def parse_dask_address(value: str) -> str:
    """``dask://HOST:PORT`` (or ``tcp://HOST:PORT``, ``HOST:PORT``) as the scheduler address Dask takes."""
    text = value.strip()
    if text.startswith("dask://"):
        text = "tcp://" + text[len("dask://") :]
    elif "://" not in text:
        text = "tcp://" + text
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ConfigurationError(
            "the Dask scheduler address must be dask://HOST:PORT (or tcp://HOST:PORT, tls://HOST:PORT)"
        )
    return f"{parts.scheme}://{parts.netloc}"


def _on_this_host(address: str) -> bool:
    """Whether a scheduler address can only serve workers on this machine (loopback, in-process)."""
    if address.startswith("inproc://"):
        return True
    host = urlsplit(address).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

def _start_local_cluster(cluster_options: dict[str, Any]) -> tuple[Any, Any]:
    """A client of a new LocalCluster of worker processes, or an ExecutionError (infrastructure, exit 4)."""
    distributed = _distributed()
    import dask

    options = {"processes": True, "dashboard_address": ":0", **cluster_options}
    try:
        # A worker that dies fails its task at once: partita's RetryPolicy is the only retry.
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            cluster = distributed.LocalCluster(**options)
        return distributed.Client(cluster, set_as_default=False), cluster
    except Exception as exc:  # noqa: BLE001 - a cluster that cannot start is infrastructure
        raise ExecutionError(f"the Dask executor cannot start a LocalCluster: {type(exc).__name__}: {exc}") from None


class _SharedLocalCluster:
    """A LocalCluster started for the first run that needs it and kept for the runs after it."""

    def __init__(self, cluster_options: dict[str, Any]) -> None:
        self._options = cluster_options
        self._lock = threading.Lock()  # a daemon starts consumer runs on several threads
        self._started: tuple[Any, Any] | None = None

    def client(self) -> Any:
        with self._lock:
            if self._started is None:
                self._started = _start_local_cluster(self._options)
            return self._started[0]

    def close(self) -> None:
        with self._lock:
            started, self._started = self._started, None
        if started is not None:
            started[0].close()
            started[1].close()


class DaskExecutor:
    """Runs bodies on a Dask cluster: a `LocalCluster` of worker processes, a scheduler address, or a client.

    ``DaskExecutor()`` starts a `LocalCluster` (``processes=True``;
    ``cluster_options`` such as ``n_workers`` and ``threads_per_worker`` are
    passed to it) when a run starts and closes it when the run ends.
    ``DaskExecutor("HOST:PORT")`` connects to a running scheduler and
    ``DaskExecutor(client=client)`` uses the caller's client; neither closes
    a cluster it did not create. Outputs stay on the cluster; those that no
    asset of the run reads are kept for `RunResult.output` unless
    ``keep_unread_outputs=False`` (a run on a cluster of its own fetches
    them when it ends, since the cluster ends with it).
    """

    runs_async_bodies = True
    keeps_outputs = True

    def __init__(
        self, address: str | None = None, *, client: Any = None, keep_unread_outputs: bool = True, **cluster_options: Any
    ) -> None:
        distributed = _distributed()
        if address is not None and client is not None:
            raise ConfigurationError("DaskExecutor takes a scheduler address or a client, not both")
        if client is not None and not isinstance(client, distributed.Client):
            raise ConfigurationError("DaskExecutor client must be a distributed.Client")
        if address is not None and not isinstance(address, str):
            raise ConfigurationError("DaskExecutor address must be a string such as 'dask://HOST:PORT'")
        if cluster_options and (address is not None or client is not None):
            raise ConfigurationError(
                "DaskExecutor cluster options (n_workers, threads_per_worker, ...) apply only to the LocalCluster "
                "it starts itself, not to a given address or client"
            )
        if not isinstance(keep_unread_outputs, bool):
            raise ConfigurationError("DaskExecutor keep_unread_outputs must be true or false")
        self._address = None if address is None else parse_dask_address(address)
        self._given_client = client
        self._shared: _SharedLocalCluster | None = None
        self._cluster_options = cluster_options
        self.keep_unread_outputs = keep_unread_outputs
        self._session: DaskSession | None = None

    @property
    def local(self) -> bool:
        """Whether every worker runs on this machine (a LocalCluster of its own, or a loopback scheduler)."""
        if self._given_client is not None:
            return _on_this_host(self._given_client.scheduler.address)
        return self._address is None or _on_this_host(self._address)

    def describe(self) -> str:
        if self._given_client is not None:
            return f"the Dask executor's client of the scheduler at {self._given_client.scheduler.address}"
        if self._address is not None:
            return f"the Dask executor's scheduler at {self._address}"
        return "the Dask executor's LocalCluster"

    def for_run(self) -> DaskExecutor:
        """An unstarted executor of the same configuration: each run keeps its own futures and threads."""
        fresh = object.__new__(DaskExecutor)
        fresh._address, fresh._given_client, fresh._shared = self._address, self._given_client, self._shared
        fresh._cluster_options, fresh.keep_unread_outputs = self._cluster_options, self.keep_unread_outputs
        fresh._session = None
        return fresh

    def check_store(self, store_url: str | None) -> None:
        """Refuse a SQLite store with workers on other machines: they cannot write this host's file."""
        if store_url is None or not store_url.startswith("sqlite") or self.local:
            return
        raise ConfigurationError(
            f"store {store_url} is a SQLite file on this machine, but {self.describe()} runs bodies on other "
            "machines, which cannot write it; use a PostgreSQL store every worker reaches, or executor='dask' "
            "(a LocalCluster on this machine)"
        )

    def start(self, loop: asyncio.AbstractEventLoop, deliver: Deliver, max_workers: int) -> None:
        if self._session is not None:
            raise ExecutionError("DaskExecutor.start called twice; each run gets its own executor (for_run)")
        client, cluster = self._connect()
        owns_client = self._given_client is None and self._shared is None
        self._session = DaskSession(client, cluster, owns_client=owns_client, loop=loop, deliver=deliver)

    def _connect(self) -> tuple[Any, Any]:
        distributed = _distributed()
        import dask

        if self._given_client is not None:
            return self._given_client, None
        if self._shared is not None:
            return self._shared.client(), None
        if self._address is not None:
            try:
                # Dask's own connect timeout (distributed.comm.timeouts.connect) bounds the wait.
                timeout = dask.config.get("distributed.comm.timeouts.connect")
                return distributed.Client(self._address, timeout=timeout, set_as_default=False), None
            except Exception as exc:  # noqa: BLE001 - any failure to reach the scheduler is infrastructure
                raise ExecutionError(
                    f"the Dask executor cannot reach the scheduler at {self._address}: {type(exc).__name__}: {exc}"
                ) from None
        return _start_local_cluster(self._cluster_options)

    @classmethod
    @contextlib.contextmanager
    def on_one_local_cluster(cls, **cluster_options: Any) -> Iterator[DaskExecutor]:
        """An executor whose runs share one `LocalCluster` (a daemon's consumer runs), closed on exit.

        The cluster starts when the first run needs it, so a pass with
        nothing due starts none.
        """
        executor = cls(**cluster_options)
        executor._shared = _SharedLocalCluster(cluster_options)
        try:
            yield executor
        finally:
            executor._shared.close()

    def submit(
        self, token: Any, fn: Callable[..., Any], kwargs: dict[str, Any], asset_name: str, emitter: Any = None
    ) -> None:
        if self._session is None:
            raise ExecutionError("DaskExecutor.submit called before start()")
        self._session.submit(token, fn, kwargs, asset_name, emitter)

    def cancel_async_bodies(self) -> None:
        """The run is cancelled: its async bodies running on workers get ``CancelledError``."""
        if self._session is not None:
            self._session.cancel_async_bodies()

    def shutdown(self, wait: float | None = None) -> bool:
        session, self._session = self._session, None
        return True if session is None else session.close(wait)
