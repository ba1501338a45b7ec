"""The public API is exactly what partita/__init__.py exports."""

import partita

EXPECTED = {
    "AllowedKeysMapper", "CronPartitions", "FixedKeyMapper", "IdentityMapper", "OnAssetEvents", "PartitionMapper",
    "ProductMapper", "RollupMapper",
    "AssetContext", "AssetDefinition", "AssetEvent", "AssetRegistry", "AttemptFinished", "AttemptResult",
    "AttemptRetrying", "AttemptStarted", "AttemptStatus", "CallbackContext", "CancelOutcome", "CancelRequest", "CallbackError", "Clock", "Codec",
    "ConfigurationError", "DatePartitionDef", "DefinitionError", "DiscoveryError", "EmissionError",
    "EmissionReceipt", "EntryLoadError", "EventSource", "ExecutionError", "ExecutionEvent", "ExecutionObserver",
    "Executor", "FailureInfo", "Fail", "FastForwardClock", "FileMaterialization", "FileMaterializationError",
    "Flow", "FlowPlan", "KeyState", "KeyStatus", "PartitionStatus", "partition_status", "HourlyPartitionDef", "InProcessExecutor", "InspectionState", "Invocation", "JsonCodec",
    "LogCapture", "LogLine", "LogStream",
    "Materialization", "MaterializationCollection", "MaterializationContext", "MaterializationError",
    "MaterializationInspection", "MaterializationInvalidation", "MaterializationRecord", "MonthlyPartitionDef",
    "MultiPartitionDef", "MultiPartitionKey", "OpenCircuit", "PartitaError", "PartitionAtRuntime", "PartitionDef",
    "PartitionGroup", "PartitionKey", "PartitionedOutputs", "PlanningError", "PolicyError", "ProjectConfig", "ProcessExecutor",
    "RateLimit", "Resolution", "ResourcePolicy", "ResourceStatistics", "Retry", "RetryPolicy", "RunConfig",
    "RunFinished", "RunResult", "RunStarted", "RunStatus", "SelectionError", "SelectionKind", "SkipReason",
    "SourceKind", "SqlStore", "StaticPartitionDef", "Store", "StoreError", "SystemClock", "TaskPlan", "TaskResult",
    "UnknownPartitionError", "UnknownRunError", "asset", "cancel_run", "default_registry", "emit", "load_project_config", "open_store", "publish_event",
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
