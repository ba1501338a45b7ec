"""What the UI may plan: a request's fields (as ``partita plan`` takes them) into a `FlowPlan` built by the library.

The API's JSON body and the plan form both become a `PlanRequest`, so both
obey one set of rules: the selection rules of `Flow.plan`, and the backfill
rules of ``plan --missing`` / ``--failed-from`` (which cannot be combined,
and ``failed_from`` takes no selection of its own).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from partita.definitions.config import RunConfig
from partita.errors import ConfigurationError
from partita.flow import Flow
from partita.operations.backfill import MissingSelection, plan_failed_from
from partita.operations.status import KeyState, asset_status
from partita.planning.plan import FlowPlan
from partita.planning.selection import CONFIG_FIELDS, KeySource
from partita.store import Store

__all__ = ["MAX_KEYS", "PlanRequest"]

#: Keys one request may list (a longer selection is a range).
MAX_KEYS = 1000
_NAME = Field(min_length=1, max_length=200)


class PlanRequest(BaseModel):
    """``POST /api/v1/plans``: targets, a selection, and optionally a backfill of missing or failed keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="Assets to plan with their upstream closure (default: the entry's targets).",
    )
    partition_key: str | None = Field(
        None, max_length=1000, description="One key, canonical text (as --partition-key)."
    )
    partition_keys: list[str] | None = Field(None, max_length=MAX_KEYS, description="Keys, canonical text.")
    partition_range: tuple[str, str] | None = Field(None, description="[start, end], canonical text, both included.")
    empty_partitions: bool = False
    max_concurrency: int | None = Field(None, ge=1, le=10_000)
    missing: bool = Field(False, description="Only the keys of the (bounded) selection that lack a success event.")
    failed_from: str | None = Field(None, min_length=1, max_length=200, description="Rerun the keys this run failed.")
    failed: bool = Field(
        False, description="Only the keys of the (bounded) selection whose newest attempt of a target failed."
    )

    def keys(self) -> list[str]:
        return ([self.partition_key] if self.partition_key is not None else []) + list(self.partition_keys or ())

    def config(self) -> dict[str, Any]:
        """The selection as a `RunConfig` mapping (absent fields left out, as the CLI does)."""
        config: dict[str, Any] = {}
        if self.keys() or self.partition_keys is not None:
            config["partition_keys"] = self.keys()
        if self.partition_range is not None:
            config["partition_range"] = self.partition_range
        if self.empty_partitions:
            config["empty_partitions"] = True
        if self.max_concurrency is not None:
            config["max_concurrency"] = self.max_concurrency
        return config

    def check(self) -> None:
        """The backfill rules of ``partita plan``, before the store is read."""
        chosen = [
            name
            for name, given in (("missing", self.missing), ("failed", self.failed), ("failed_from", self.failed_from))
            if given
        ]
        if len(chosen) > 1:
            raise ConfigurationError(f"{' and '.join(chosen)} cannot be combined; choose one backfill")
        if self.failed_from is not None:
            given = [
                name
                for name, value in (
                    ("partition_key(s)", self.keys()),
                    ("partition_range", self.partition_range),
                    ("empty_partitions", self.empty_partitions),
                )
                if value
            ]
            if given:
                raise ConfigurationError(
                    f"failed_from selects the keys that run failed; it cannot be combined with {', '.join(given)}"
                )

    def plan(self, flow: Flow, store: Store) -> tuple[Flow, FlowPlan]:
        """The Flow that runs the plan, and the plan (reading ``store`` for a backfill; nothing is recorded)."""
        self.check()
        chosen = flow.with_targets(self.targets) if self.targets else flow
        if self.failed_from is not None:
            planned = plan_failed_from(
                flow,
                self.failed_from,
                store=store,
                targets=self.targets or None,
                max_concurrency=self.max_concurrency,
                flag="failed_from",
            )
            return flow.with_targets(list(planned.targets)), planned
        if self.failed:
            return chosen, _failed_keys_plan(chosen, self, store)
        if self.missing:
            selection = MissingSelection.of(
                chosen, self.config(), keys_as_text=True, fields=CONFIG_FIELDS, flag="missing"
            )
            return chosen, selection.plan(store)
        return chosen, chosen.plan_from_text(self.config(), fields=CONFIG_FIELDS)


def _failed_keys_plan(flow: Flow, request: PlanRequest, store: Store) -> FlowPlan:
    """The plan of the selected keys whose newest attempt of some asset of the closure failed (their status).

    The closure, not only the targets: a target whose upstream failed was skipped, and rerunning the key
    reruns the upstream too.
    """
    config = RunConfig.coerce(request.config())
    if not config.selection_forms() or config.empty_partitions:
        raise ConfigurationError("failed needs a bounded selection to look at: give partition_range or partition_keys")
    base = flow.plan_from_text(config, fields=CONFIG_FIELDS)  # the selection's own errors first
    closure = {definition.name: definition for definition in flow.closure()}
    now = dt.datetime.now(dt.UTC)
    failed: dict[str, None] = {}
    for definition in closure.values():
        if definition.partition_def is None or definition.partition_def.domain != base.domain:
            continue
        status = asset_status(definition, closure, config, store, now, source=KeySource.TEXT)
        failed.update(dict.fromkeys(key for key in status.keys_in(KeyState.FAILED) if key is not None))
    if not failed:
        raise ConfigurationError(
            "no selected key has a failed attempt (failures are known only for runs that recorded their keys); "
            "nothing to rerun"
        )
    ordered = [key for key in _selected_texts(base) if key in failed]
    rerun: dict[str, Any] = {"partition_keys": ordered}
    if request.max_concurrency is not None:
        rerun["max_concurrency"] = request.max_concurrency
    return flow.plan_from_text(rerun, fields=CONFIG_FIELDS)


def _selected_texts(plan: FlowPlan) -> list[str]:
    """The plan's selected keys as canonical text, in selection order."""
    definition = plan.selection.definition
    assert definition is not None
    return [definition.format_key(key) for key in plan.partition_keys]
