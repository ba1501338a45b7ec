"""Keys per asset for a run that spans partition domains through mappers (SPEC §17).

The selection names keys of one domain: the targets'. Every other asset's
keys follow from its consumers, walking the closure downstream first: an
unmapped consumer of the same domain needs the same keys, a mapped one needs
what its mapper's ``requirement`` lists for each of its keys. Each upstream
key is planned once however many consumers need it. Where an edge does not
pair key k with key k, it gets a `MappedEdge`: the upstream key positions
each consumer key needs, so the engine counts readiness per key without
mapping text at run time.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from partita.definitions.assets import AssetDefinition
from partita.errors import PlanningError
from partita.partitions.base import PartitionDef, apply_key_rule
from partita.partitions.mappers import IdentityMapper, PartitionMapper

__all__ = ["KeyPlan", "MappedEdge", "check_domains", "check_edges", "plan_mapped_keys", "spans_domains"]

_IDENTITY = IdentityMapper()


@dataclass(frozen=True, slots=True)
class MappedEdge:
    """How one consumer reads one upstream whose keys are not its own, key by key."""

    upstream: str
    mapper: PartitionMapper = field(repr=False)
    #: Per consumer key position: the upstream key positions it needs.
    needs: tuple[tuple[int, ...], ...] = field(repr=False)
    #: Per consumer key position: how many of them must succeed (None: every one).
    needed: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def one_key(self) -> bool:
        """The body receives the one upstream output itself, not a mapping."""
        return self.mapper.one_upstream_key

    @property
    def declared(self) -> bool:
        """False for an unmapped edge whose two sides plan different keys."""
        return self.mapper is not _IDENTITY


@dataclass(frozen=True, slots=True)
class KeyPlan:
    """Each partitioned asset's keys, and the mapped edges of each consumer."""

    keys: Mapping[str, tuple[Any, ...]]
    edges: Mapping[str, tuple[MappedEdge, ...]]


def spans_domains(closure: Sequence[AssetDefinition]) -> bool:
    """Whether any asset of the closure declares a mapper (the run may span domains)."""
    return any(definition.mappers for definition in closure)


def _domain(definition: AssetDefinition) -> str | None:
    return None if definition.partition_def is None else definition.partition_def.domain


def check_domains(closure: Sequence[AssetDefinition], targets: Sequence[str]) -> list[AssetDefinition]:
    """The partitioned assets whose keys the selection names; raises for edges no mapper bridges.

    The selection is made in the domain of the partitioned targets, or, when
    no target is partitioned, of the partitioned assets an unpartitioned
    asset gathers: it must be one domain.
    """
    by_name = check_edges(closure)
    seeded: dict[str, list[str]] = {}
    for definition in closure:
        domain = _domain(definition)
        if domain is not None and domain.startswith("runtime:"):
            raise PlanningError(
                f"asset {definition.name!r} is in runtime domain {domain}, and this run maps keys between domains; "
                "a run that spans domains through mappers cannot discover keys at run time yet"
            )
        for dep in definition.deps:
            upstream = by_name[dep]
            if definition.partition_def is None and upstream.partition_def is not None:
                seeded.setdefault(_domain(upstream), []).append(upstream.name)  # type: ignore[arg-type]
    for target in targets:
        definition = by_name[target]
        if definition.partition_def is not None:
            seeded.setdefault(_domain(definition), []).append(target)  # type: ignore[arg-type]
    if len(seeded) > 1:
        parts = "; ".join(f"{domain}: {', '.join(sorted(set(assets)))}" for domain, assets in seeded.items())
        raise PlanningError(
            f"the selection would name keys of {len(seeded)} partition domains ({parts}); a run selects keys of "
            "exactly one domain, so select targets of one domain (the others follow through mappers)"
        )
    domain = next(iter(seeded), None)
    return [definition for definition in closure if definition.partition_def is not None and _domain(definition) == domain]


def check_edges(closure: Sequence[AssetDefinition]) -> dict[str, AssetDefinition]:
    """Refuse an edge between two domains that no mapper bridges, and a mapper on an unpartitioned upstream."""
    by_name = {definition.name: definition for definition in closure}
    for definition in closure:
        for dep in definition.deps:
            mapper = definition.mappers.get(dep) if definition.mappers else None
            _check_edge(by_name[dep], definition, mapper)
    return by_name


def _check_edge(upstream: AssetDefinition, consumer: AssetDefinition, mapper: PartitionMapper | None) -> None:
    if mapper is not None and upstream.partition_def is None:
        raise PlanningError(
            f"asset {consumer.name!r} maps its dependency {upstream.name!r} with {mapper.describe()}, but "
            f"{upstream.name!r} is not partitioned; a mapper pairs the keys of two partitioned assets"
        )
    if mapper is None and upstream.partition_def is not None and consumer.partition_def is not None:
        if _domain(upstream) != _domain(consumer):
            raise PlanningError(
                f"asset {consumer.name!r} ({_domain(consumer)}) depends on {upstream.name!r} ({_domain(upstream)}) "
                "without a partition mapper; assets of two domains need one on their edge, e.g. "
                f"deps={{{upstream.name!r}: RollupMapper('day')}}"
            )


