"""Plan-first backfills: the keys of a bounded selection that lack a success, or the keys a run failed.

Both read the store once and build an ordinary `FlowPlan` whose selection is
those keys, marked with a `BackfillOrigin`, so the run it launches is
recorded as a backfill. Nothing runs here; the plan is shown and approved
like any other.

Keys are compared as canonical text: a selected key is formatted by the
target's own definition (``format_key``), which is how the journal wrote
the key of every outlet event, and recorded attempt keys are parsed back by
the flow's definition before they are selected.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.errors import ConfigurationError, SelectionError
from partita.flow import Flow
from partita.partitions.base import apply_key_rule
from partita.planning.backfill import BackfillKind, BackfillOrigin
from partita.planning.plan import FlowPlan
from partita.planning.selection import CONFIG_FIELDS, SelectionFields, SelectionKind
from partita.results.record import AttemptRecord, TaskRecord
from partita.store import Store, StoredRun, open_store

__all__ = ["plan_failed_from", "plan_missing"]

StoreLike = Store | str
#: Skips a failure caused: rerunning the failed keys reruns them too.
_FAILURE_SKIPS = ("dependency_failed", "resource_circuit_open")


@contextlib.contextmanager
def _reading(store: StoreLike) -> Iterator[Store]:
    """``store`` itself, or the store at that URL opened for this read (never created: a typo is an error)."""
    if isinstance(store, Store):
        yield store
        return
    if not isinstance(store, str):
        raise ConfigurationError("store must be a store URL or a Store")
    opened = open_store(store, create=False)
    try:
        yield opened
    finally:
        opened.close()


def _with_backfill(plan: FlowPlan, origin: BackfillOrigin) -> FlowPlan:
    return dataclasses.replace(plan, backfill=origin)


def _nothing_to_do(flow: Flow, max_concurrency: int | None) -> FlowPlan:
    """A plan that selects no partitions deliberately (an unpartitioned closure has no such form)."""
    closure = flow.closure()
    empty = any(definition.partition_def is not None for definition in closure)
    return flow.plan(RunConfig(empty_partitions=empty, max_concurrency=max_concurrency))


# --- missing keys -----------------------------------------------------------


def plan_missing(
    flow: Flow,
    config: RunConfig | Mapping[str, Any] | None = None,
    *,
    store: StoreLike,
    keys_as_text: bool = False,
    fields: SelectionFields = CONFIG_FIELDS,
    flag: str = "plan_missing",
) -> FlowPlan:
    """The plan of the keys of ``config``'s bounded selection for which a target has no success event.

    A key is selected when any partitioned target of the flow lacks a
    success (an outlet event) for it; the plan's closure then runs upstream
    as any plan does. ``config`` must select ``partition_keys`` or a
    ``partition_range``; for a runtime domain, no selection means the keys
    its registry knows (retired keys excluded). ``keys_as_text`` takes the
    keys as canonical text (as the CLI does); ``fields`` and ``flag`` name
    the inputs in errors.
    """
    selection = MissingSelection.of(flow, config, keys_as_text=keys_as_text, fields=fields, flag=flag)
    return selection.plan(store)


@dataclasses.dataclass(frozen=True)
class MissingSelection:
    """A ``--missing`` selection checked before the store is read: bad input never opens (or creates) a store."""

    flow: Flow
    base: FlowPlan
    compared: tuple[AssetDefinition, ...]
    max_concurrency: int | None

    @classmethod
    def of(
        cls,
        flow: Flow,
        config: RunConfig | Mapping[str, Any] | None,
        *,
        keys_as_text: bool,
        fields: SelectionFields,
        flag: str,
    ) -> MissingSelection:
        run_config = RunConfig.coerce(config)
        base = _bounded_plan(flow, run_config, keys_as_text, fields, flag)
        return cls(flow, base, tuple(_compared_targets(base, flag)), run_config.max_concurrency)

    def plan(self, store: StoreLike) -> FlowPlan:
        """The plan of the selected keys some compared target has no success for, read from ``store``."""
        with _reading(store) as opened:
            candidates = _candidates(self.base, opened)
            missing = _missing(candidates, self.compared, opened)
        if missing:
            plan = self.flow.plan(RunConfig(partition_keys=tuple(missing), max_concurrency=self.max_concurrency))
        else:
            plan = _nothing_to_do(self.flow, self.max_concurrency)
        origin = BackfillOrigin(
            BackfillKind.MISSING,
            targets=tuple(definition.name for definition in self.compared),
            considered=len(candidates),
            selected=len(missing),
            empty=not missing,
        )
        return _with_backfill(plan, origin)


def _bounded_plan(flow: Flow, config: RunConfig, as_text: bool, fields: SelectionFields, flag: str) -> FlowPlan:
    """The plan of ``config`` itself, which must select a bounded set of keys."""
    rule = (
        f"{flag} needs a bounded selection to compare: give {fields.range} or {fields.keys} "
        "(a runtime domain may give neither: then the keys its registry knows are compared)"
    )
    if config.empty_partitions:
        raise ConfigurationError(f"{flag} cannot be combined with {fields.empty}; {rule}")
    try:
        base = flow.plan_from_text(config, fields=fields) if as_text else flow.plan(config)
    except SelectionError:
        if config.selection_forms():
            raise
        raise ConfigurationError(rule) from None
    if base.selection_kind is SelectionKind.UNPARTITIONED:
        raise ConfigurationError(f"{flag} selects partition keys, but no asset of the plan is partitioned")
    return base


def _compared_targets(base: FlowPlan, flag: str) -> list[AssetDefinition]:
    """The targets whose successes decide: partitioned ones of the selection's domain (not a discovering producer)."""
    compared = [
        task.definition
        for task in base.tasks
        if task.name in base.targets
        and task.partitioned
        and task.definition.partition_def is not None
        and task.definition.partition_def.domain == base.domain
    ]
    if not compared:
        raise ConfigurationError(
            f"{flag} compares the targets' success events per key, but no target of the plan is partitioned "
            f"in domain {base.domain}; choose partitioned targets (--target on the command line)"
        )
    return compared


