"""`Flow` and `run()`: the user-facing way to plan and execute assets (SPEC §2).

A Flow ties targets to a registry and run options. ``plan()`` decides
everything before any body runs; ``run()`` executes exactly such a plan.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from partita.definitions.assets import AssetDefinition, asset_name_of
from partita.definitions.config import RunConfig, check_positive_int
from partita.definitions.groups import PartitionGroup
from partita.definitions.launch import LaunchKind, RunLaunch, Tags, check_tags
from partita.definitions.policies import ResourcePolicy, check_pool_name
from partita.definitions.registry import AssetRegistry, default_registry
from partita.errors import ConfigurationError, DefinitionError
from partita.execution.cancellation import DEFAULT_CANCEL_GRACE_SECONDS, RunCancellation
from partita.planning.graph import resolve_closure
from partita.planning.plan import FlowPlan, build_plan
from partita.planning.selection import CONFIG_FIELDS, KeySource, SelectionFields
from partita.results.logs import LogCapture
from partita.store import Store, open_store, store_url_from_environment

# The engine, executors, clocks and triggers are imported where a run or an option needs them:
# a program that only defines flows and reads the store (``partita status``) never loads them.
if TYPE_CHECKING:
    from partita.events.model import AssetEvent
    from partita.execution.clock import Clock
    from partita.execution.engine import RunOptions
    from partita.execution.events import ExecutionObserver
    from partita.execution.pools import PoolAccess
    from partita.results.model import RunResult
    from partita.store.protocol import RequestClaim

__all__ = ["Flow", "run"]

ConfigLike = RunConfig | Mapping[str, Any] | None
FlowCallback = Callable[[Any], Any]


def _target_names(targets: Any) -> tuple[str, ...]:
    if isinstance(targets, str) or callable(targets):
        targets = [targets]
    if not isinstance(targets, Sequence) or isinstance(targets, bytes):
        raise DefinitionError("Flow targets must be an asset name, an @asset function, or a list of them")
    names = tuple(asset_name_of(target, field_name="Flow targets") for target in targets)
    if not names:
        raise DefinitionError("Flow targets must name at least one asset")
    if len(set(names)) != len(names):
        raise DefinitionError("Flow targets must not repeat an asset")
    return names


def _partition_groups(value: Any) -> tuple[PartitionGroup, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, PartitionGroup)) or not isinstance(value, Sequence):
        raise DefinitionError("Flow partition_groups must be a list of PartitionGroup values")
    groups = tuple(value)
    if any(not isinstance(group, PartitionGroup) for group in groups):
        raise DefinitionError("Flow partition_groups must be a list of PartitionGroup values")
    return groups


def _checked_clock(clock: Any) -> Clock | None:
    if clock is None:
        return None
    from partita.execution.clock import Clock

    if not isinstance(clock, Clock):
        raise DefinitionError("Flow clock must provide monotonic() and async sleep(seconds)")
    return clock


def _checked_trigger(trigger: Any) -> Any:
    if trigger is None:
        return None
    from partita.automation.triggers import CronPartitions, OnAssetEvents

    if not isinstance(trigger, (OnAssetEvents, CronPartitions)):
        raise DefinitionError("Flow trigger must be OnAssetEvents(...) or CronPartitions(...)")
    return trigger


def _resources(value: Any) -> dict[str, ResourcePolicy]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError("Flow resources must be a mapping of resource name to ResourcePolicy")
    for name, policy in value.items():
        if not isinstance(name, str) or not name.strip():
            raise DefinitionError("Flow resources names must be non-empty strings")
        if not isinstance(policy, ResourcePolicy):
            raise DefinitionError(f"Flow resources[{name!r}] must be a ResourcePolicy")
        if policy.shared and policy.pool is None:
            # The resource's name becomes the pool's: it must be storable too.
            check_pool_name("Flow resources name of a shared ResourcePolicy (its pool name)", name)
    return dict(value)


#: Classes that passed the `Store` protocol check: a runtime protocol check with
#: this many methods cost more than a triggered run's own planning.
_STORE_CLASSES: set[type] = set()


def _checked_store(store: Any) -> Store | str | bool | None:
    if store is None or store is False or isinstance(store, str) or type(store) in _STORE_CLASSES:
        return store  # type: ignore[no-any-return]
    if not isinstance(store, Store):
        raise DefinitionError("Flow store must be a store URL, a Store, False (no store) or None")
    _STORE_CLASSES.add(type(store))
    return store


class Flow:
    """Targets plus the options that govern how their closure runs.

    The registry is captured when the Flow is created (the default registry
    at that moment when none is given). ``resources`` maps the names assets
    use in ``resource=`` to policies; callbacks receive a `CallbackContext`
    with the run's result; ``executor`` is ``None`` (threads and the event
    loop), ``"process"``, ``"dask"`` (a LocalCluster per run),
    ``"dask://HOST:PORT"`` (a running scheduler) or an `Executor` such as
    `DaskExecutor`; ``clock`` replaces real time for
    retry delays, rate windows and cooldowns. ``store`` records run history:
    a URL or a `Store`; ``None`` uses ``$PARTITA_STORE`` when set and records
    nothing otherwise; ``False`` never records. Records keep raw partition
    keys only with ``record_partition_keys=True``. ``tags`` (tag key to
    string value) are recorded with every run of the flow, with its ``name``
    and how the run was launched. Every record a body logs through
    ``context.logger`` is kept with its attempt (`RunResult.logs`, and the
    store); ``log_capture=True`` keeps the body's stdout and stderr lines
    too, and a `LogCapture` also sets how many lines an attempt keeps.
    """

    def __init__(
        self,
        targets: Any,
        *,
        registry: AssetRegistry | None = None,
        resources: Mapping[str, ResourcePolicy] | None = None,
        partition_groups: Sequence[PartitionGroup] | None = None,
        max_concurrency: int | None = None,
        on_success: FlowCallback | None = None,
        on_failure: FlowCallback | None = None,
        on_complete: FlowCallback | None = None,
        executor: Any = None,
        clock: Clock | None = None,
        cancel_grace_seconds: float = DEFAULT_CANCEL_GRACE_SECONDS,
        store: Store | str | bool | None = None,
        record_partition_keys: bool = False,
        name: str | None = None,
        trigger: Any = None,
        tags: Mapping[str, str] | None = None,
        log_capture: LogCapture | bool | None = None,
    ) -> None:
        self.targets = _target_names(targets)
        if registry is not None and not isinstance(registry, AssetRegistry):
            raise DefinitionError("Flow registry must be an AssetRegistry")
        self.registry = registry if registry is not None else default_registry()
        self.resources = _resources(resources)
        self.partition_groups = _partition_groups(partition_groups)
        if max_concurrency is not None:
            check_positive_int(max_concurrency, "Flow max_concurrency")
        self.max_concurrency = max_concurrency
        for option, callback in (("on_success", on_success), ("on_failure", on_failure), ("on_complete", on_complete)):
            if callback is not None and not callable(callback):
                raise DefinitionError(f"Flow {option} must be a callable taking a CallbackContext")
        self.on_success, self.on_failure, self.on_complete = on_success, on_failure, on_complete
        if executor is not None:
            from partita.execution.executors import resolve_executor

            resolve_executor(executor)  # validate now; each run gets a fresh one
        self.executor = executor
        self.clock = _checked_clock(clock)
        if (
            isinstance(cancel_grace_seconds, bool)
            or not isinstance(cancel_grace_seconds, (int, float))
            or not math.isfinite(cancel_grace_seconds)
            or cancel_grace_seconds < 0
        ):
            raise DefinitionError("Flow cancel_grace_seconds must be a finite number of seconds, zero or more")
        self.cancel_grace_seconds = float(cancel_grace_seconds)
        self.store = _checked_store(store)
        if not isinstance(record_partition_keys, bool):
            raise DefinitionError("Flow record_partition_keys must be True or False")
        self.record_partition_keys = record_partition_keys
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise DefinitionError("Flow name must be a non-empty string")
        self.name = name or "+".join(self.targets)
        self.trigger = _checked_trigger(trigger)
        self.tags: Tags = check_tags(tags)
        self.log_capture = LogCapture.coerce(log_capture)

    def with_targets(self, targets: Any) -> Flow:
        """The same flow options applied to other targets of the same registry."""
        clone = copy.copy(self)
        clone.targets = _target_names(targets)
        return clone

    def with_store(self, store: Store | str | bool | None, *, record_partition_keys: bool = False) -> Flow:
        """The same flow recording into another store (``False``: none)."""
        clone = copy.copy(self)
        clone.store = _checked_store(store)
        clone.record_partition_keys = bool(record_partition_keys)
        return clone

    def with_log_capture(self, log_capture: LogCapture | bool) -> Flow:
        """The same flow keeping its attempts' logs as ``log_capture`` says.

        A bool turns output capture (stdout and stderr) on or off and keeps the flow's bounds.
        """
        clone = copy.copy(self)
        if isinstance(log_capture, bool):
            clone.log_capture = dataclasses.replace(self.log_capture, output=log_capture)
        else:
            clone.log_capture = LogCapture.coerce(log_capture)
        return clone

    def with_executor(self, executor: Any) -> Flow:
        """The same flow running its bodies on another executor (any value ``executor=`` takes)."""
        from partita.execution.executors import resolve_executor

        resolve_executor(executor)  # validated now, as the constructor does
        clone = copy.copy(self)
        clone.executor = executor
        return clone

    def with_tags(self, tags: Mapping[str, str]) -> Flow:
        """The same flow with ``tags`` added to its own (a given key replaces the flow's value)."""
        clone = copy.copy(self)
        clone.tags = check_tags({**dict(self.tags), **dict(tags)})
        return clone

    def closure(self) -> tuple[AssetDefinition, ...]:
        """The targets and their upstream assets, upstream first.

        Raises DefinitionError for unknown dependencies and cycles.
        """
        return resolve_closure(self.registry, self.targets)

    def plan(self, config: ConfigLike = None) -> FlowPlan:
        """Validate the selection and describe the run without running anything."""
        return self._plan(RunConfig.coerce(config), KeySource.PYTHON)

    def plan_from_text(self, config: ConfigLike = None, *, fields: SelectionFields = CONFIG_FIELDS) -> FlowPlan:
        """Like `plan`, but selected keys are canonical text (as on the CLI).

        ``fields`` is how errors name the inputs; the CLI passes its flags.
        """
        return self._plan(RunConfig.coerce(config), KeySource.TEXT, fields)

    def _plan(self, config: RunConfig, source: KeySource, fields: SelectionFields = CONFIG_FIELDS) -> FlowPlan:
        return build_plan(
            self.registry,
            self.targets,
            config,
            partition_groups=self.partition_groups,
            resources=self.resources,
            default_max_concurrency=self.max_concurrency,
            key_source=source,
            fields=fields,
        )

    def _approved(self, config: ConfigLike | FlowPlan) -> FlowPlan:
        """The plan to run: ``config`` planned now, or a given plan that matches this Flow."""
        if isinstance(config, FlowPlan):
            from partita.planning.approval import check_plan_matches

            check_plan_matches(
                config,
                registry=self.registry,
                targets=self.targets,
                resources=self.resources,
                partition_groups=self.partition_groups,
                max_concurrency=self.max_concurrency,
            )
            return config
        return self.plan(config)

    @contextlib.contextmanager
    def _recording(self) -> Iterator[Store | None]:
        """The run's store: the given Store, a URL (or $PARTITA_STORE) opened for this run, or none."""
        spec = self.store
        if spec is None:
            spec = store_url_from_environment()
        if spec is None or spec is False:
            yield None
            return
        if isinstance(spec, str):
            store = open_store(spec)
            try:
                yield store
            finally:
                store.close()
            return
        yield spec  # type: ignore[misc]

    def _launch(self, plan: FlowPlan, launched_by: LaunchKind) -> RunLaunch:
        """How the run is recorded: a backfill plan is a backfill whoever runs it, tagged with its source."""
        if not isinstance(launched_by, LaunchKind):
            raise DefinitionError("launched_by must be a LaunchKind")
        if plan.backfill is None:
            return RunLaunch(kind=launched_by, flow_name=self.name, tags=self.tags)
        tags = check_tags({**dict(self.tags), **dict(plan.backfill.tags)})
        return RunLaunch(kind=LaunchKind.BACKFILL, flow_name=self.name, tags=tags)

    def _options(
        self,
        plan: FlowPlan,
        observers: Sequence[ExecutionObserver],
        store: Store | None,
        triggering_events: Sequence[AssetEvent] | Mapping[str, Sequence[AssetEvent]] = (),
        launched_by: LaunchKind = LaunchKind.PYTHON,
        claim: RequestClaim | None = None,
    ) -> RunOptions:
        from partita.execution.attempt_logs import LogListener, RunLogs
        from partita.execution.context import TriggeringEvents
        from partita.execution.engine import RunOptions
        from partita.execution.executors import resolve_executor
        from partita.store.events import StoreEventLog
        from partita.store.journal import StoreJournal

        journal = cancellation = None
        logs = RunLogs(self.log_capture, [observer for observer in observers if isinstance(observer, LogListener)])
        if store is not None:
            launch = self._launch(plan, launched_by)
            # A recorded run can be cancelled from another process (`partita runs cancel`).
            cancellation = RunCancellation()
            journal = StoreJournal(
                store,
                record_partition_keys=self.record_partition_keys,
                launch=launch,
                cancellation=cancellation,
                logs=logs,
                claim=claim,
            )
        store_url = getattr(store, "connect_url", None)
        executor = resolve_executor(self.executor)
        check_store = getattr(executor, "check_store", None)
        if check_store is not None:
            check_store(store_url)  # a cluster whose workers cannot reach the store is refused before the run
        return RunOptions(
            pools=self._pool_access(store),
            journal=journal,
            event_log=None if store is None else StoreEventLog(store),
            store_url=store_url,
            resources=self.resources,
            executor=executor,
            clock=self.clock,
            observers=tuple(observers),
            on_success=self.on_success,
            on_failure=self.on_failure,
            on_complete=self.on_complete,
            cancel_grace_seconds=self.cancel_grace_seconds,
            triggering_events=TriggeringEvents.of(triggering_events),
            cancellation=cancellation,
            logs=logs,
        )

    def _pool_access(self, store: Store | None) -> PoolAccess | None:
        """The store's pool leases, when it is a SQL store (shared resource policies need one)."""
        leases = getattr(store, "pool_leases", None)
        if leases is None:
            return None
        from partita.execution.pools import PoolAccess

        return PoolAccess(leases, self.record_partition_keys)

    def run(
        self,
        config: ConfigLike | FlowPlan = None,
        *,
        observers: Sequence[ExecutionObserver] = (),
        run_id: str | None = None,
        triggering_events: Sequence[AssetEvent] | Mapping[str, Sequence[AssetEvent]] = (),
        launched_by: LaunchKind = LaunchKind.PYTHON,
    ) -> RunResult:
        """Plan (or take an approved plan) and execute it to completion.

        Observers receive execution events (`RunStarted`, `AttemptStarted`,
        `AttemptRetrying`, `AttemptFinished`, `RunFinished`). ``launched_by``
        is recorded with the run (the CLI and the trigger daemon pass theirs);
        a backfill plan (`plan_missing`, `plan_failed_from`) is recorded as
        ``backfill``, with tags naming its kind and source run. A run
        recorded in a store may be cancelled from any process
        (`partita.cancel_run`, ``partita runs cancel``): it then cancels as
        Ctrl-C would and returns its result with status ``cancelled``.
        """
        import asyncio

        plan = self._approved(config)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise ConfigurationError(
                "Flow.run() was called inside a running event loop; use 'await flow.run_async(...)'"
            )
        return asyncio.run(self._execute(plan, observers, run_id, triggering_events, launched_by))

    async def run_async(
        self,
        config: ConfigLike | FlowPlan = None,
        *,
        observers: Sequence[ExecutionObserver] = (),
        launched_by: LaunchKind = LaunchKind.PYTHON,
    ) -> RunResult:
        """Execute on the running event loop.

        Cancelling the awaiting task cancels the run: no new work is
        admitted, async bodies are cancelled, running sync bodies get
        ``cancel_grace_seconds`` to finish, and observers receive the
        cancelled result before `asyncio.CancelledError` propagates. A
        cancel request through the store (`partita.cancel_run`) cancels the
        same way but returns the cancelled result instead of raising.
        """
        return await self._execute(self._approved(config), observers, launched_by=launched_by)

    async def _execute(
        self,
        plan: FlowPlan,
        observers: Sequence[ExecutionObserver] = (),
        run_id: str | None = None,
        triggering_events: Sequence[AssetEvent] | Mapping[str, Sequence[AssetEvent]] = (),
        launched_by: LaunchKind = LaunchKind.PYTHON,
        claim: RequestClaim | None = None,
    ) -> RunResult:
        """Execute an approved plan on the running loop, recorded in the flow's store (`run`, `run_async`).

        A trigger daemon's consumer runs call it directly, as tasks of one
        loop; a one-key run also passes the request its start claims.
        """
        from partita.execution.engine import execute_plan

        with self._recording() as store:
            options = self._options(plan, observers, store, triggering_events, launched_by, claim)
            return await execute_plan(plan, options, run_id=run_id)

    def __repr__(self) -> str:
        return f"Flow(targets={list(self.targets)!r})"


def run(
    targets: Any,
    config: ConfigLike = None,
    *,
    observers: Sequence[ExecutionObserver] = (),
    **flow_options: Any,
) -> RunResult:
    """Build a Flow for ``targets`` with ``flow_options`` and run ``config``."""
    return Flow(targets, **flow_options).run(config, observers=observers)
