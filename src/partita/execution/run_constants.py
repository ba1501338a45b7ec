"""Objects every body of a run shares, sent to another process once per run instead of once per attempt.

An attempt's emitter carries the run's event catalog, whose partition
definitions may hold thousands of keys: pickled with every body, they made
the cost of sending one attempt grow with the keys of the run (about 80 KB
and 0.8 ms an attempt at 3,334 static keys). `RunConstants` pickles a call
with a reference (pickle's persistent id) in place of each shared object;
the receiving process unpickles the shared objects once (`install`) and
resolves the references against them (`load_call`).
"""

from __future__ import annotations

import io
import pickle
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

__all__ = ["RunConstants", "forget", "install", "load_call", "shared_objects_of"]


class _References:
    """A pickler mix-in writing a persistent id for each registered object (by identity)."""

    def __init__(self, file: io.BytesIO, ids: Mapping[int, int]) -> None:
        super().__init__(file, protocol=5)  # type: ignore[call-arg]
        self._ids = ids

    def persistent_id(self, obj: Any) -> int | None:
        return self._ids.get(id(obj))


class _ReferencingPickler(_References, pickle.Pickler):
    """The standard pickler with references."""


_by_value_pickler: type[pickle.Pickler] | None = None


def _cloudpickle_referencing_pickler() -> type[pickle.Pickler]:
    """The same with cloudpickle (bodies from an entry file travel by value); built on first use: dask brings it."""
    global _by_value_pickler
    if _by_value_pickler is None:
        import cloudpickle

        class _ByValue(_References, cloudpickle.Pickler):  # type: ignore[misc]
            pass

        _by_value_pickler = _ByValue
    return _by_value_pickler


class _ResolvingUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, objects: list[Any]) -> None:
        super().__init__(file)
        self._objects = objects

    def persistent_load(self, pid: Any) -> Any:
        return self._objects[pid]


class RunConstants:
    """A run's shared objects: pickled once (`table`), referenced from every call (`dumps`).

    ``by_value`` pickles with cloudpickle, as the Dask executor must; the
    process executor uses the standard pickler, as it always has.
    """

    __slots__ = ("_objects", "_ids", "_pickler", "table")

    def __init__(self, objects: list[Any], *, by_value: bool = False) -> None:
        self._objects = objects  # held: the ids below stay valid while this lives
        self._ids = {id(obj): index for index, obj in enumerate(objects)}
        self._pickler = _cloudpickle_referencing_pickler() if by_value else _ReferencingPickler
        #: The objects pickled, for the receiving side's `install`.
        buffer = io.BytesIO()
        self._pickler(buffer, {}).dump(objects)
        self.table = buffer.getvalue()

    def dumps(self, call: Any) -> bytes:
        """``call`` pickled, each shared object written as a reference."""
        buffer = io.BytesIO()
        self._pickler(buffer, self._ids).dump(call)
        return buffer.getvalue()


def shared_objects_of(emitter: Any) -> list[Any]:
    """What an attempt's emitter shares with every other attempt of its run: the catalog and its definitions."""
    catalog = getattr(emitter, "catalog", None)
    if not isinstance(catalog, Mapping):
        return []
    definitions = {id(value): value for value in catalog.values() if value is not None}
    return [catalog, *definitions.values()]


_LOADED_LIMIT = 16  # runs whose constants one process keeps unpickled at once
_loaded: OrderedDict[str, list[Any]] = OrderedDict()
_loaded_lock = threading.Lock()


def install(token: str, table: bytes) -> None:
    """In the receiving process: unpickle a run's shared objects ahead of its calls."""
    objects = pickle.loads(table)
    with _loaded_lock:
        _loaded[token] = objects
        _loaded.move_to_end(token)
        while len(_loaded) > _LOADED_LIMIT:
            _loaded.popitem(last=False)


def forget(token: str) -> None:
    """In the receiving process: drop a finished run's shared objects."""
    with _loaded_lock:
        _loaded.pop(token, None)


def load_call(payload: bytes, token: str) -> Any:
    """In the receiving process: ``payload`` unpickled against its run's shared objects (installed first)."""
    with _loaded_lock:
        objects = _loaded.get(token)
    if objects is None:
        raise LookupError(f"the shared objects of run token {token} were never installed in this process")
    return _ResolvingUnpickler(io.BytesIO(payload), objects).load()
