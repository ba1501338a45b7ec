"""The ``partita`` command line (SPEC §13): parse, validate, call the library.

``--json`` prints exactly one typed document on stdout; diagnostics, prompts
and progress go to stderr. Exit codes: 0 success or declined, 1 an asset
failed, 2 usage or configuration error, 3 entry not loadable, 4
infrastructure failure.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from partita.cli.attempt_logs import Verbosity, log_options
from partita.cli.backfill import backfill_options, backfill_plan, check_backfill_flags, preview_backfill
from partita.cli.common import (
    CLI_SELECTION_FIELDS,
    EXIT_ASSET_FAILED,
    EXIT_INTERRUPTED,
    STORABLE_TEXT,
    emit_document,
    emit_json,
    executor_option,
    handles_errors,
    json_option,
    key_selection_options,
    opened_store,
    reading_store,
    refuse_combined,
    store_option,
    store_options,
    tags_of,
    with_executor_choice,
)
from partita.cli.tables import cli_console
from partita.entry import load_entry
from partita.errors import ConfigurationError, UnknownPartitionError
from partita.planning.lineage import GraphFormat
from partita.version import __version__

# What only a command's body needs is imported in that body: a command pays for its own
# imports alone (``partita status`` never loads the run renderer or the trigger daemon).
if TYPE_CHECKING:
    from partita.flow import Flow
    from partita.planning.plan import FlowPlan
    from partita.results.model import RunStatus


def _stdin_is_interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _entry_flow(entry: str, targets: tuple[str, ...]) -> Flow:
    flow = load_entry(entry)
    return flow.with_targets(list(targets)) if targets else flow


def _selection_config(
    partition_keys: tuple[str, ...],
    partition_range: tuple[str, str] | None,
    empty_partitions: bool,
    max_concurrency: int | None,
) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if partition_keys:
        config["partition_keys"] = list(partition_keys)
    if partition_range:
        config["partition_range"] = tuple(partition_range)
    if empty_partitions:
        config["empty_partitions"] = True
    if max_concurrency is not None:
        config["max_concurrency"] = max_concurrency
    return config


def _entry_argument(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--target", "targets", multiple=True, metavar="ASSET",
        help="Plan this asset and its upstream closure instead of the entry's targets (repeatable).",
    )(command)
    return click.argument("entry")(command)


def _selection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--empty-partitions", is_flag=True,
            help="Select no partitions deliberately: partitioned assets are skipped.",
        ),
        click.option(
            "--max-concurrency", type=click.IntRange(min=1), default=None, metavar="N",
            help="Run at most N asset bodies at once.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return key_selection_options(command)


_TABLE = "table"


def _format_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--format", "output_format", type=click.Choice([_TABLE, *(form.value for form in GraphFormat)]),
        default=_TABLE, show_default=True,
        help="table for people; mermaid (a flowchart) or dot (a Graphviz digraph) prints the lineage as text.",
    )(command)


def _graph_format(output_format: str, as_json: bool) -> GraphFormat | None:
    """The graph form asked for, or None for the table; --json prints its own document, so not both."""
    if output_format == _TABLE:
        return None
    if as_json:
        raise ConfigurationError(f"--format {output_format} and --json cannot be combined; choose one output")
    return GraphFormat(output_format)


class _CommandGroup(click.Group):
    """The ``partita`` group: a command defined in another module is imported when it is named (or listed)."""

    #: Command name -> (module, attribute). ``runs`` brings ``runs cancel`` along.
    elsewhere = {
        "events": ("partita.cli.events", "events"),
        "flows": ("partita.cli.automation", "flows"),
        "pools": ("partita.cli.pools", "pools"),
        "runs": ("partita.cli.runs", "runs"),
        "schedules": ("partita.cli.schedules", "schedules"),
        "serve": ("partita.cli.automation", "serve"),
        "status": ("partita.cli.status", "status"),
        "trigger": ("partita.cli.automation", "trigger"),
        "ui": ("partita.cli.ui", "ui"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.elsewhere})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.elsewhere:
            module, attribute = self.elsewhere[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=_CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="partita")
def cli() -> None:
    """partita: plan and run partitioned data assets."""


@cli.command()
@_entry_argument
@_format_option
@json_option
@handles_errors
def assets(entry: str, targets: tuple[str, ...], output_format: str, as_json: bool) -> None:
    """List the assets of ENTRY's flow (or of --target) and their dependencies."""
    from partita.cli.render import render_assets
    from partita.documents.assets import assets_body
    from partita.planning.lineage import Lineage, render_lineage

    graph = _graph_format(output_format, as_json)
    flow = _entry_flow(entry, targets)
    closure = flow.closure()
    if graph is not None:
        click.echo(render_lineage(Lineage.of_closure(closure), graph), nl=False)
        return
    if as_json:
        emit_document("assets", assets_body(flow))
        return
    render_assets(cli_console(), closure, flow.targets)


