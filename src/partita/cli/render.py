"""Rich renderings of plans, definitions and results for people.

Machine consumers use ``--json``; nothing here is parsed by anyone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from partita.cli.failures import render_failures
from partita.cli.tables import print_table
from partita.definitions.assets import AssetDefinition
from partita.documents.plan_text import domain_text, render_plan
from partita.results.model import AttemptStatus, RunResult

__all__ = ["render_assets", "render_partitions", "render_plan", "render_result"]

_STATUS_STYLE = {
    AttemptStatus.SUCCESS: "green",
    AttemptStatus.FAILED: "red",
    AttemptStatus.SKIPPED: "yellow",
    AttemptStatus.CANCELLED: "magenta",
}


def render_assets(console: Console, closure: Sequence[AssetDefinition], targets: Sequence[str]) -> None:
    table = Table(title="assets", title_justify="left")
    for column in ("asset", "depends on", "partition domain", "body", "target"):
        table.add_column(column)
    for definition in closure:
        table.add_row(
            definition.name,
            ", ".join(definition.deps) or "-",
            domain_text(definition),
            "async" if definition.is_async else "sync",
            "yes" if definition.name in targets else "",
        )
    print_table(console, table)


def render_partitions(console: Console, closure: Sequence[AssetDefinition]) -> None:
    partitioned = [definition for definition in closure if definition.partition_def is not None]
    if not partitioned:
        console.print("No selected asset is partitioned.")
        return
    table = Table(title="partition definitions", title_justify="left")
    for column in ("asset", "kind", "domain", "key format", "range"):
        table.add_column(column)
    for definition in partitioned:
        partition_def = definition.partition_def
        assert partition_def is not None
        table.add_row(
            definition.name,
            partition_def.kind,
            partition_def.domain,
            partition_def.key_format,
            "yes" if partition_def.supports_range else "no",
        )
    print_table(console, table)


def render_result(console: Console, result: RunResult) -> None:
    table = Table(title=f"run {result.run_id}", title_justify="left")
    for column in ("asset", "status", "success", "failed", "skipped", "cancelled"):
        table.add_column(column)
    for task in result.tasks.values():
        counts = task.counts()
        status = task.status
        if task.never_started:
            cell = "[dim]not started[/]"  # not skipped: the run stopped before it was reached
        else:
            label = status.value if task.reason is None else f"{status.value} ({task.reason.value})"
            cell = f"[{_STATUS_STYLE[status]}]{label}[/]"
        table.add_row(
            task.asset_name,
            cell,
            *(str(counts[s]) for s in AttemptStatus),
        )
    print_table(console, table)
    render_failures(console, result)
    console.print(f"status: {result.status.value} in {result.duration:.2f}s")


def render_known_partitions(console: Console, domain: str, known: Sequence[Any]) -> None:
    if not known:
        console.print(f"No keys of {escape(domain)} have been discovered yet.", highlight=False)
        return
    table = Table(title=f"known partitions of {escape(domain)}", title_justify="left")
    for column in ("key", "state", "first seen", "last seen"):
        table.add_column(column)
    for record in known:
        table.add_row(
            escape(record.key),
            "[yellow]retired[/]" if record.retired else "[green]active[/]",
            record.first_seen.strftime("%Y-%m-%d %H:%M:%S"),
            record.last_seen.strftime("%Y-%m-%d %H:%M:%S"),
        )
    print_table(console, table)