class _KeyPlanner:
    """The downstream-first walk; one instance per plan."""

    def __init__(self, closure: Sequence[AssetDefinition], selected: Sequence[AssetDefinition], keys: tuple[Any, ...], targets: Sequence[str]) -> None:
        self.closure = closure
        self.by_name = {definition.name: definition for definition in closure}
        self.selection_keys = keys
        self.seeds = {definition.name for definition in selected if definition.name in targets}
        self.consumers: dict[str, list[AssetDefinition]] = {}
        for definition in closure:
            for dep in definition.deps:
                self.consumers.setdefault(dep, []).append(definition)
                if definition.partition_def is None and self.by_name[dep].partition_def is not None:
                    self.seeds.add(dep)
        self.keys: dict[str, tuple[Any, ...]] = {}
        self.texts: dict[str, tuple[str, ...]] = {}
        #: (consumer, upstream) -> per consumer position: (needed texts, how many must succeed).
        self.needs: dict[tuple[str, str], list[tuple[tuple[str, ...], int]]] = {}

    def run(self) -> KeyPlan:
        for definition in reversed(self.closure):
            if definition.partition_def is not None:
                self.keys[definition.name] = self._keys_of(definition)
                if definition.self_mapper is not None:
                    self._require(definition, definition, definition.self_mapper)
        edges: dict[str, list[MappedEdge]] = {}
        for (consumer, upstream), needs in self.needs.items():
            edges.setdefault(consumer, []).append(self._edge(self.by_name[consumer], upstream, needs))
        return KeyPlan(self.keys, {name: tuple(found) for name, found in edges.items()})

    def _keys_of(self, definition: AssetDefinition) -> tuple[Any, ...]:
        parts: list[tuple[Any, ...]] = [self.selection_keys] if definition.name in self.seeds else []
        mapped: dict[str, None] = {}
        for consumer in self.consumers.get(definition.name, ()):
            if consumer.partition_def is None:
                continue
            mapper = consumer.mappers.get(definition.name) if consumer.mappers else None
            if mapper is None:
                parts.append(self.keys[consumer.name])
            else:
                mapped.update(dict.fromkeys(text for text in self._require(definition, consumer, mapper)))
        if mapped:
            parts.append(self._parse(definition, mapper_texts := tuple(mapped)))
            if len(parts) == 1:
                self.texts[definition.name] = mapper_texts
        if not parts:
            return ()  # no consumer key needs any (an empty selection)
        if all(part is parts[0] for part in parts):
            return parts[0]
        return _union(definition.partition_def, parts)  # type: ignore[arg-type]

    def _require(self, upstream: AssetDefinition, consumer: AssetDefinition, mapper: PartitionMapper) -> list[str]:
        """Every upstream key text the consumer's keys need; records them per consumer key."""
        up, down = upstream.partition_def, consumer.partition_def
        assert up is not None and down is not None
        fit = mapper.fit_error(up, down)
        if fit is not None:
            raise PlanningError(_mapper_error(upstream, consumer, mapper, fit))
        needs: list[tuple[tuple[str, ...], int]] = []
        wanted: list[str] = []
        format_key = down.format_key
        requirement = mapper.requirement
        width = getattr(mapper, "width", None) if upstream is not consumer else None
        for index, key in enumerate(self.keys[consumer.name]):
            try:
                needed = requirement(format_key(key), up, down)
            except ValueError as exc:
                raise PlanningError(_mapper_error(upstream, consumer, mapper, str(exc))) from None
            except Exception as exc:  # noqa: BLE001 - a custom mapper's fault is a planning error, never a traceback
                raise PlanningError(
                    _mapper_error(upstream, consumer, mapper, f"its requirement() raised {type(exc).__name__}")
                ) from None
            if width is not None and len(needed.keys) < width:
                raise PlanningError(
                    f"asset {consumer.name!r}: planned key #{index} needs keys of {upstream.name!r} through "
                    f"{mapper.describe()} that lie outside its definition's bounds (before its start or after its end); "
                    "select later keys, or move the upstream definition's start"
                )
            needs.append((needed.keys, needed.needed()))
            wanted.extend(needed.keys)
        self.needs[(consumer.name, upstream.name)] = needs
        return wanted

    def _parse(self, definition: AssetDefinition, texts: tuple[str, ...]) -> tuple[Any, ...]:
        partition_def = definition.partition_def
        assert partition_def is not None
        parse = partition_def.parse_key
        try:
            return tuple(parse(text) for text in texts)
        except ValueError as exc:
            raise PlanningError(
                f"asset {definition.name!r}: a mapper named a key its definition rejects ({exc}); "
                "the mapper does not fit this definition"
            ) from None

    def _edge(self, consumer: AssetDefinition, upstream: str, needs: list[tuple[tuple[str, ...], int]]) -> MappedEdge:
        texts = self.texts.get(upstream)
        if texts is None:
            partition_def = self.by_name[upstream].partition_def
            assert partition_def is not None
            texts = tuple(map(partition_def.format_key, self.keys[upstream]))
            self.texts[upstream] = texts
        position = {text: index for index, text in enumerate(texts)}
        mapper = consumer.mappers[upstream]
        if upstream == consumer.name:
            _check_own_keys(consumer, mapper, needs, position)
        positions = tuple(tuple(dict.fromkeys(position[text] for text in keys)) for keys, _ in needs)
        if upstream == consumer.name:
            _check_acyclic(consumer, mapper, positions)
        counts = tuple(count for _, count in needs)
        every = all(count >= len(keys) for count, keys in zip(counts, positions, strict=True))
        return MappedEdge(upstream, mapper, positions, None if every else counts)


