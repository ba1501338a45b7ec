"""partita: an orchestrator for partitioned data assets.

Everything a user imports lives here; modules below are internals.
"""

from partita.definitions.assets import AssetDefinition, asset
from partita.definitions.config import RunConfig
from partita.definitions.groups import PartitionGroup
from partita.definitions.policies import Fail, OpenCircuit, RateLimit, ResourcePolicy, Retry, RetryPolicy
from partita.definitions.registry import AssetRegistry, default_registry
from partita.errors import (
    ConfigurationError,
    DefinitionError,
    EntryLoadError,
    ExecutionError,
    PartitaError,
    PlanningError,
    PolicyError,
    SelectionError,
)
from partita.execution.clock import Clock, FastForwardClock, SystemClock
from partita.execution.context import AssetContext, CallbackContext
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
from partita.partitions import (
    DatePartitionDef,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    MultiPartitionDef,
    MultiPartitionKey,
    PartitionDef,
    StaticPartitionDef,
)
from partita.planning.plan import FlowPlan, TaskPlan
from partita.planning.selection import SelectionKind
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

__version__ = "0.1.0"

__all__ = [
    "AssetContext",
    "AssetDefinition",
    "AssetRegistry",
    "AttemptFinished",
    "AttemptResult",
    "AttemptRetrying",
    "AttemptStarted",
    "AttemptStatus",
    "CallbackContext",
    "CallbackError",
    "Clock",
    "ConfigurationError",
    "DatePartitionDef",
    "DefinitionError",
    "EntryLoadError",
    "ExecutionError",
    "ExecutionEvent",
    "ExecutionObserver",
    "Executor",
    "Fail",
    "FailureInfo",
    "FastForwardClock",
    "Flow",
    "FlowPlan",
    "HourlyPartitionDef",
    "InProcessExecutor",
    "Invocation",
    "MonthlyPartitionDef",
    "MultiPartitionDef",
    "MultiPartitionKey",
    "OpenCircuit",
    "PartitaError",
    "PartitionDef",
    "PartitionGroup",
    "PartitionedOutputs",
    "PlanningError",
    "PolicyError",
    "ProcessExecutor",
    "RateLimit",
    "Resolution",
    "ResourcePolicy",
    "ResourceStatistics",
    "Retry",
    "RetryPolicy",
    "RunConfig",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "SelectionError",
    "SelectionKind",
    "SkipReason",
    "StaticPartitionDef",
    "SystemClock",
    "TaskPlan",
    "TaskResult",
    "asset",
    "default_registry",
    "run",
]
