"""partita: an orchestrator for partitioned data assets.

Everything a user imports lives here; modules below are internals.

Each name is imported from its module on first use (PEP 562): a program
pays only for what it touches, so ``partita status`` never imports the
engine, and ``import partita`` alone costs almost nothing. Type checkers
read the same names from the imports under ``TYPE_CHECKING``;
``tests/test_public_api.py`` holds the three lists to one another.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from partita.version import __version__ as __version__  # written once, in partita.version

#: Where each public name lives, by module (the imports below, for type checkers, say the same).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "partita.partitions.mappers": (
        "AllowedKeysMapper", "DimensionMapper", "FixedKeyMapper", "IdentityMapper", "PartitionMapper", "ProductMapper",
        "Requirement", "RollupMapper",
    ),
    "partita.partitions.window_mappers": ("FanOutMapper", "OffsetMapper"),
    "partita.automation.triggers": ("CronPartitions", "OnAssetEvents"),
    "partita.config": ("ProjectConfig", "load_project_config"),
    "partita.definitions.assets": ("AssetDefinition", "asset"),
    "partita.definitions.config": ("RunConfig",),
    "partita.definitions.groups": ("PartitionGroup",),
    "partita.definitions.policies": ("Fail", "OpenCircuit", "RateLimit", "ResourcePolicy", "Retry", "RetryPolicy"),
    "partita.definitions.registry": ("AssetRegistry", "default_registry"),
    "partita.errors": (
        "ConfigurationError", "DefinitionError", "DiscoveryError", "EmissionError", "EntryLoadError",
        "ExecutionError", "FileMaterializationError", "MaterializationError", "PartitaError", "PlanningError",
        "PolicyError", "SelectionError", "StoreError", "UnknownPartitionError", "UnknownRunError",
    ),
    "partita.events.emission": ("emit",),
    "partita.events.external": ("publish_event",),
    "partita.events.model": ("AssetEvent", "EmissionReceipt", "EventSource", "SourceKind"),
    "partita.execution.clock": ("Clock", "FastForwardClock", "SystemClock"),
    "partita.execution.context": ("AssetContext", "CallbackContext"),
    "partita.execution.events": (
        "AttemptFinished", "AttemptRetrying", "AttemptStarted", "ExecutionEvent", "ExecutionObserver", "RunFinished",
        "RunStarted",
    ),
    "partita.execution.executors": ("Executor", "InProcessExecutor", "ProcessExecutor"),
    # dask and distributed are imported when a DaskExecutor is constructed, not with this module.
    "partita.execution.dask_executor": ("DaskExecutor",),
    "partita.execution.inputs": ("PartitionedOutputs",),
    "partita.flow": ("Flow", "run"),
    "partita.materialization": (
        "Codec", "FileMaterialization", "InspectionState", "JsonCodec", "Materialization",
        "MaterializationCollection", "MaterializationContext", "MaterializationInspection",
        "MaterializationInvalidation", "MaterializationRecord",
    ),
    "partita.operations.backfill": ("plan_failed_from", "plan_missing"),
    "partita.operations.cancellation": ("CancelOutcome", "CancelRequest", "cancel_run"),
    "partita.operations.status": ("KeyState", "KeyStatus", "PartitionStatus", "partition_status"),
    "partita.partitions": (
        "CronPartitionDef", "DatePartitionDef", "HourlyPartitionDef", "MonthlyPartitionDef", "MultiPartitionDef",
        "MultiPartitionKey", "PartitionAtRuntime", "PartitionDef", "PartitionKey", "StaticPartitionDef",
        "WeeklyPartitionDef",
    ),
    "partita.planning.backfill": ("BackfillKind", "BackfillOrigin"),
    "partita.planning.plan": ("FlowPlan", "TaskPlan"),
    "partita.planning.selection": ("SelectionKind",),
    "partita.results.logs": ("LogCapture", "LogLine", "LogStream"),
    "partita.results.model": (
        "AttemptResult", "AttemptStatus", "CallbackError", "FailureInfo", "Invocation", "Resolution",
        "ResourceStatistics", "RunResult", "RunStatus", "SkipReason", "TaskResult",
    ),
    "partita.store": ("SqlStore", "Store", "open_store"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'partita' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from partita.automation.triggers import CronPartitions, OnAssetEvents
    from partita.config import ProjectConfig, load_project_config
    from partita.definitions.assets import AssetDefinition, asset
    from partita.definitions.config import RunConfig
    from partita.definitions.groups import PartitionGroup
    from partita.definitions.policies import Fail, OpenCircuit, RateLimit, ResourcePolicy, Retry, RetryPolicy
    from partita.definitions.registry import AssetRegistry, default_registry
    from partita.errors import (
        ConfigurationError,
        DefinitionError,
        DiscoveryError,
        EmissionError,
        EntryLoadError,
        ExecutionError,
        FileMaterializationError,
        MaterializationError,
        PartitaError,
        PlanningError,
        PolicyError,
        SelectionError,
        StoreError,
        UnknownPartitionError,
        UnknownRunError,
    )
    from partita.events.emission import emit
    from partita.events.external import publish_event
    from partita.events.model import AssetEvent, EmissionReceipt, EventSource, SourceKind
    from partita.execution.clock import Clock, FastForwardClock, SystemClock
    from partita.execution.context import AssetContext, CallbackContext
    from partita.execution.dask_executor import DaskExecutor
    from partita.execution.events import (
        AttemptFinished,
        AttemptRetrying,
        AttemptStarted,
        ExecutionEvent,
        ExecutionObserver,
        RunFinished,
        RunStarted,
    )
    from partita.execution.executors import Executor, InProcessExecutor, ProcessExecutor
    from partita.execution.inputs import PartitionedOutputs
    from partita.flow import Flow, run
    from partita.materialization import (
        Codec,
        FileMaterialization,
        InspectionState,
        JsonCodec,
        Materialization,
        MaterializationCollection,
        MaterializationContext,
        MaterializationInspection,
        MaterializationInvalidation,
        MaterializationRecord,
    )
    from partita.operations.backfill import plan_failed_from, plan_missing
    from partita.operations.cancellation import CancelOutcome, CancelRequest, cancel_run
    from partita.operations.status import KeyState, KeyStatus, PartitionStatus, partition_status
    from partita.partitions import (
        CronPartitionDef,
        DatePartitionDef,
        HourlyPartitionDef,
        MonthlyPartitionDef,
        MultiPartitionDef,
        MultiPartitionKey,
        PartitionAtRuntime,
        PartitionDef,
        PartitionKey,
        StaticPartitionDef,
        WeeklyPartitionDef,
    )
    from partita.partitions.mappers import (
        AllowedKeysMapper,
        DimensionMapper,
        FixedKeyMapper,
        IdentityMapper,
        PartitionMapper,
        ProductMapper,
        Requirement,
        RollupMapper,
    )
    from partita.partitions.window_mappers import FanOutMapper, OffsetMapper
    from partita.planning.backfill import BackfillKind, BackfillOrigin
    from partita.planning.plan import FlowPlan, TaskPlan
    from partita.planning.selection import SelectionKind
    from partita.results.logs import LogCapture, LogLine, LogStream
    from partita.results.model import (
        AttemptResult,
        AttemptStatus,
        CallbackError,
        FailureInfo,
        Invocation,
        Resolution,
        ResourceStatistics,
        RunResult,
        RunStatus,
        SkipReason,
        TaskResult,
    )
    from partita.store import SqlStore, Store, open_store

__all__ = [
    "AllowedKeysMapper",
    "AssetContext",
    "AssetDefinition",
    "AssetEvent",
    "CancelOutcome",
    "CancelRequest",
    "AssetRegistry",
    "AttemptFinished",
    "AttemptResult",
    "AttemptRetrying",
    "AttemptStarted",
    "AttemptStatus",
    "BackfillKind",
    "BackfillOrigin",
    "CallbackContext",
    "CallbackError",
    "Clock",
    "Codec",
    "ConfigurationError",
    "CronPartitionDef",
    "CronPartitions",
    "DaskExecutor",
    "DatePartitionDef",
    "DefinitionError",
    "DimensionMapper",
    "DiscoveryError",
    "EmissionError",
    "EmissionReceipt",
    "EntryLoadError",
    "EventSource",
    "ExecutionError",
    "ExecutionEvent",
    "ExecutionObserver",
    "Executor",
    "Fail",
    "FailureInfo",
    "FanOutMapper",
    "FastForwardClock",
    "FileMaterialization",
    "FileMaterializationError",
    "FixedKeyMapper",
    "Flow",
    "KeyState",
    "KeyStatus",
    "FlowPlan",
    "HourlyPartitionDef",
    "IdentityMapper",
    "InProcessExecutor",
    "InspectionState",
    "Invocation",
    "JsonCodec",
    "LogCapture",
    "LogLine",
    "LogStream",
    "Materialization",
    "MaterializationCollection",
    "MaterializationContext",
    "MaterializationError",
    "MaterializationInspection",
    "MaterializationInvalidation",
    "MaterializationRecord",
    "MonthlyPartitionDef",
    "MultiPartitionDef",
    "MultiPartitionKey",
    "OffsetMapper",
    "OnAssetEvents",
    "OpenCircuit",
    "PartitaError",
    "PartitionAtRuntime",
    "PartitionDef",
    "PartitionGroup",
    "PartitionKey",
    "PartitionStatus",
    "PartitionMapper",
    "PartitionedOutputs",
    "PlanningError",
    "ProjectConfig",
    "PolicyError",
    "ProcessExecutor",
    "ProductMapper",
    "RateLimit",
    "Requirement",
    "Resolution",
    "ResourcePolicy",
    "ResourceStatistics",
    "Retry",
    "RetryPolicy",
    "RollupMapper",
    "RunConfig",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "SelectionError",
    "SelectionKind",
    "SkipReason",
    "SourceKind",
    "SqlStore",
    "StaticPartitionDef",
    "Store",
    "StoreError",
    "SystemClock",
    "TaskPlan",
    "TaskResult",
    "UnknownPartitionError",
    "UnknownRunError",
    "WeeklyPartitionDef",
    "asset",
    "cancel_run",
    "default_registry",
    "emit",
    "load_project_config",
    "open_store",
    "partition_status",
    "plan_failed_from",
    "plan_missing",
    "publish_event",
    "run",
]