class _PartitionsGroup(click.Group):
    """``partitions ENTRY`` describes definitions; ``partitions retire NAME KEY`` is a subcommand."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["describe", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=_PartitionsGroup)
def partitions() -> None:
    """Partition definitions (ENTRY), and the known keys of runtime domains.

    \b
    partitions ENTRY [--target ASSET] [--domain NAME] [--json]
    partitions retire NAME KEY [--store URL]
    """


@partitions.command("describe", hidden=True)
@_entry_argument
@click.option(
    "--domain", "domain_name", metavar="NAME", default=None,
    help="List the known keys of this runtime domain (from the store) instead of describing definitions.",
)
@store_option
@json_option
@handles_errors
def describe_partitions(
    entry: str, targets: tuple[str, ...], domain_name: str | None, store_url: str | None, as_json: bool
) -> None:
    """Describe the partition definitions of ENTRY's assets.

    Reports kind, domain, key format and range support; it never enumerates
    a catalog of keys and runs no asset body. With --domain it lists the keys
    a runtime domain's producer has discovered (active or retired).
    """
    from partita.cli.render import render_known_partitions, render_partitions
    from partita.documents.partitions import definitions_body, known_keys_body, runtime_domain_of

    flow = _entry_flow(entry, targets)
    closure = flow.closure()
    if domain_name is not None:
        domain = runtime_domain_of(closure, domain_name, repr(entry))
        with reading_store(store_url) as store:
            known = [] if store is None else store.list_partitions(domain)
        if as_json:
            emit_document("partitions", known_keys_body(domain, known))
            return
        render_known_partitions(cli_console(), domain, known)
        return
    if as_json:
        emit_document("partitions", definitions_body(closure))
        return
    render_partitions(cli_console(), closure)


@partitions.command("retire")
@click.argument("name", type=STORABLE_TEXT)
@click.argument("key", type=STORABLE_TEXT)
@store_option
@json_option
@handles_errors
def retire_partition(name: str, key: str, store_url: str | None, as_json: bool) -> None:
    """Retire KEY of the runtime domain NAME (discovering it again reactivates it)."""
    from partita.documents.partitions import runtime_domain

    domain = runtime_domain(name)
    with reading_store(store_url) as store:
        if store is None:
            raise UnknownPartitionError(f"domain {domain} has no known partitions: no run-history store exists yet")
        record = store.retire_partition(domain, key)
    if as_json:
        emit_document("partition-retired", {"domain": domain, "partition": record.to_dict()})
        return
    cli_console().print(f"retired a partition of {domain} (last seen {record.last_seen:%Y-%m-%d %H:%M:%S})", highlight=False)


def _make_plan(
    entry: str,
    targets: tuple[str, ...],
    partition_keys: tuple[str, ...],
    partition_range: tuple[str, str] | None,
    empty_partitions: bool,
    max_concurrency: int | None,
) -> tuple[Flow, FlowPlan]:
    flow = _entry_flow(entry, targets)
    config = _selection_config(partition_keys, partition_range, empty_partitions, max_concurrency)
    return flow, flow.plan_from_text(config, fields=CLI_SELECTION_FIELDS)


def _check_pending_alone(targets: tuple[str, ...], selection: dict[str, Any]) -> None:
    """--pending previews what the triggers select; a selection of its own would be silently ignored."""
    refuse_combined(
        (
            ("--target", targets),
            ("--partition-key", selection["partition_keys"]),
            ("--partition-range", selection["partition_range"]),
            ("--empty-partitions", selection["empty_partitions"]),
            ("--max-concurrency", selection["max_concurrency"] is not None),
            ("--missing", selection.get("missing")),
            ("--failed-from", selection.get("failed_from")),
        ),
        "--pending previews what ENTRY's triggers would start",
    )


@cli.command()
@_entry_argument
@_selection_options
@click.option("--pending", is_flag=True, help="Show what ENTRY's triggers would start now (nothing starts).")
@backfill_options
@store_option
@_format_option
@json_option
@handles_errors
def plan(
    entry: str,
    targets: tuple[str, ...],
    as_json: bool,
    pending: bool,
    missing: bool,
    failed_from: str | None,
    store_url: str | None,
    output_format: str,
    **selection: Any,
) -> None:
    """Show what a run of ENTRY would do, without running anything.

    With --pending: the consumer runs ENTRY's triggers would start now, and
    the keys still waiting for upstream events (nothing is started or recorded).
    With --missing or --failed-from: the backfill plan those keys make
    (the store is read, nothing is recorded).
    """
    from partita.cli.automation import pending_document, render_pending
    from partita.cli.render import render_plan
    from partita.planning.lineage import Lineage, render_lineage

    graph = _graph_format(output_format, as_json)
    if pending and graph is not None:
        raise ConfigurationError(f"--format {output_format} draws a plan's lineage; it cannot be combined with --pending")
    if pending:
        _check_pending_alone(targets, {**selection, "missing": missing, "failed_from": failed_from})
        document = pending_document(entry, store_url)
        if as_json:
            emit_document("pending", document)
        else:
            render_pending(document)
        return
    check_backfill_flags(missing, failed_from, selection, no_store=False)
    if missing or failed_from is not None:
        config = _selection_config(**selection)
        flow_plan = preview_backfill(entry, targets, config, missing, failed_from, store_url, CLI_SELECTION_FIELDS)
    else:
        _, flow_plan = _make_plan(entry, targets, **selection)
    if graph is not None:
        click.echo(render_lineage(Lineage.of_plan(flow_plan), graph), nl=False)
        return
    if as_json:
        emit_json(flow_plan.to_dict())
        return
    render_plan(cli_console(), flow_plan)


@cli.command()
@_entry_argument
@_selection_options
@backfill_options
@click.option("--yes", "-y", is_flag=True, help="Approve the plan without asking.")
@store_options
@click.option(
    "--record-partition-keys/--no-record-partition-keys", default=None,
    help=(
        "Keep each attempt's canonical key text in the run history (default: the project configuration's "
        "record_partition_keys, else off: only whether it had a key)."
    ),
)
@click.option(
    "--tag", "tag_texts", multiple=True, metavar="KEY=VALUE", type=STORABLE_TEXT,
    help="Record this tag with the run (repeatable; added to the flow's own tags).",
)
@executor_option
@log_options
@json_option
@handles_errors
def run(
    entry: str,
    targets: tuple[str, ...],
    missing: bool,
    failed_from: str | None,
    yes: bool,
    store_url: str | None,
    no_store: bool,
    record_partition_keys: bool | None,
    tag_texts: tuple[str, ...],
    executor: str | None,
    verbose: bool,
    quiet: bool,
    capture_output: bool | None,
    as_json: bool,
    **selection: Any,
) -> None:
    """Plan ENTRY, ask for approval, then run exactly that plan.

    The run is recorded in the run-history store as it progresses (see
    --store); `partita runs` reads it back. Asset bodies' log lines are
    shown on stderr as they are logged (INFO and up; -v adds DEBUG, -q
    keeps WARNING and up) and kept with their attempts (`partita runs logs`).
    """
    from partita.cli.render import render_plan
    from partita.cli.running import report_result, run_recorded

    verbosity = Verbosity.of(verbose, quiet)
    _check_approval(yes, as_json)
    tags = tags_of(tag_texts)
    check_backfill_flags(missing, failed_from, selection, no_store)
    # A selection error stops before the store opens (or is created); a backfill's selection reads the store.
    if missing or failed_from is not None:
        config = _selection_config(**selection)
        plan_backfill = backfill_plan(entry, targets, config, missing, failed_from, CLI_SELECTION_FIELDS)
        planned = None
    else:
        planned = _make_plan(entry, targets, **selection)
    err = cli_console(stderr=True)
    # The store opens before approval: an unusable store stops here (exit 4).
    with opened_store(store_url, no_store) as store:
        if planned is None:
            assert store is not None  # check_backfill_flags refused --no-store
            planned = plan_backfill(store)
        flow, flow_plan = planned
        flow = with_executor_choice(flow.with_tags(tags) if tags else flow, executor)
        render_plan(err, flow_plan)
        if flow_plan.backfill is not None and flow_plan.backfill.empty:
            err.print("Nothing to backfill; no run was started.")
            if as_json:
                emit_json(flow_plan.to_dict())
            return
        if not yes and not click.confirm(f"Run {_attempts_phrase(flow_plan)}?", default=False, err=True):
            err.print("Declined; nothing ran.")
            return
        result = run_recorded(flow, flow_plan, store, err, record_partition_keys, capture_output, verbosity, as_json)
        if store is not None and not as_json:
            err.print(f"recorded as run {result.run_id} in {escape(store.url)}", highlight=False)
    report_result(result, flow_plan, as_json)
    _exit_for(result.status)


def _exit_for(status: RunStatus) -> None:
    """Exit 1 for a failed run; 130, the code Ctrl-C gives, for one cancelled on request (`runs cancel`)."""
    from partita.results.model import RunStatus

    if status is RunStatus.FAILED:
        sys.exit(EXIT_ASSET_FAILED)
    if status is RunStatus.CANCELLED:
        sys.exit(EXIT_INTERRUPTED)


def _check_approval(yes: bool, as_json: bool) -> None:
    """Without --yes, a person must be there to approve: not with --json, not from a pipe."""
    if yes:
        return
    if as_json:
        raise ConfigurationError(
            "--json cannot be combined with an interactive confirmation; pass --yes to approve the plan"
        )
    if not _stdin_is_interactive():
        raise ConfigurationError("partita run needs approval: pass --yes when not running on an interactive terminal")


def _attempts_phrase(flow_plan: FlowPlan) -> str:
    if flow_plan.attempt_count is not None:
        return f"{flow_plan.attempt_count} attempts"
    return f"{flow_plan.known_attempt_count} attempts, plus the fan-out of the keys discovered while running"


def main() -> None:
    cli(prog_name="partita")
