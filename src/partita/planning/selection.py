"""Turn a run configuration into one normalized partition selection (SPEC §4).

Every rule here runs before any asset body: exactly one selection form, one
partition domain per closure, keys normalized by the definitions and
duplicates selected once. Diagnostics name the field, the asset and the rule;
they never repeat a rejected key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.errors import PlanningError, SelectionError
from partita.partitions.base import PartitionDef, apply_key_rule, check_key_text

__all__ = ["CONFIG_FIELDS", "KeySource", "Selection", "SelectionFields", "SelectionKind", "select_partitions"]


class SelectionKind(enum.Enum):
    KEYS = "keys"
    RANGE = "range"
    EMPTY = "empty"
    UNPARTITIONED = "unpartitioned"
    DISCOVER = "discover"  # a runtime domain: the producer declares the keys while the run executes


class KeySource(enum.Enum):
    """Where selected keys come from: Python values or canonical text (CLI)."""

    PYTHON = "python"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class SelectionFields:
    """How diagnostics name the selection inputs.

    A Python caller wrote configuration fields (``partition_keys[1]``); a
    command-line user typed flags (``--partition-key #2``). Each is told
    about the input in the words they used.
    """

    keys: str = "partition_keys"
    range: str = "partition_range"
    empty: str = "empty_partitions"
    #: One selected key: ``{index}`` counts from 0, ``{number}`` from 1.
    one_key: str = "partition_keys[{index}]"

    def key(self, index: int) -> str:
        return self.one_key.format(index=index, number=index + 1)

    def form(self, name: str) -> str:
        """The spelling of a `RunConfig.selection_forms` name."""
        return {"partition_keys": self.keys, "partition_range": self.range, "empty_partitions": self.empty}[name]

    def choices(self) -> str:
        return f"{self.keys}, {self.range} or {self.empty}"


#: The names a Python caller uses: the fields of `RunConfig`.
CONFIG_FIELDS = SelectionFields()


@dataclass(frozen=True, slots=True)
class Selection:
    """The normalized selection: kind, domain and keys in first-seen order."""

    kind: SelectionKind
    domain: str | None
    keys: tuple[Any, ...] = field(repr=False)
    definition: PartitionDef | None = field(repr=False, compare=False)
    #: The discovering producer of a runtime domain (None for other domains).
    producer: str | None = None

    @property
    def key_count(self) -> int | None:
        """Selected keys; None when the producer discovers them at run time."""
        if self.kind is SelectionKind.DISCOVER:
            return None
        return len(self.keys)

    @property
    def runtime(self) -> bool:
        return self.producer is not None


def select_partitions(
    closure: tuple[AssetDefinition, ...],
    config: RunConfig,
    source: KeySource = KeySource.PYTHON,
    fields: SelectionFields = CONFIG_FIELDS,
) -> Selection:
    partitioned = [definition for definition in closure if definition.partition_def is not None]
    forms = tuple(fields.form(name) for name in config.selection_forms())
    if not partitioned:
        if forms:
            raise SelectionError(
                f"{' and '.join(forms)} given, but no selected asset is partitioned; remove the partition selector"
            )
        return Selection(SelectionKind.UNPARTITIONED, None, (), None)
    domain = _single_domain(partitioned)
    _check_one_key_contract(partitioned, domain)
    if len(forms) > 1:
        raise SelectionError(
            f"choose exactly one selection form: {' and '.join(forms)} cannot be combined"
        )
    producer = _runtime_producer(partitioned, domain)
    if producer is not None and not forms:
        # The discovering producer is the deliberate choice of keys.
        return Selection(SelectionKind.DISCOVER, domain, (), producer.partition_def, producer.name)
    if not forms:
        names = ", ".join(repr(definition.name) for definition in partitioned)
        raise SelectionError(
            f"assets {names} are partitioned (domain {domain}); select partitions with {fields.choices()}"
        )
    primary = partitioned[0]
    assert primary.partition_def is not None
    producer_name = None if producer is None else producer.name
    if config.empty_partitions:
        return Selection(SelectionKind.EMPTY, domain, (), primary.partition_def, producer_name)
    if config.partition_range is not None:
        keys = _range_keys(primary, config.partition_range, source, fields)
        kind = SelectionKind.RANGE
    else:
        assert config.partition_keys is not None
        keys = _normalized_keys(primary, config.partition_keys, source, fields)
        kind = SelectionKind.KEYS
    for other in partitioned[1:]:
        if other.partition_def is not primary.partition_def:
            _check_accepted(other, keys)
    return Selection(kind, domain, keys, primary.partition_def, producer_name)


def _runtime_producer(partitioned: list[AssetDefinition], domain: str) -> AssetDefinition | None:
    """The one asset of a runtime domain without an upstream in that domain (None for other domains)."""
    if not domain.startswith("runtime:"):
        return None
    members = {definition.name for definition in partitioned}
    producers = [definition for definition in partitioned if not any(dep in members for dep in definition.deps)]
    if len(producers) != 1:
        names = ", ".join(repr(definition.name) for definition in producers)
        raise PlanningError(
            f"runtime domain {domain} needs exactly one discovering producer (an asset of the domain without an "
            f"upstream in it); the selection has {len(producers)}: {names}"
        )
    return producers[0]


def _single_domain(partitioned: list[AssetDefinition]) -> str:
    by_domain: dict[str, list[str]] = {}
    for definition in partitioned:
        assert definition.partition_def is not None
        by_domain.setdefault(definition.partition_def.domain, []).append(definition.name)
    if len(by_domain) > 1:
        parts = "; ".join(f"{domain}: {', '.join(names)}" for domain, names in by_domain.items())
        raise PlanningError(
            f"the selected assets span {len(by_domain)} partition domains ({parts}); "
            "a run selects keys of exactly one domain, so select targets of one domain"
        )
    return next(iter(by_domain))


def _check_one_key_contract(partitioned: list[AssetDefinition], domain: str) -> None:
    """Every definition of the domain keys it as the first does, or planning fails naming both assets.

    A consumer receives its upstream's output for the same key; if one
    definition made a ``datetime.date`` of the text the other keeps as text,
    the run would pair keys of two different meanings.
    """
    first = partitioned[0]
    assert first.partition_def is not None
    contract = first.partition_def.key_contract()
    for other in partitioned[1:]:
        assert other.partition_def is not None
        if other.partition_def is first.partition_def or _same_contract(other.partition_def.key_contract(), contract):
            continue
        raise PlanningError(
            f"assets {first.name!r} ({type(first.partition_def).__name__}) and {other.name!r} "
            f"({type(other.partition_def).__name__}) share partition domain {domain} but key it differently "
            "(another definition class or key setting); definitions of one domain must normalize keys alike: "
            "use the same definition for both, or give the other definition its own domain"
        )


def _same_contract(left: object, right: object) -> bool:
    try:
        return bool(left == right)
    except Exception:  # noqa: BLE001 - a setting that cannot be compared is not known to key alike
        return False


def _normalizer(definition: PartitionDef, source: KeySource) -> tuple[Callable[[Any], Any], str]:
    if source is KeySource.TEXT:
        return definition.parse_key, "parse_key"
    return definition.normalize_key, "normalize_key"


def _storable(definition: PartitionDef, key: Any) -> Any:
    """``key`` unless its canonical text cannot be stored (its outlet event carries that text)."""
    if not definition.storable_key_text:
        check_key_text(apply_key_rule(definition, definition.format_key, key, "format_key"))
    return key


def _normalized_keys(
    owner: AssetDefinition, raw_keys: tuple[Any, ...], source: KeySource, fields: SelectionFields = CONFIG_FIELDS
) -> tuple[Any, ...]:
    definition = owner.partition_def
    assert definition is not None
    normalize, method = _normalizer(definition, source)
    identity = definition.key_identity
    seen: set[Hashable] = set()
    keys: list[Any] = []
    for index, raw in enumerate(raw_keys):
        try:
            key = _storable(definition, apply_key_rule(definition, normalize, raw, method))
            key_id = apply_key_rule(definition, identity, key, "key_identity")
        except ValueError as exc:
            raise SelectionError(
                f"{fields.key(index)} is rejected by asset {owner.name!r} ({definition.domain}): {exc}"
            ) from None
        if key_id not in seen:
            seen.add(key_id)
            keys.append(key)
    return tuple(keys)


def _range_keys(
    owner: AssetDefinition, bounds: tuple[Any, Any], source: KeySource, fields: SelectionFields
) -> tuple[Any, ...]:
    definition = owner.partition_def
    assert definition is not None
    if not definition.supports_range:
        raise SelectionError(
            f"{fields.range} is not supported by asset {owner.name!r} ({definition.kind} definition, "
            f"domain {definition.domain}); select keys with {fields.keys}"
        )
    try:
        if source is KeySource.TEXT:
            bounds = (_range_bound(definition, bounds[0], "start"), _range_bound(definition, bounds[1], "end"))
        keys = apply_key_rule(definition, lambda pair: tuple(definition.range(*pair)), bounds, "range")
    except ValueError as exc:
        raise SelectionError(f"{fields.range} is rejected by asset {owner.name!r} ({definition.domain}): {exc}") from None
    if type(definition).__module__.startswith("partita."):
        return keys  # partita's own ranges are normalized and distinct: 100,000 keys need no second pass
    # A definition's range must already be normalized; this keeps a custom
    # one honest and drops duplicates it may produce.
    return _normalized_keys(owner, keys, KeySource.PYTHON)


def _range_bound(definition: PartitionDef, text: Any, end: str) -> Any:
    try:
        if isinstance(text, str):
            check_key_text(text)
        return apply_key_rule(definition, definition.parse_key, text, "parse_key")
    except ValueError as exc:
        raise ValueError(f"its {end} is invalid: {exc}") from None


def _check_accepted(owner: AssetDefinition, keys: tuple[Any, ...]) -> None:
    definition = owner.partition_def
    assert definition is not None
    for index, key in enumerate(keys):
        try:
            _storable(definition, apply_key_rule(definition, definition.normalize_key, key, "normalize_key"))
        except ValueError as exc:
            raise SelectionError(
                f"selected partition key #{index} is rejected by asset {owner.name!r} ({definition.domain}): {exc}"
            ) from None
