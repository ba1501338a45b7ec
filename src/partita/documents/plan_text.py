"""A plan as ``partita plan`` prints it: for the terminal, and as text for the UI's plan page.

Below the CLI so that the UI shows exactly the lines the command prints
(into a pipe: plain, aligned, never wrapped), without importing the CLI.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from partita.definitions.assets import AssetDefinition
from partita.documents.tables import print_table
from partita.planning.plan import FlowPlan
from partita.planning.selection import SelectionKind

__all__ = ["domain_text", "plan_text", "render_plan"]


def domain_text(definition: AssetDefinition) -> str:
    """An asset's partition domain as a table shows it (``-`` when unpartitioned)."""
    partition_def = definition.partition_def
    return "-" if partition_def is None else partition_def.domain


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _depends_on(definition: AssetDefinition) -> str:
    """Dependencies, each mapped one with its mapper (an asset's own name: its earlier keys)."""
    mappers = definition.mappers
    deps = list(definition.deps) + ([definition.name] if definition.self_mapper is not None else [])
    return ", ".join(f"{dep} via {mappers[dep].describe()}" if dep in mappers else dep for dep in deps) or "-"


def _selection_line(plan: FlowPlan) -> str:
    selection = plan.selection
    if selection.kind is SelectionKind.DISCOVER:
        bound = getattr(selection.definition, "max_keys", None)
        limit = "" if bound is None else f", at most {bound}"
        return (
            f"selection: discovered at run time by {selection.producer!r} (domain {selection.domain}{limit}); "
            "every discovered key fans out to the domain's assets"
        )
    if selection.kind is SelectionKind.UNPARTITIONED:
        return "selection: none (no selected asset is partitioned)"
    if selection.kind is SelectionKind.EMPTY:
        return f"selection: deliberately empty ({selection.domain}); partitioned assets are skipped"
    noun = "key" if selection.key_count == 1 else "keys"
    return f"selection: {selection.kind.value} in domain {selection.domain}, {selection.key_count} {noun}"


def render_plan(console: Console, plan: FlowPlan) -> None:
    if plan.backfill is not None and plan.backfill.empty:
        # Its tasks are the closure's shape only: a table of attempts would contradict "nothing to run".
        console.print(escape(plan.backfill.describe()), highlight=False)
        return
    table = Table(title="plan", title_justify="left")
    for column in ("asset", "depends on", "partition domain", "attempts", "group"):
        table.add_column(column)
    for task in plan.tasks:
        table.add_row(
            task.name,
            _depends_on(task.definition),
            domain_text(task.definition),
            "discovers (1)" if task.discovers else "at run time" if task.attempt_count is None else str(task.attempt_count),
            "-" if task.group is None else str(task.group),
        )
    print_table(console, table)
    console.print(_selection_line(plan))
    if any(task.keys is not None for task in plan.tasks):
        for domain in plan.domain_counts():
            console.print(
                escape(
                    f"  domain {domain['domain']}: {_count(domain['key_count'], 'key')}, "
                    f"{_count(domain['attempt_count'], 'attempt')} ({', '.join(domain['assets'])})"
                ),
                highlight=False,
            )
    concurrency = plan.options.max_concurrency
    attempts = plan.attempt_count if plan.attempt_count is not None else f"{plan.known_attempt_count} + fan-out"
    console.print(f"attempts: {attempts}; max concurrency: {'default' if concurrency is None else concurrency}")
    if plan.backfill is not None:
        console.print(escape(plan.backfill.describe()), highlight=False)


def plan_text(plan: FlowPlan) -> str:
    """The lines ``partita plan`` prints for ``plan`` into a pipe (no colour, no terminal width)."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, color_system=None, soft_wrap=True, width=200)
    render_plan(console, plan)
    return buffer.getvalue()
