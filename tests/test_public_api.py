"""The public API is exactly what partita/__init__.py exports."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import partita

EXPECTED = {
    "AllowedKeysMapper", "CronPartitionDef", "CronPartitions", "FixedKeyMapper", "IdentityMapper", "OnAssetEvents", "PartitionMapper",
    "ProductMapper", "RollupMapper", "DimensionMapper", "FanOutMapper", "OffsetMapper", "Requirement",
    "AssetContext", "AssetDefinition", "AssetEvent", "AssetRegistry", "AttemptFinished", "AttemptResult",
    "AttemptRetrying", "AttemptStarted", "AttemptStatus", "CallbackContext", "CancelOutcome", "CancelRequest", "CallbackError", "Clock", "Codec",
    "ConfigurationError", "DatePartitionDef", "DefinitionError", "DiscoveryError", "EmissionError",
    "EmissionReceipt", "EntryLoadError", "EventSource", "ExecutionError", "ExecutionEvent", "ExecutionObserver",
    "DaskExecutor", "Executor", "FailureInfo", "Fail", "FastForwardClock", "FileMaterialization", "FileMaterializationError",
    "Flow", "FlowPlan", "KeyState", "KeyStatus", "PartitionStatus", "partition_status", "HourlyPartitionDef", "InProcessExecutor", "InspectionState", "Invocation", "JsonCodec",
    "LogCapture", "LogLine", "LogStream",
    "Materialization", "MaterializationCollection", "MaterializationContext", "MaterializationError",
    "MaterializationInspection", "MaterializationInvalidation", "MaterializationRecord", "MonthlyPartitionDef",
    "MultiPartitionDef", "MultiPartitionKey", "OpenCircuit", "PartitaError", "PartitionAtRuntime", "PartitionDef",
    "PartitionGroup", "PartitionKey", "PartitionedOutputs", "PlanningError", "PolicyError", "ProjectConfig", "ProcessExecutor",
    "RateLimit", "Resolution", "ResourcePolicy", "ResourceStatistics", "Retry", "RetryPolicy", "RunConfig",
    "RunFinished", "RunResult", "RunStarted", "RunStatus", "SelectionError", "SelectionKind", "SkipReason",
    "SourceKind", "SqlStore", "StaticPartitionDef", "Store", "StoreError", "SystemClock", "TaskPlan", "TaskResult",
    "UnknownPartitionError", "UnknownRunError", "WeeklyPartitionDef", "asset", "cancel_run", "default_registry", "emit", "load_project_config", "open_store", "publish_event",
    "run",
    "BackfillKind", "BackfillOrigin", "plan_failed_from", "plan_missing",
}


def test_all_lists_exactly_the_public_names():
    assert set(partita.__all__) == EXPECTED
    assert len(partita.__all__) == len(set(partita.__all__))


def test_every_public_name_is_importable():
    for name in partita.__all__:
        assert getattr(partita, name) is not None


def test_errors_share_one_root_with_cli_exit_codes():
    for name in partita.__all__:
        value = getattr(partita, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, partita.PartitaError), name
            assert value.exit_code in (1, 2, 3, 4), name


def test_the_lazy_table_the_type_checking_imports_and_all_name_the_same_things():
    tree = ast.parse(Path(partita.__file__).read_text())
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {(node.module, alias.name) for node in guarded.body for alias in node.names}
    table = {(module, name) for module, names in partita._EXPORTS.items() for name in names}

    assert imported == table
    assert sorted(name for _, name in table) == sorted(partita.__all__)


def test_importing_partita_and_defining_a_flow_loads_no_engine_executor_or_output_reuse():
    program = (
        "import sys\n"
        "from partita import DatePartitionDef, Flow, asset\n"
        "@asset(partition_def=DatePartitionDef(start='2026-01-01'))\n"
        "def loads(context):\n"
        "    return 1\n"
        "Flow(['loads'])\n"
        "print(sorted(name for name in ('partita.execution.engine', 'partita.execution.executors',"
        " 'multiprocessing', 'croniter', 'partita.materialization') if name in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)

    assert found.stdout.strip() == "[]", found.stderr


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Flo'"):
        partita.Flo  # noqa: B018
