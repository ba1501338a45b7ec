"""partita: an orchestrator for partitioned data assets.

Everything a user imports lives here; modules below are internals.
"""

from partita.definitions.assets import AssetDefinition, asset
from partita.definitions.config import RunConfig
from partita.definitions.groups import PartitionGroup
from partita.definitions.registry import AssetRegistry, default_registry
from partita.errors import (
    ConfigurationError,
    DefinitionError,
    EntryLoadError,
    ExecutionError,
    PartitaError,
    PlanningError,
    SelectionError,
)
from partita.execution.context import AssetContext
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
    FailureInfo,
    Invocation,
    Resolution,
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
    "AttemptResult",
    "AttemptStatus",
    "ConfigurationError",
    "DatePartitionDef",
    "DefinitionError",
    "EntryLoadError",
    "ExecutionError",
    "FailureInfo",
    "Flow",
    "FlowPlan",
    "HourlyPartitionDef",
    "Invocation",
    "MonthlyPartitionDef",
    "MultiPartitionDef",
    "MultiPartitionKey",
    "PartitaError",
    "PartitionDef",
    "PartitionGroup",
    "PlanningError",
    "Resolution",
    "RunConfig",
    "RunResult",
    "RunStatus",
    "SelectionError",
    "SelectionKind",
    "SkipReason",
    "StaticPartitionDef",
    "TaskPlan",
    "TaskResult",
    "asset",
    "default_registry",
    "run",
]
