"""Project configuration: ``[tool.partita]`` in ``pyproject.toml``, or a ``partita.toml``.

The file is found from a folder (the working directory by default) upward;
the nearest folder holding either file wins. A folder holding both is an
error rather than a silent choice: two files that could disagree about the
store would record runs where the user does not look.

The CLI reads it for every command; flows created in Python are unaffected
unless the program calls `load_project_config()` and passes its values on,
because a library call changing behaviour with the caller's working
directory would surprise the program that embeds it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from partita.errors import ConfigurationError
from partita.store.location import StoreBackend, parse_store_url

__all__ = [
    "EXECUTOR_TEXT_FORMS",
    "ProjectConfig",
    "check_executor_text",
    "find_project_config_file",
    "load_project_config",
    "resolve_store_url",
]

PYPROJECT = "pyproject.toml"
PARTITA_TOML = "partita.toml"
#: Keys accepted now; ``ui`` will be added when that setting exists.
KNOWN_KEYS = ("store", "record_partition_keys", "log_capture", "executor")
#: The executors a text setting (``--executor``, the ``executor`` key) names.
EXECUTOR_TEXT_FORMS = "thread, process, dask, or dask://HOST:PORT"


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """The settings of one configuration file (``None`` where the file says nothing).

    ``store`` is already resolved: a relative SQLite path is made relative to
    the file's folder, so a command run from a subfolder records into the
    same store. ``log_capture`` turns output capture (stdout and stderr
    kept with attempt logs) on or off for the runs CLI commands start;
    ``executor`` is where their bodies run (``--executor`` wins over it).
    """

    path: Path | None = None
    store: str | None = None
    record_partition_keys: bool | None = None
    log_capture: bool | None = None
    executor: str | None = None


def find_project_config_file(start: Path | str | None = None) -> Path | None:
    """The nearest ``partita.toml``, or ``pyproject.toml`` with a ``[tool.partita]`` table, from ``start`` up."""
    folder = Path.cwd() if start is None else Path(start)
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        own = candidate / PARTITA_TOML
        pyproject = candidate / PYPROJECT
        has_table = pyproject.is_file() and _tool_table(pyproject) is not None
        if own.is_file() and has_table:
            raise ConfigurationError(
                f"{candidate} holds both {PARTITA_TOML} and a [tool.partita] table in {PYPROJECT}; "
                "keep the settings in one of them"
            )
        if own.is_file():
            return own
        if has_table:
            return pyproject
    return None


def load_project_config(start: Path | str | None = None) -> ProjectConfig:
    """The project configuration found from ``start`` (default: the working directory) upward.

    An empty `ProjectConfig` when there is none. Raises ConfigurationError
    naming the file, the key and the rule for a file that does not parse, an
    unknown key or a value of the wrong type.
    """
    path = find_project_config_file(start)
    if path is None:
        return ProjectConfig()
    table = _tool_table(path) if path.name == PYPROJECT else _parsed(path)
    return _validated(path, table or {})


def resolve_store_url(flag: str | None, environment: str | None, config: ProjectConfig, default: str) -> str:
    """The store URL by precedence: the CLI flag, then the environment variable, then the file, then the default."""
    return flag or environment or config.store or default


def _parsed(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(f"{path} is not valid TOML ({error}); fix the file or remove it") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"{path} cannot be read ({type(error).__name__})") from None


def _tool_table(path: Path) -> Mapping[str, Any] | None:
    tool = _parsed(path).get("tool")
    if not isinstance(tool, Mapping) or "partita" not in tool:
        return None
    table = tool["partita"]
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{path}: tool.partita must be a table ([tool.partita])")
    return table


def _validated(path: Path, table: Mapping[str, Any]) -> ProjectConfig:
    where = f"{path}: " + ("tool.partita." if path.name == PYPROJECT else "")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{where}{unknown[0]} is not a known key; known keys: {', '.join(KNOWN_KEYS)}"
        )
    flags: dict[str, bool | None] = {}
    for key in ("record_partition_keys", "log_capture"):
        value = table.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigurationError(f"{where}{key} must be true or false")
        flags[key] = value
    store = table.get("store")
    if store is not None:
        store = _store_relative_to(path.parent, store, f"{where}store")
    executor = table.get("executor")
    if executor is not None:
        executor = check_executor_text(executor, f"{where}executor")
    return ProjectConfig(path=path, store=store, executor=executor, **flags)


def check_executor_text(value: Any, field: str) -> str:
    """An executor named by text (the CLI's ``--executor``, the configuration's ``executor``), checked."""
    text = value.strip() if isinstance(value, str) else None
    if text in ("thread", "process", "dask"):
        return text
    if text is not None and text.startswith("dask://"):
        # Imported here: the check needs no dask, and other commands never load the executor modules.
        from partita.execution.dask_executor import parse_dask_address

        try:
            parse_dask_address(text)
        except ConfigurationError:
            pass
        else:
            return text
    raise ConfigurationError(f"{field} must be {EXECUTOR_TEXT_FORMS}")


def _store_relative_to(folder: Path, value: Any, field: str) -> str:
    """A store URL whose relative SQLite path is taken from ``folder``, not the working directory."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{field} must be a store URL such as sqlite:///.partita/partita.db")
    try:
        location = parse_store_url(value)
    except ConfigurationError as error:
        raise ConfigurationError(f"{field}: {error}") from None
    if location.backend is not StoreBackend.SQLITE or location.path is None or location.path.is_absolute():
        return value
    return location.url.set(database=str(folder / location.path)).render_as_string(hide_password=False)
