"""Load a CLI entry into a Flow (SPEC §2).

Accepted forms: ``path/file.py`` (its ``flow``, else the terminal assets it
registered), ``path/file.py:name`` and ``pkg.module:name``, where ``name`` is a
Flow or a zero-argument factory returning one. Entry files run in a fresh
default registry, so loading is repeatable. Loading runs trusted Python: it is
not sandboxed.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import itertools
import re
import sys
from pathlib import Path
from types import ModuleType

from partita.definitions.assets import definition_of
from partita.definitions.registry import AssetRegistry, fresh_default_registry
from partita.errors import EntryLoadError, PartitaError
from partita.flow import Flow

__all__ = ["load_entry"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_counter = itertools.count()


def _split(spec: str) -> tuple[str, str | None]:
    head, sep, tail = spec.rpartition(":")
    if sep and _IDENTIFIER.fullmatch(tail):
        return head, tail
    return spec, None


def load_registry(spec: str) -> AssetRegistry:
    """The asset definitions ENTRY declares (for validating events against them)."""
    location, name = _split(spec)
    if name is not None:
        return load_entry(spec).registry
    with fresh_default_registry() as registry:
        module = _load_module(location)
    if len(registry):
        return registry
    flows = _module_flows(module)
    if not flows:
        raise EntryLoadError(f"entry {spec!r} registers no assets")
    return flows[0].registry


def load_trigger_flows(spec: str) -> list[Flow]:
    """The flows with a trigger that ENTRY defines (or the one it names)."""
    location, name = _split(spec)
    if name is not None:
        flow = load_entry(spec)
        flows = [flow]
    else:
        with fresh_default_registry():
            flows = _module_flows(_load_module(location))
    triggered = [flow for flow in flows if flow.trigger is not None]
    if not triggered:
        raise EntryLoadError(f"entry {spec!r} defines no Flow with a trigger (Flow(..., trigger=OnAssetEvents(...)))")
    names = [flow.name for flow in triggered]
    if len(set(names)) != len(names):
        raise EntryLoadError(f"entry {spec!r} defines two triggered flows with the same name; give each a name=")
    return triggered


def load_entry(spec: str) -> Flow:
    if not spec:
        raise EntryLoadError("entry is empty; pass path/file.py, path/file.py:name or pkg.module:name")
    location, name = _split(spec)
    # The fresh registry stays the default while a factory runs, so a Flow it
    # builds without registry= sees the assets the entry just registered.
    with fresh_default_registry() as registry:
        if _is_file_location(location):
            module = _load_file(Path(location))
        elif _MODULE_PATH.fullmatch(location):
            module = _import_module(location)
        else:
            raise EntryLoadError(
                f"entry {spec!r} is neither a Python file nor a module path; "
                "pass path/file.py, path/file.py:name or pkg.module:name"
            )
        if name is not None:
            return _named_flow(module, name, spec)
        return _default_flow(module, registry, spec)


def _is_file_location(location: str) -> bool:
    return location.endswith(".py") or Path(location).is_file()


def _load_module(location: str) -> ModuleType:
    """The module at ``location``: a Python file, else a module path."""
    return _load_file(Path(location)) if _is_file_location(location) else _import_module(location)


def _module_flows(module: ModuleType) -> list[Flow]:
    """The Flow objects the module defines at top level, in definition order."""
    return [value for value in vars(module).values() if isinstance(value, Flow)]


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise EntryLoadError(f"entry file {str(path)!r} does not exist or is not a file")
    module_name = f"_partita_entry_{next(_counter)}_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise EntryLoadError(f"entry file {str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    directory = str(path.resolve().parent)
    sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[module_name]
        raise EntryLoadError(
            f"entry file {str(path)!r} has a syntax error at line {exc.lineno}: {exc.msg}"
        ) from None
    except PartitaError:
        del sys.modules[module_name]
        raise
    except BaseException as exc:
        del sys.modules[module_name]
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise EntryLoadError(
            f"entry file {str(path)!r} raised {type(exc).__name__} while loading: {exc}"
        ) from exc
    finally:
        if directory in sys.path:
            sys.path.remove(directory)
    return module


def _import_module(path: str) -> ModuleType:
    cwd = str(Path.cwd())
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(path)
    except PartitaError:
        raise
    except SyntaxError as exc:
        raise EntryLoadError(f"module {path!r} has a syntax error in {exc.filename} at line {exc.lineno}: {exc.msg}") from None
    except ImportError as exc:
        raise EntryLoadError(f"module {path!r} could not be imported: {exc}") from None
    except Exception as exc:
        raise EntryLoadError(f"module {path!r} raised {type(exc).__name__} while loading: {exc}") from exc
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _named_flow(module: ModuleType, name: str, spec: str) -> Flow:
    if not hasattr(module, name):
        raise EntryLoadError(f"entry {spec!r}: the module has no attribute {name!r}")
    value = getattr(module, name)
    if isinstance(value, Flow):
        return value
    if definition_of(value) is not None or not callable(value):
        raise EntryLoadError(
            f"entry {spec!r}: {name!r} is not a Flow or a zero-argument factory returning one"
        )
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        signature = None
    if signature is not None and any(
        parameter.default is inspect.Parameter.empty
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for parameter in signature.parameters.values()
    ):
        raise EntryLoadError(f"entry {spec!r}: factory {name!r} requires arguments; a factory takes none")
    try:
        flow = value()
    except PartitaError:
        raise
    except Exception as exc:
        raise EntryLoadError(f"entry {spec!r}: factory {name!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(flow, Flow):
        raise EntryLoadError(f"entry {spec!r}: factory {name!r} returned {type(flow).__name__}, not a Flow")
    return flow


def _default_flow(module: ModuleType, registry: AssetRegistry, spec: str) -> Flow:
    flow = getattr(module, "flow", None)
    if isinstance(flow, Flow):
        return flow
    others = sorted(attr for attr, value in vars(module).items() if isinstance(value, Flow))
    if others:
        raise EntryLoadError(
            f"entry {spec!r} defines Flow objects {', '.join(others)} but none named 'flow'; "
            f"choose one with {spec}:NAME"
        )
    if len(registry) == 0:
        raise EntryLoadError(f"entry {spec!r} defines no Flow named 'flow' and registers no assets")
    # When every asset is depended on (a cycle), target them all so that
    # planning reports the cycle by name.
    targets = registry.terminal_assets() or tuple(registry)
    return Flow(list(targets), registry=registry)
