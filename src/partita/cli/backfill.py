"""``--missing`` and ``--failed-from`` of ``partita plan`` and ``partita run``: backfill selections.

The flags only choose how the keys are selected; the plan is built by
`partita.operations.backfill` and shown, approved and run like any plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from partita.cli.common import STORABLE_TEXT, no_run_store_error, preview_store, reading_store, refuse_combined
from partita.entry import load_entry
from partita.errors import ConfigurationError
from partita.flow import Flow
from partita.operations.backfill import MissingSelection, plan_failed_from
from partita.planning.plan import FlowPlan
from partita.planning.selection import SelectionFields
from partita.store import Store

__all__ = ["backfill_options", "backfill_plan", "check_backfill_flags", "preview_backfill"]

MISSING_FLAG = "--missing"
FAILED_FROM_FLAG = "--failed-from"


def backfill_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        FAILED_FROM_FLAG, "failed_from", metavar="RUN_ID", type=STORABLE_TEXT, default=None,
        help=(
            "Select the keys run RUN_ID (or a unique prefix) failed or dependency-skipped; "
            "that run must have recorded its partition keys."
        ),
    )(command)
    return click.option(
        MISSING_FLAG, "missing", is_flag=True,
        help="Narrow the selection to the keys for which a target has no success event in the store.",
    )(command)


def check_backfill_flags(missing: bool, failed_from: str | None, selection: dict[str, Any], no_store: bool) -> None:
    """Flags that cannot go together, refused before the entry loads or the store opens."""
    flag = MISSING_FLAG if missing else FAILED_FROM_FLAG
    if missing and failed_from is not None:
        raise ConfigurationError(f"{MISSING_FLAG} and {FAILED_FROM_FLAG} cannot be combined; choose one backfill")
    if (missing or failed_from is not None) and no_store:
        raise ConfigurationError(f"{flag} selects keys from the store's history; it cannot be combined with --no-store")
    if failed_from is None:
        return
    refuse_combined(
        (
            ("--partition-key", selection.get("partition_keys")),
            ("--partition-range", selection.get("partition_range")),
            ("--empty-partitions", selection.get("empty_partitions")),
        ),
        f"{FAILED_FROM_FLAG} selects the keys that run failed",
    )


def backfill_plan(
    entry: str,
    targets: tuple[str, ...],
    config: dict[str, Any],
    missing: bool,
    failed_from: str | None,
    fields: SelectionFields,
) -> Callable[[Store], tuple[Flow, FlowPlan]]:
    """ENTRY's flow and the backfill plan the flags ask for, once given the store to read.

    The entry loads and a ``--missing`` selection is checked now, so a bad
    entry or range stops before any store is opened (or created).
    """
    flow = load_entry(entry)
    if missing:
        flow = flow.with_targets(list(targets)) if targets else flow
        selection = MissingSelection.of(flow, config, keys_as_text=True, fields=fields, flag=MISSING_FLAG)
        return lambda store: (flow, selection.plan(store))
    assert failed_from is not None

    def failed_plan(store: Store) -> tuple[Flow, FlowPlan]:
        plan = plan_failed_from(
            flow,
            failed_from,
            store=store,
            targets=list(targets) or None,
            max_concurrency=config.get("max_concurrency"),
            flag=FAILED_FROM_FLAG,
        )
        return flow.with_targets(list(plan.targets)), plan

    return failed_plan


def preview_backfill(
    entry: str,
    targets: tuple[str, ...],
    config: dict[str, Any],
    missing: bool,
    failed_from: str | None,
    store_url: str | None,
    fields: SelectionFields,
) -> FlowPlan:
    """The backfill plan for ``partita plan``: the store is read as it is, and never created.

    A store that does not exist yet holds no success, so every key is
    missing; it holds no run either, so ``--failed-from`` says what `runs show` says.
    """
    planned = backfill_plan(entry, targets, config, missing, failed_from, fields)
    if failed_from is not None:
        with reading_store(store_url) as store:
            if store is None:
                raise no_run_store_error(failed_from, store_url)
            return planned(store)[1]
    with preview_store(store_url) as store_or_empty:
        return planned(store_or_empty)[1]
