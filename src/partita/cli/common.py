"""What every command shares: one JSON document on stdout, errors as exit codes, store options."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from partita.config import (
    EXECUTOR_TEXT_FORMS,
    ProjectConfig,
    check_executor_text,
    load_project_config,
    resolve_store_url,
)
from partita.definitions.launch import parse_tag
from partita.documents import document
from partita.errors import ConfigurationError, ExecutionError, MissingStoreError, PartitaError, UnknownRunError
from partita.partitions.base import storable_text_problem
from partita.planning.selection import SelectionFields
from partita.store import DEFAULT_STORE_URL, SqlStore, open_store, store_url_from_environment
from partita.store.location import parse_store_url

EXIT_OK = 0
EXIT_ASSET_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM

_DOCUMENT_STREAM = "partita.document_stream"
_PROJECT_CONFIG = "partita.project_config"


def emit_document(kind: str, body: dict[str, Any], *, compact: bool = False) -> None:
    emit_json(document(kind, body), compact=compact)


def emit_json(document: dict[str, Any], *, compact: bool = False) -> None:
    """Write the command's one document to the real stdout (see `handles_errors`).

    ``compact`` prints it on one line: a document of 100,000 keys indented
    costs the pure-Python encoder seconds, the C encoder a fraction of one.
    """
    stream = click.get_current_context().meta.get(_DOCUMENT_STREAM, sys.stdout)
    text = json.dumps(document, separators=(",", ":")) if compact else json.dumps(document, indent=2)
    click.echo(text, file=stream)


def fail(error: PartitaError, as_json: bool) -> NoReturn:
    if as_json:
        emit_document(
            "error",
            {"error": {"type": type(error).__name__, "message": str(error), "exit_code": error.exit_code}},
        )
    Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    sys.exit(error.exit_code)


def handles_errors(command: Callable[..., None]) -> Callable[..., None]:
    """Turn partita errors into their exit code and a clear message."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        as_json = bool(kwargs.get("as_json"))
        # With --json, stdout carries exactly one document: anything entry
        # files or asset bodies print is diverted to stderr.
        click.get_current_context().meta[_DOCUMENT_STREAM] = sys.stdout
        diverted = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
        with diverted:
            try:
                command(*args, **kwargs)
            except PartitaError as error:
                fail(error, as_json)
            except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
                raise  # click reports these itself
            except Exception as error:  # noqa: BLE001 - the last resort: never a raw traceback
                fail(unexpected_error(error), as_json)

    return wrapper