def _candidates(base: FlowPlan, store: Store) -> tuple[Any, ...]:
    """The selected keys, or for a discovering runtime domain its registry's active keys that parse today."""
    if base.selection_kind is not SelectionKind.DISCOVER:
        return base.partition_keys
    definition = base.selection.definition
    assert definition is not None and base.domain is not None
    keys = []
    for record in store.list_partitions(base.domain):
        if record.retired:
            continue
        try:
            keys.append(apply_key_rule(definition, definition.parse_key, record.key, "parse_key"))
        except ValueError:
            continue  # a key the definition no longer allows cannot be planned
    return tuple(keys)


def _missing(candidates: Sequence[Any], compared: Sequence[AssetDefinition], store: Store) -> list[Any]:
    """The candidates (in order) that some compared target has no outlet event for."""
    lacking: set[int] = set()
    for definition in compared:
        partition_def = definition.partition_def
        assert partition_def is not None
        succeeded = store.last_successes(definition.name)
        for index, key in enumerate(candidates):
            if index not in lacking and partition_def.format_key(key) not in succeeded:
                lacking.add(index)
    return [key for index, key in enumerate(candidates) if index in lacking]


# --- failed keys of a run ---------------------------------------------------


def plan_failed_from(
    flow: Flow,
    run_id: str,
    *,
    store: StoreLike,
    targets: Sequence[str] | None = None,
    max_concurrency: int | None = None,
    flag: str = "plan_failed_from",
) -> FlowPlan:
    """The plan that reruns the keys run ``run_id`` (an id or unique prefix) failed or dependency-skipped.

    The run must be a run of ``flow`` (same flow name, or the same targets
    for a run recorded before flow names were) that recorded its partition
    keys. Its failed attempts, and those skipped because an upstream failed
    or a resource circuit opened, of every asset in the closure of
    ``targets`` (default: the run's targets) give the keys. A failed
    unpartitioned asset reads every key, so then every key the run attempted
    is selected. The plan's targets are the chosen ones: run it with
    ``flow.with_targets(plan.targets)``.
    """
    with _reading(store) as opened:
        run = opened.get_run(run_id)
        _check_same_flow(flow, run, flag)
        if run.status == "running":
            raise ConfigurationError(
                f"{flag} {run.run_id}: the run is still running, so its failed keys are not final; "
                "wait for it to finish (or cancel it) first"
            )
        chosen = _chosen_targets(run, targets, flag)
        narrowed = flow.with_targets(list(chosen))
        closure = {definition.name for definition in narrowed.closure()}
        tasks = [task for task in opened.get_tasks(run.run_id) if task.asset in closure]
    unsuccessful = [attempt for task in tasks for attempt in task.attempts if _unsuccessful(attempt)]
    texts = _rerun_texts(run, tasks, unsuccessful, flag)
    if not unsuccessful:
        plan = _nothing_to_do(narrowed, max_concurrency)
    elif texts:
        fields = SelectionFields(
            keys=f"the failed keys of run {run.run_id}", one_key=f"failed key #{{number}} of run {run.run_id}"
        )
        plan = narrowed.plan_from_text(
            RunConfig(partition_keys=tuple(texts), max_concurrency=max_concurrency), fields=fields
        )
    else:
        # Only keyless attempts failed: an unpartitioned closure, or a runtime producer that never discovered.
        plan = narrowed.plan(RunConfig(max_concurrency=max_concurrency))
    origin = BackfillOrigin(
        BackfillKind.FAILED_FROM,
        targets=chosen,
        considered=len(unsuccessful),
        selected=plan.key_count or 0,
        empty=not unsuccessful,
        source_run_id=run.run_id,
    )
    return _with_backfill(plan, origin)