def _check_own_keys(
    definition: AssetDefinition, mapper: PartitionMapper, needs: list[tuple[tuple[str, ...], int]], planned: Mapping[str, int]
) -> None:
    """A key's own earlier partitions must be planned too (the definition's first key needs none)."""
    for index, (keys, _) in enumerate(needs):
        if any(text not in planned for text in keys):
            raise PlanningError(
                f"asset {definition.name!r} reads its own earlier partitions ({mapper.describe()}), and planned key "
                f"#{index} needs one the run does not plan; select from the definition's start or from the first key "
                "whose earlier partitions are all selected (a run cannot read them from an earlier run)"
            )


def _check_acyclic(definition: AssetDefinition, mapper: PartitionMapper, needs: tuple[tuple[int, ...], ...]) -> None:
    """Keys that wait on each other through a self-dependency would never start."""
    waiting = [len(keys) for keys in needs]
    feeds: list[list[int]] = [[] for _ in needs]
    for consumer, keys in enumerate(needs):
        for upstream in keys:
            feeds[upstream].append(consumer)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    done = 0
    while ready:
        done += 1
        for consumer in feeds[ready.pop()]:
            waiting[consumer] -= 1
            if waiting[consumer] == 0:
                ready.append(consumer)
    if done < len(needs):
        raise PlanningError(
            f"asset {definition.name!r} depends on its own partitions through {mapper.describe()} in a cycle (a key "
            "needs itself or a later key that needs it); a self-dependency needs an offset to earlier keys, "
            "such as OffsetMapper(-1)"
        )


def identity_edges(closure: Sequence[AssetDefinition], plan: KeyPlan) -> dict[str, list[MappedEdge]]:
    """Unmapped same-domain edges whose two sides plan different keys: key k reads the upstream's key k."""
    found: dict[str, list[MappedEdge]] = {}
    by_name = {definition.name: definition for definition in closure}
    for definition in closure:
        if definition.partition_def is None:
            continue
        own = plan.keys[definition.name]
        for dep in definition.deps:
            if (definition.mappers and dep in definition.mappers) or dep not in plan.keys:
                continue
            theirs = plan.keys[dep]
            if theirs is own:
                continue
            upstream_def = by_name[dep].partition_def
            assert upstream_def is not None
            position = {_identity(upstream_def, key): index for index, key in enumerate(theirs)}
            needs = tuple((position[_identity(upstream_def, key)],) for key in own)
            found.setdefault(definition.name, []).append(MappedEdge(dep, _IDENTITY, needs))
    return found


def _identity(definition: PartitionDef, key: Any) -> Hashable:
    return apply_key_rule(definition, definition.key_identity, key, "key_identity")


def _union(definition: PartitionDef, parts: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """The keys of every part once, first occurrence first."""
    seen: dict[Hashable, Any] = {}
    for part in parts:
        for key in part:
            seen.setdefault(_identity(definition, key), key)
    return tuple(seen.values())


def plan_mapped_keys(
    closure: Sequence[AssetDefinition], selected: Sequence[AssetDefinition], keys: tuple[Any, ...], targets: Sequence[str]
) -> KeyPlan:
    planned = _KeyPlanner(closure, selected, keys, targets).run()
    edges = {name: list(found) for name, found in planned.edges.items()}
    for name, found in identity_edges(closure, planned).items():
        edges.setdefault(name, []).extend(found)
    return KeyPlan(planned.keys, {name: tuple(found) for name, found in edges.items()})


def _mapper_error(upstream: AssetDefinition, consumer: AssetDefinition, mapper: PartitionMapper, rule: str) -> str:
    return (
        f"asset {consumer.name!r} ({_domain(consumer)}) maps its dependency {upstream.name!r} ({_domain(upstream)}) "
        f"with {mapper.describe()}, which does not fit the two definitions: {rule}"
    )
