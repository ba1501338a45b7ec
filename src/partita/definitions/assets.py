"""The `@asset` decorator: reads a function's signature and options into an `AssetDefinition`.

Decorating returns the very same function, so an asset stays plain Python:
callable directly and testable without partita. The description rides along
on the function (``__partita_asset__``) and in the registry.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from partita.definitions.definition import AssetDefinition, Callback
from partita.definitions.policies import RetryPolicy
from partita.definitions.registry import AssetRegistry, default_registry
from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef
from partita.partitions.mappers import PartitionMapper

__all__ = ["AssetDefinition", "asset", "asset_name_of", "definition_of"]

F = TypeVar("F", bound=Callable[..., Any])

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTRIBUTE = "__partita_asset__"
CONTEXT_PARAMETER = "context"


def asset_name_of(value: Any, *, field_name: str) -> str:
    """Resolve an asset reference (a name or a decorated function) to its name."""
    if isinstance(value, str):
        if not value:
            raise DefinitionError(f"{field_name} contains an empty asset name")
        return value
    definition = getattr(value, _ATTRIBUTE, None)
    if isinstance(definition, AssetDefinition):
        return definition.name
    raise DefinitionError(f"{field_name} entries must be asset names or @asset functions")


def _is_context_parameter(parameter: inspect.Parameter) -> bool:
    if parameter.name == CONTEXT_PARAMETER:
        return True
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return annotation == "AssetContext" or annotation.endswith(".AssetContext")
    return getattr(annotation, "__name__", None) == "AssetContext" and getattr(
        annotation, "__module__", ""
    ).startswith("partita")


def _read_signature(fn: Callable[..., Any], name: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    inputs: list[tuple[str, str]] = []
    context_parameter = None
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise DefinitionError(
                f"asset {name!r}: parameter {parameter.name!r} is variadic; name each upstream asset as a parameter"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise DefinitionError(
                f"asset {name!r}: parameter {parameter.name!r} is positional-only; partita passes inputs by name"
            )
        if _is_context_parameter(parameter):
            if context_parameter is not None:
                raise DefinitionError(f"asset {name!r} declares more than one context parameter")
            context_parameter = parameter.name
        else:
            inputs.append((parameter.name, parameter.name))
    return tuple(inputs), context_parameter


def _check_options(
    asset_name: str,
    resource: str | None,
    retry: RetryPolicy | None,
    materialization: Any,
    version: str | None,
    callbacks: dict[str, Callback | None],
) -> None:
    if resource is not None and (not isinstance(resource, str) or not resource.strip()):
        raise DefinitionError(f"asset {asset_name!r}: resource must be the non-empty name of a resource policy")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise DefinitionError(f"asset {asset_name!r}: retry must be a RetryPolicy")
    if materialization is not None and not all(
        callable(getattr(materialization, method, None)) for method in ("resolve", "load", "commit")
    ):
        raise DefinitionError(
            f"asset {asset_name!r}: materialization must provide resolve(), load() and commit() "
            "(for example FileMaterialization(root))"
        )
    if version is not None:
        # Here, not at the top: defining assets without output reuse loads no materialization code.
        from partita.materialization.protocol import check_version

        check_version(version, f"asset {asset_name!r}")
    for option, callback in callbacks.items():
        if callback is not None and not callable(callback):
            raise DefinitionError(f"asset {asset_name!r}: {option} must be a callable taking a CallbackContext")


def _build_definition(
    fn: Callable[..., Any],
    *,
    name: str | None,
    deps: Sequence[Any] | Mapping[Any, PartitionMapper | None] | None,
    partition_def: PartitionDef | None,
    resource: str | None = None,
    retry: RetryPolicy | None = None,
    materialization: Any = None,
    version: str | None = None,
    on_success: Callback | None = None,
    on_failure: Callback | None = None,
    on_retry: Callback | None = None,
) -> AssetDefinition:
    if not callable(fn):
        raise DefinitionError("@asset decorates a function")
    asset_name = getattr(fn, "__name__", None) if name is None else name
    if asset_name is None:
        raise DefinitionError("@asset needs name= for a callable without a __name__ (such as functools.partial)")
    if not isinstance(asset_name, str) or _NAME.fullmatch(asset_name) is None:
        raise DefinitionError("asset name must be an identifier (letters, digits and '_', not starting with a digit)")
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise DefinitionError(f"asset {asset_name!r}: generator functions are not asset bodies; return the output")
    if partition_def is not None and not isinstance(partition_def, PartitionDef):
        raise DefinitionError(f"asset {asset_name!r}: partition_def must be a PartitionDef instance")
    if deps is not None and (isinstance(deps, (str, bytes)) or not isinstance(deps, Sequence | Mapping)):
        raise DefinitionError(
            f"asset {asset_name!r}: deps must be a list of asset names or @asset functions, "
            "or a mapping of them to partition mappers"
        )
    _check_options(
        asset_name,
        resource,
        retry,
        materialization,
        version,
        {"on_success": on_success, "on_failure": on_failure, "on_retry": on_retry},
    )
    inputs, context_parameter = _read_signature(fn, asset_name)
    mappers = _read_mappers(asset_name, deps, partition_def)
    return AssetDefinition(
        name=asset_name,
        fn=fn,
        inputs=inputs,
        deps=_all_deps(asset_name, inputs, deps, mappers),
        context_parameter=context_parameter,
        partition_def=partition_def,
        is_async=inspect.iscoroutinefunction(fn),
        resource=resource,
        retry=retry,
        materialization=materialization,
        version=version,
        on_success=on_success,
        on_failure=on_failure,
        on_retry=on_retry,
        mappers=mappers,
    )


def _all_deps(asset_name: str, inputs: tuple[tuple[str, str], ...], deps: Any, mappers: Mapping[str, Any]) -> tuple[str, ...]:
    """Inputs first, then the ``deps`` names, without repeats; never the asset itself."""
    all_deps = [upstream for _, upstream in inputs]
    for upstream in deps or ():
        upstream_name = asset_name_of(upstream, field_name=f"asset {asset_name!r} deps")
        if upstream_name not in all_deps:
            all_deps.append(upstream_name)
    if asset_name in all_deps:
        if asset_name not in mappers:
            raise DefinitionError(
                f"asset {asset_name!r} depends on itself; to read its own earlier partitions declare "
                f"deps={{{asset_name!r}: OffsetMapper(-1)}}"
            )
        all_deps.remove(asset_name)  # not an edge of the asset graph: an edge between keys of one asset
    return tuple(all_deps)


def _read_mappers(asset_name: str, deps: Any, partition_def: PartitionDef | None) -> dict[str, PartitionMapper]:
    """The mappers of a ``deps`` mapping (a name mapped to None is a plain dependency)."""
    if not isinstance(deps, Mapping):
        return {}
    mappers: dict[str, PartitionMapper] = {}
    for upstream, mapper in deps.items():
        upstream_name = asset_name_of(upstream, field_name=f"asset {asset_name!r} deps")
        if mapper is None:
            continue
        if not isinstance(mapper, PartitionMapper):
            raise DefinitionError(
                f"asset {asset_name!r}: deps[{upstream_name!r}] must be a PartitionMapper or None"
            )
        if partition_def is None:
            raise DefinitionError(
                f"asset {asset_name!r}: deps[{upstream_name!r}] declares a partition mapper, but the asset is not "
                "partitioned; a mapper says which upstream keys each of its keys needs"
            )
        mappers[upstream_name] = mapper
    return mappers


@overload
def asset(fn: F, /) -> F: ...


@overload
def asset(
    *,
    name: str | None = None,
    deps: Sequence[Any] | Mapping[Any, PartitionMapper | None] | None = None,
    partition_def: PartitionDef | None = None,
    resource: str | None = None,
    retry: RetryPolicy | None = None,
    materialization: Any = None,
    version: str | None = None,
    on_success: Callback | None = None,
    on_failure: Callback | None = None,
    on_retry: Callback | None = None,
    registry: AssetRegistry | None = None,
) -> Callable[[F], F]: ...


def asset(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    deps: Sequence[Any] | Mapping[Any, PartitionMapper | None] | None = None,
    partition_def: PartitionDef | None = None,
    resource: str | None = None,
    retry: RetryPolicy | None = None,
    materialization: Any = None,
    version: str | None = None,
    on_success: Callback | None = None,
    on_failure: Callback | None = None,
    on_retry: Callback | None = None,
    registry: AssetRegistry | None = None,
) -> Any:
    """Declare a function as an asset and register it.

    Parameters name upstream assets (a parameter called ``context`` receives
    the run context instead); ``deps`` adds ordering-only dependencies. As a
    mapping, ``deps`` gives a dependency a partition mapper: which of the
    upstream's keys each key of this asset needs, in this or another partition
    domain (``{"hourly_events": RollupMapper("day")}``); under the asset's own
    name, an `OffsetMapper` reads its own earlier partitions.
    ``resource`` names a flow's `ResourcePolicy`; ``retry`` retries failures
    of this asset; ``materialization`` (an adapter such as
    `FileMaterialization`) with an explicit ``version`` reuses committed
    outputs per key; callbacks receive a `CallbackContext`. The function is
    returned unchanged.
    """

    if registry is not None and not isinstance(registry, AssetRegistry):
        raise DefinitionError("asset registry must be an AssetRegistry")

    def decorate(function: F) -> F:
        definition = _build_definition(
            function,
            name=name,
            deps=deps,
            partition_def=partition_def,
            resource=resource,
            retry=retry,
            materialization=materialization,
            version=version,
            on_success=on_success,
            on_failure=on_failure,
            on_retry=on_retry,
        )
        (registry if registry is not None else default_registry()).register(definition)
        setattr(function, _ATTRIBUTE, definition)
        return function

    if fn is not None:
        return decorate(fn)
    return decorate


def definition_of(fn: Any) -> AssetDefinition | None:
    """Return the definition a decorated function carries, if any."""
    definition = getattr(fn, _ATTRIBUTE, None)
    return definition if isinstance(definition, AssetDefinition) else None

