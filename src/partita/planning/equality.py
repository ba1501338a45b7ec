"""Equality by value for configuration objects, so an equal Flow rebuilt from its entry is recognized.

Loading an entry file again creates new functions, classes and definition
objects. `same_value` treats two of them as equal when they are built from
the same source with the same settings: functions by code, defaults and
closed-over values (not by module name, which differs per load); classes by
name, bases and members; dataclasses field by field; objects with their own
``__eq__`` by it; other objects by their instance attributes. Objects whose
state is out of reach (locks, sockets, C objects) are equal only to
themselves. Cycles (a method's ``__class__`` cell, a self-reference) are
assumed equal while they are being compared.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

__all__ = ["same_value"]

#: Deeper structures are not configuration; they compare unequal rather than recurse without bound.
_MAX_DEPTH = 40
_MISSING = object()
#: Class members that differ per load without changing behaviour.
_IGNORED_CLASS_MEMBERS = frozenset(
    {"__module__", "__dict__", "__weakref__", "__doc__", "__firstlineno__", "_abc_impl"}  # _abc_impl: ABC caches
)


def same_value(left: Any, right: Any) -> bool:
    """Whether ``left`` and ``right`` are the same configuration (see the module docstring)."""
    return _Comparison().same(left, right, 0)


class _Comparison:
    def __init__(self) -> None:
        self._assumed: set[tuple[int, int]] = set()

    def same(self, left: Any, right: Any, depth: int) -> bool:
        if left is right:
            return True
        if depth > _MAX_DEPTH:
            return False
        if isinstance(left, type) and isinstance(right, type):
            return self._guarded(left, right, depth, self._same_class)
        if not self._same_kind(type(left), type(right), depth):
            return False
        return self._guarded(left, right, depth, self._same_instance)

    def _guarded(self, left: Any, right: Any, depth: int, compare: Any) -> bool:
        pair = (id(left), id(right))
        if pair in self._assumed:
            return True
        self._assumed.add(pair)
        try:
            return bool(compare(left, right, depth + 1))
        finally:
            self._assumed.discard(pair)

    def _same_kind(self, left: type, right: type, depth: int) -> bool:
        return left is right or self.same(left, right, depth)

    def _all(self, pairs: Any, depth: int) -> bool:
        return all(self.same(a, b, depth) for a, b in pairs)

    def _same_class(self, left: type, right: type, depth: int) -> bool:
        if left.__qualname__ != right.__qualname__ or len(left.__bases__) != len(right.__bases__):
            return False
        if not self._all(zip(left.__bases__, right.__bases__, strict=True), depth):
            return False
        members = set(vars(left)) - _IGNORED_CLASS_MEMBERS
        if members != set(vars(right)) - _IGNORED_CLASS_MEMBERS:
            return False
        return self._all(((vars(left)[name], vars(right)[name]) for name in members), depth)

    def _same_instance(self, left: Any, right: Any, depth: int) -> bool:
        if isinstance(left, types.FunctionType):
            return self._same_function(left, right, depth)
        if isinstance(left, types.MethodType):
            return self._all(((left.__func__, right.__func__), (left.__self__, right.__self__)), depth)
        if isinstance(left, (staticmethod, classmethod)):
            return self.same(left.__func__, right.__func__, depth)
        if isinstance(left, types.MemberDescriptorType):  # a __slots__ entry of a reloaded class
            return bool(left.__name__ == right.__name__)
        if isinstance(left, property):
            return self._all(((left.fget, right.fget), (left.fset, right.fset), (left.fdel, right.fdel)), depth)
        if isinstance(left, functools.partial):
            return self._all(((left.func, right.func), (left.args, right.args), (left.keywords, right.keywords)), depth)
        if isinstance(left, (tuple, list)):
            return len(left) == len(right) and self._all(zip(left, right, strict=True), depth)
        if isinstance(left, dict):
            return left.keys() == right.keys() and self._all(((left[k], right[k]) for k in left), depth)
        if dataclasses.is_dataclass(left):
            names = [f.name for f in dataclasses.fields(left)]
            return self._all(((getattr(left, n), getattr(right, n)) for n in names), depth)
        if type(left) is type(right) and type(left).__eq__ is not object.__eq__:
            try:
                return bool(left == right)
            except Exception:  # noqa: BLE001 - an __eq__ that cannot answer means "not known equal"
                return False
        left_state, right_state = _state(left), _state(right)
        if left_state is None or right_state is None:
            return False
        return self.same(left_state, right_state, depth)

    def _same_function(self, left: types.FunctionType, right: types.FunctionType, depth: int) -> bool:
        # Code objects compare by value (bytecode, constants, names, line numbers), not by file name.
        if left.__qualname__ != right.__qualname__ or left.__code__ != right.__code__:
            return False
        cells = zip(left.__closure__ or (), right.__closure__ or (), strict=False)
        return (
            len(left.__closure__ or ()) == len(right.__closure__ or ())
            and self._all(((left.__defaults__, right.__defaults__), (left.__kwdefaults__, right.__kwdefaults__)), depth)
            and self._all(((_cell(a), _cell(b)) for a, b in cells), depth)
        )


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _state(value: Any) -> dict[str, Any] | None:
    """Instance attributes (``__dict__`` and slots), or None when the state is out of reach."""
    state: dict[str, Any] = {}
    reachable = False
    for cls in type(value).__mro__:
        slots = vars(cls).get("__slots__")
        if slots is None:
            continue
        reachable = True
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                state[name] = getattr(value, name, _MISSING)
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        reachable = True
        state.update(attributes)
    return state if reachable else None