def unexpected_error(error: Exception) -> ExecutionError:
    """An exception no rule anticipated, told without its message.

    The message of an arbitrary exception (from user definitions, drivers,
    the standard library) may repeat a partition key or a secret, so only
    its type and where it was raised are reported (exit 4).
    """
    frames = traceback.extract_tb(error.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" at {Path(last.filename).name}:{last.lineno}"
    return ExecutionError(
        f"unexpected {type(error).__name__}{where}; its message is withheld because it may repeat a partition key "
        "or a secret. This is a defect: please report it with the command that raised it"
    )


class StorableText(click.ParamType):
    """Text a store lookup can use: no NUL (PostgreSQL rejects it), no lone surrogates (not UTF-8).

    Undecodable command-line bytes arrive as lone surrogates; refusing them
    here is a usage error (exit 2), and the message does not repeat the value.
    """

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        problem = storable_text_problem(value) if isinstance(value, str) else None
        if problem is not None:
            self.fail(problem, param, ctx)
        return value


STORABLE_TEXT = StorableText()


#: Selection errors name the flags the user typed, not the configuration fields behind them.
CLI_SELECTION_FIELDS = SelectionFields(
    keys="--partition-key", range="--partition-range", empty="--empty-partitions", one_key="--partition-key #{number}"
)


def key_selection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--partition-key KEY`` (repeatable) and ``--partition-range START END``: keys as plan, run and status take them."""
    command = click.option(
        "--partition-range", "partition_range", nargs=2, metavar="START END", default=None,
        help="Select the inclusive range START..END.",
    )(command)
    return click.option(
        "--partition-key", "--partition", "partition_keys", multiple=True, metavar="KEY",
        help="Select one canonical key; repeat for several.",
    )(command)


def json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``: print exactly one typed document on stdout."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")(command)


def store_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--store URL`` (resolved by `opened_store` / `reading_store`)."""
    return click.option(
        "--store", "store_url", metavar="URL", default=None,
        help=(
            "The store of run history, events and trigger state (default: $PARTITA_STORE, else the project "
            f"configuration's store, else {DEFAULT_STORE_URL})."
        ),
    )(command)


def store_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--store URL`` and ``--no-store`` (resolved by `opened_store`)."""
    command = click.option("--no-store", is_flag=True, help="Do not read or record run history.")(command)
    return store_option(command)


@contextlib.contextmanager
def opened_store(
    store_url: str | None, no_store: bool, *, announce: Callable[[str], None] | None = None
) -> Iterator[SqlStore | None]:
    """The store a writing command records into: --store, $PARTITA_STORE or the default; None with --no-store.

    An in-memory or ``?mode=ro`` database is refused before anything runs:
    the command would report history recorded that no later command can read,
    or fail at its first write. ``announce`` tells that a store was created
    (default: a line on stderr; a daemon logging JSON logs it instead).
    """
    if no_store:
        if store_url:
            raise ConfigurationError("--store and --no-store cannot be combined")
        yield None
        return
    url = chosen_store_url(store_url)
    location = parse_store_url(url)
    if location.in_memory:
        raise ConfigurationError(
            "--store names an in-memory SQLite database (sqlite://, sqlite:/// or sqlite:///:memory:): "
            "nothing recorded there outlives this command; name a file, for example sqlite:///.partita/partita.db"
        )
    if location.read_only:
        raise ConfigurationError(
            f"--store {location.display} is read-only (mode=ro), but this command records into the store; "
            "remove ?mode=ro"
        )
    store = open_store(url)
    if store.created:
        message = f"partita: created the run-history store {store.url}"
        if announce is not None:
            announce(message)
        else:
            Console(stderr=True).print(escape(message), highlight=False, soft_wrap=True)
    try:
        yield store
    finally:
        store.close()


def chosen_store_url(store_url: str | None) -> str:
    """--store, else $PARTITA_STORE, else the project configuration's ``store``, else the default."""
    return resolve_store_url(store_url, store_url_from_environment(), project_config(), DEFAULT_STORE_URL)


def no_run_store_error(run_id: str, store_url: str | None) -> UnknownRunError:
    """What `runs show`, `runs logs` and `--failed-from` say when the store that would hold the run does not exist."""
    return UnknownRunError(f"no run with id {run_id!r}: no run-history store exists at {chosen_store_url(store_url)} yet")


def project_config() -> ProjectConfig:
    """The project configuration found from the working directory upward (read once per command)."""
    context = click.get_current_context(silent=True)
    if context is None:
        return load_project_config()
    meta = context.find_root().meta
    if _PROJECT_CONFIG not in meta:
        meta[_PROJECT_CONFIG] = load_project_config()
    config: ProjectConfig = meta[_PROJECT_CONFIG]
    return config


@contextlib.contextmanager
def reading_store(store_url: str | None) -> Iterator[SqlStore | None]:
    """The store for a reading command; None when no store exists there yet (nothing is created)."""
    try:
        store = open_store(chosen_store_url(store_url), create=False)
    except MissingStoreError:
        yield None
        return
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def preview_store(store_url: str | None) -> Iterator[SqlStore]:
    """The store a preview reads; without one, an empty in-memory store (a preview creates no file)."""
    with reading_store(store_url) as store:
        if store is not None:
            yield store
            return
    empty = open_store("sqlite://")
    try:
        yield empty
    finally:
        empty.close()


def refuse_combined(flags: Iterable[tuple[str, object]], purpose: str) -> None:
    """Refuse the flags given (a truthy value) beside one that ``purpose`` describes, naming each of them."""
    given = [flag for flag, value in flags if value]
    if given:
        raise ConfigurationError(f"{purpose}; {', '.join(given)} cannot be combined with it")


def tags_of(texts: tuple[str, ...]) -> dict[str, str]:
    """Repeated ``--tag KEY=VALUE`` options as a mapping; a malformed or repeated tag is a usage error (exit 2)."""
    tags: dict[str, str] = {}
    for text in texts:
        key, value = parse_tag(text)
        if key in tags:
            raise ConfigurationError(f"--tag {key} is given twice; give each tag key once")
        tags[key] = value
    return tags


_AGE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def since_time(text: str, now: float) -> float:
    """``--since`` as a POSIX time: an age (``30m``, ``2h``, ``7d``) before ``now``, or an ISO 8601 time.

    A time without an offset is UTC, so the same command means the same on every host.
    """
    value = text.strip()
    unit = _AGE_UNITS.get(value[-1:].lower())
    if unit is not None and value[:-1].isdigit():
        return now - int(value[:-1]) * unit
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(
            "--since must be an ISO 8601 time (2026-10-25 or 2026-10-25T08:00+02:00) or an age such as 30m, 2h or 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _checked_executor(_context: click.Context, _parameter: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return check_executor_text(value, "--executor")
    except ConfigurationError as error:
        raise click.BadParameter(f"must be {EXECUTOR_TEXT_FORMS}", param_hint="'--executor'") from error


def executor_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--executor KIND``: where the bodies of the runs this command starts run."""
    return click.option(
        "--executor", "executor", default=None, metavar="KIND", callback=_checked_executor,
        help=(
            "Run bodies on: thread (the default), process (worker processes), dask (a LocalCluster per run) "
            "or dask://HOST:PORT (a running Dask scheduler). Default: the project configuration's executor, "
            "else the flow's own."
        ),
    )(command)


def with_executor_choice(flow: Any, executor: Any) -> Any:
    """The flow on the executor the flag, else the project configuration, names (else unchanged)."""
    chosen = executor if executor is not None else project_config().executor
    return flow if chosen is None else flow.with_executor(chosen)


@contextlib.contextmanager
def daemon_executor(executor: str | None) -> Iterator[Any]:
    """The executor a daemon's consumer runs share: ``dask`` starts one LocalCluster for all of them, not one each."""
    chosen = executor if executor is not None else project_config().executor
    if chosen != "dask":
        yield executor
        return
    from partita.execution.dask_executor import DaskExecutor

    with DaskExecutor.on_one_local_cluster() as shared:
        yield shared