def _check_same_flow(flow: Flow, run: StoredRun, flag: str) -> None:
    """A run of another flow has other assets and keys: rerunning its keys here would be a different backfill."""
    same = run.flow_name == flow.name if run.flow_name is not None else set(run.header.targets) == set(flow.targets)
    if not same:
        theirs = run.flow_name or "(not recorded)"
        raise ConfigurationError(
            f"{flag} {run.run_id} is a run of flow {theirs} (targets {', '.join(run.header.targets)}), "
            f"not of flow {flow.name} (targets {', '.join(flow.targets)}); give a run of this flow"
        )


def _chosen_targets(run: StoredRun, targets: Sequence[str] | None, flag: str) -> tuple[str, ...]:
    """``targets`` (each an asset the run planned), or the run's own targets."""
    if not targets:
        return tuple(run.header.targets)
    planned = {task["name"] for task in run.plan.get("tasks", ())}
    outside = [name for name in targets if name not in planned]
    if outside:
        raise ConfigurationError(
            f"{flag} {run.run_id}: target(s) {', '.join(outside)} were not part of that run's plan; "
            f"choose among {', '.join(sorted(planned))}"
        )
    return tuple(targets)


def _unsuccessful(attempt: AttemptRecord) -> bool:
    return attempt.status == "failed" or (attempt.status == "skipped" and attempt.reason in _FAILURE_SKIPS)


def _rerun_texts(
    run: StoredRun, tasks: Sequence[TaskRecord], unsuccessful: Sequence[AttemptRecord], flag: str
) -> list[str]:
    """The key text to rerun: each unsuccessful keyed attempt's, or every attempted key when a keyless one failed."""
    producers = {task["name"] for task in run.plan.get("tasks", ()) if task.get("discovers")}
    partitioned = [task for task in tasks if task.partitioned and task.asset not in producers]
    keyless = [a for a in unsuccessful if not a.partition_key_present and a.asset not in producers]
    if keyless and partitioned:
        wanted = [attempt for task in partitioned for attempt in task.attempts if attempt.partition_key_present]
    else:
        wanted = [attempt for attempt in unsuccessful if attempt.partition_key_present]
    if wanted and not run.record_partition_keys:
        raise ConfigurationError(
            f"{flag} {run.run_id}: that run did not record partition keys, so which keys failed is unknown; "
            "record them in future runs with --record-partition-keys (or record_partition_keys = true in "
            "[tool.partita], or Flow(record_partition_keys=True)), and rerun this one's range with --missing"
        )
    return [attempt.partition_key for attempt in wanted if attempt.partition_key is not None]
