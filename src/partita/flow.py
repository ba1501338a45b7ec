"""`Flow` and `run()`: the user-facing way to plan and execute assets (SPEC §2).

A Flow ties targets to a registry and run options. ``plan()`` decides
everything before any body runs; ``run()`` executes exactly such a plan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from partita.definitions.assets import AssetDefinition, asset_name_of
from partita.definitions.config import RunConfig, check_positive_int
from partita.definitions.groups import PartitionGroup
from partita.definitions.registry import AssetRegistry, default_registry
from partita.errors import ConfigurationError, DefinitionError, PlanningError
from partita.execution.engine import execute_plan
from partita.planning.graph import resolve_closure
from partita.planning.plan import FlowPlan, build_plan
from partita.planning.selection import KeySource
from partita.results.model import RunResult

__all__ = ["Flow", "run"]

ConfigLike = RunConfig | Mapping[str, Any] | None


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


class Flow:
    """Targets plus the options that govern how their closure runs.

    The registry is captured when the Flow is created (the default registry
    at that moment when none is given).
    """

    def __init__(
        self,
        targets: Any,
        *,
        registry: AssetRegistry | None = None,
        partition_groups: Sequence[PartitionGroup] | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.targets = _target_names(targets)
        if registry is not None and not isinstance(registry, AssetRegistry):
            raise DefinitionError("Flow registry must be an AssetRegistry")
        self.registry = registry if registry is not None else default_registry()
        if partition_groups is not None and (
            isinstance(partition_groups, (str, bytes, PartitionGroup)) or not isinstance(partition_groups, Sequence)
        ):
            raise DefinitionError("Flow partition_groups must be a list of PartitionGroup values")
        groups = tuple(partition_groups or ())
        if any(not isinstance(group, PartitionGroup) for group in groups):
            raise DefinitionError("Flow partition_groups must be a list of PartitionGroup values")
        self.partition_groups = groups
        if max_concurrency is not None:
            check_positive_int(max_concurrency, "Flow max_concurrency")
        self.max_concurrency = max_concurrency

    def with_targets(self, targets: Any) -> Flow:
        """The same flow options applied to other targets of the same registry."""
        return Flow(
            targets,
            registry=self.registry,
            partition_groups=self.partition_groups,
            max_concurrency=self.max_concurrency,
        )

    def closure(self) -> tuple[AssetDefinition, ...]:
        """The targets and their upstream assets, upstream first.

        Raises DefinitionError for unknown dependencies and cycles.
        """
        return resolve_closure(self.registry, self.targets)

    def plan(self, config: ConfigLike = None) -> FlowPlan:
        """Validate the selection and describe the run without running anything."""
        return self._plan(RunConfig.coerce(config), KeySource.PYTHON)

    def plan_from_text(self, config: ConfigLike = None) -> FlowPlan:
        """Like `plan`, but selected keys are canonical text (as on the CLI)."""
        return self._plan(RunConfig.coerce(config), KeySource.TEXT)

    def _plan(self, config: RunConfig, source: KeySource) -> FlowPlan:
        return build_plan(
            self.registry,
            self.targets,
            config,
            partition_groups=self.partition_groups,
            default_max_concurrency=self.max_concurrency,
            key_source=source,
        )

    def _approved(self, config: ConfigLike | FlowPlan) -> FlowPlan:
        if isinstance(config, FlowPlan):
            if config.registry is not self.registry or config.targets != self.targets:
                raise PlanningError("the plan was built by another flow; plan and run with the same Flow")
            return config
        return self.plan(config)

    def run(self, config: ConfigLike | FlowPlan = None) -> RunResult:
        """Plan (or take an approved plan) and execute it to completion."""
        plan = self._approved(config)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(execute_plan(plan))
        raise ConfigurationError("Flow.run() was called inside a running event loop; use 'await flow.run_async(...)'")

    async def run_async(self, config: ConfigLike | FlowPlan = None) -> RunResult:
        """Execute on the running event loop; cancelling it cancels the run."""
        return await execute_plan(self._approved(config))

    def __repr__(self) -> str:
        return f"Flow(targets={list(self.targets)!r})"


def run(targets: Any, config: ConfigLike = None, **flow_options: Any) -> RunResult:
    """Build a Flow for ``targets`` with ``flow_options`` and run ``config``."""
    return Flow(targets, **flow_options).run(config)
