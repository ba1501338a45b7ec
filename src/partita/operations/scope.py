"""Which keys a partition status covers: always a bounded, known set, never a scan of history.

A selection (keys or a bounded range, as plan and run take them) is parsed
by the asset's own definition. Without one, each kind of definition has a
bounded default: a window of recent time ending now for dates, weeks, hours
and months, the latest ticks of a cron definition; every declared key of a static definition (or of a product of
static ones); the active keys of a runtime domain's registry. Anything else
needs a selection.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from partita.definitions.assets import AssetDefinition
from partita.definitions.config import RunConfig
from partita.errors import ConfigurationError, SelectionError
from partita.partitions.base import PartitionDef
from partita.partitions.cron import CronPartitionDef
from partita.partitions.multi import MultiPartitionDef
from partita.partitions.runtime import PartitionAtRuntime
from partita.partitions.static import StaticPartitionDef
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef
from partita.planning.selection import CONFIG_FIELDS, KeySource, SelectionFields, select_partitions
from partita.store.protocol import PartitionRegistry

__all__ = [
    "DEFAULT_DAYS", "DEFAULT_HOURS", "DEFAULT_MONTHS", "DEFAULT_TICKS", "DEFAULT_WEEKS", "MAX_STATUS_KEYS", "ScopeKind", "StatusScope", "range_size", "status_scope",
]

#: The default windows ending now (no selection given): sized to one screen of grid.
DEFAULT_DAYS = 30
DEFAULT_HOURS = 7 * 24
DEFAULT_MONTHS = 24
DEFAULT_WEEKS = 26
DEFAULT_TICKS = 7 * 24
#: A status reads at most this many keys per asset: a larger range is refused before it is expanded.
MAX_STATUS_KEYS = 1_000_000


class ScopeKind(enum.Enum):
    """Where the keys of a status came from."""

    KEYS = "keys"  # --partition-key / partition_keys
    RANGE = "range"  # --partition-range / partition_range
    WINDOW = "window"  # no selection: a recent window ending now
    DECLARED = "declared"  # no selection: every declared key
    REGISTRY = "registry"  # no selection: the active keys of a runtime domain
    UNPARTITIONED = "unpartitioned"  # the one "key" of an unpartitioned asset


@dataclass(frozen=True, slots=True)
class StatusScope:
    """The keys a status covers (canonical text, in key order) and how they were chosen, in words."""

    kind: ScopeKind
    description: str
    keys: tuple[str | None, ...]
    #: Registry keys left out because they are retired.
    retired: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The ``scope`` entry of the status documents."""
        return {"kind": self.kind.value, "description": self.description, "retired_keys": self.retired}


def range_size(definition: PartitionDef, start: Any, end: Any) -> int | None:
    """How many keys a built-in time range holds, computed before expanding it (None: unknown).

    For a cron definition it is an upper bound: ticks are counted only by walking them.
    """
    if isinstance(definition, DatePartitionDef):
        return int((end - start).days) + 1
    if isinstance(definition, WeeklyPartitionDef):
        return int((end - start).days) // 7 + 1
    if isinstance(definition, CronPartitionDef):
        return definition.range_size_at_most(start, end)
    if isinstance(definition, MonthlyPartitionDef):
        return (end.year - start.year) * 12 + end.month - start.month + 1
    if isinstance(definition, HourlyPartitionDef):
        return int((end - start).total_seconds() // 3600) + 1
    return None


def _check_range_size(definition: PartitionDef, bounds: tuple[Any, Any], source: KeySource, fields: SelectionFields) -> None:
    try:
        if source is KeySource.TEXT:
            start, end = definition.parse_key(bounds[0]), definition.parse_key(bounds[1])
        else:
            start, end = definition.normalize_key(bounds[0]), definition.normalize_key(bounds[1])
        size = range_size(definition, start, end)
    except (ValueError, TypeError, OverflowError):
        return  # selection diagnoses the bounds themselves, naming the field
    if size is not None and size > MAX_STATUS_KEYS:
        bound = "up to " if isinstance(definition, CronPartitionDef) else ""
        raise SelectionError(
            f"{fields.range} selects {bound}{size:,} keys; a partition status reads at most {MAX_STATUS_KEYS:,} keys "
            "per asset: narrow the range"
        )


def _selected(
    definition: AssetDefinition, config: RunConfig, source: KeySource, fields: SelectionFields
) -> StatusScope:
    partition_def = definition.partition_def
    assert partition_def is not None
    if config.empty_partitions:
        raise SelectionError(f"{fields.empty} selects no keys; a partition status needs {fields.keys} or {fields.range}")
    if config.partition_range is not None and partition_def.supports_range:
        _check_range_size(partition_def, config.partition_range, source, fields)
    selection = select_partitions((definition,), config, source, fields)
    formatted = tuple(map(partition_def.format_key, selection.keys))
    if config.partition_range is not None:
        return StatusScope(ScopeKind.RANGE, f"{fields.range} {formatted[0]} .. {formatted[-1]}", formatted)
    return StatusScope(ScopeKind.KEYS, f"{len(formatted)} selected key{'s' if len(formatted) != 1 else ''}", formatted)


def _window(partition_def: PartitionDef, now: dt.datetime) -> StatusScope | None:
    """The default window of a built-in time definition ending at ``now``, clipped to its start and end."""
    if isinstance(partition_def, HourlyPartitionDef):
        zone = ZoneInfo(partition_def.timezone)
        last: Any = now.astimezone(zone).replace(minute=0, second=0, microsecond=0)
        # Stepping back in UTC counts real hours across a clock change; wall-clock arithmetic would not.
        first: Any = (last.astimezone(dt.UTC) - dt.timedelta(hours=DEFAULT_HOURS - 1)).astimezone(zone)
        words = f"the last {DEFAULT_HOURS // 24} days of hours ending with the current hour"
    elif isinstance(partition_def, DatePartitionDef):
        last = now.astimezone(dt.UTC).date()
        first = last - dt.timedelta(days=DEFAULT_DAYS - 1)
        words = f"the last {DEFAULT_DAYS} days ending today (UTC)"
    elif isinstance(partition_def, WeeklyPartitionDef):
        today = now.astimezone(dt.UTC).date()
        last = today - dt.timedelta(days=(today.weekday() - partition_def.weekday) % 7)
        first = last - dt.timedelta(weeks=DEFAULT_WEEKS - 1)
        words = f"the last {DEFAULT_WEEKS} weeks ending with this week (UTC)"
    elif isinstance(partition_def, MonthlyPartitionDef):
        today = now.astimezone(dt.UTC).date()
        last = today.replace(day=1)
        index = last.year * 12 + last.month - 1 - (DEFAULT_MONTHS - 1)
        first = dt.date(index // 12, index % 12 + 1, 1)
        words = f"the last {DEFAULT_MONTHS} months ending with this month (UTC)"
    else:
        return None
    start, end = partition_def.start, partition_def.end
    # Dates compare as dates; aware hours compare as instants, whatever their zone.
    if end is not None and end < last:
        last, words = end, words + f", clipped to the definition's end {partition_def.format_key(end)}"
    if start is not None and start > first:
        first = start
        words += f", clipped to the definition's start {partition_def.format_key(start)}"
    if first > last:
        return StatusScope(ScopeKind.WINDOW, words + ": no key lies in it", ())
    keys = tuple(partition_def.format_key(key) for key in partition_def.range(first, last))
    return StatusScope(ScopeKind.WINDOW, f"{words} (no selection given)", keys)


def _latest_ticks(partition_def: CronPartitionDef, now: dt.datetime) -> StatusScope:
    """The latest ticks of a cron definition at or before ``now``, within its start and end."""
    until, words = now, f"the last {DEFAULT_TICKS} ticks up to now"
    end, start = partition_def.end, partition_def.start
    if end is not None and end.astimezone(dt.UTC) < now.astimezone(dt.UTC):
        until, words = end, words + f", clipped to the definition's end {partition_def.format_key(end)}"
    keys = partition_def.recent_keys(until, DEFAULT_TICKS)
    # Compared in UTC: datetimes of one zone compare by wall time, ignoring a repeated hour's fold.
    if start is not None and keys and keys[0].astimezone(dt.UTC) < start.astimezone(dt.UTC):
        keys = tuple(key for key in keys if key.astimezone(dt.UTC) >= start.astimezone(dt.UTC))
        words += f", clipped to the definition's start {partition_def.format_key(start)}"
    if not keys:
        return StatusScope(ScopeKind.WINDOW, words + ": no key lies in it", ())
    return StatusScope(ScopeKind.WINDOW, f"{words} (no selection given)", tuple(map(partition_def.format_key, keys)))


def _declared(partition_def: PartitionDef) -> StatusScope | None:
    if isinstance(partition_def, StaticPartitionDef):
        return StatusScope(ScopeKind.DECLARED, f"every declared key of {partition_def.domain}", partition_def.keys)
    if isinstance(partition_def, MultiPartitionDef) and partition_def.bounded:
        static = all(isinstance(dimension, StaticPartitionDef) for dimension in partition_def.dimensions.values())
        keys = tuple(map(partition_def.format_key, partition_def.all_keys()))
        if len(keys) > MAX_STATUS_KEYS:
            return None
        words = "every combination of the declared keys" if static else "every key of the product, each time dimension from its start to its end"
        return StatusScope(ScopeKind.DECLARED, words, keys)
    return None


def _registry(partition_def: PartitionAtRuntime, registry: PartitionRegistry) -> StatusScope:
    records = registry.list_partitions(partition_def.domain)
    active = tuple(record.key for record in records if not record.retired)
    retired = len(records) - len(active)
    words = f"the known keys of {partition_def.domain}" + (f" ({retired} retired left out)" if retired else "")
    return StatusScope(ScopeKind.REGISTRY, words, active, retired)


def status_scope(
    definition: AssetDefinition,
    config: RunConfig,
    registry: PartitionRegistry,
    now: dt.datetime,
    *,
    source: KeySource = KeySource.PYTHON,
    fields: SelectionFields = CONFIG_FIELDS,
) -> StatusScope:
    """The keys of ``definition`` a status covers: the selection, or the definition's bounded default.

    Raises SelectionError for a selection the definition rejects and for a
    definition without a bounded default when nothing is selected.
    """
    if config.max_concurrency is not None:
        raise ConfigurationError("max_concurrency does not apply to a partition status; leave it out")
    partition_def = definition.partition_def
    if partition_def is None:
        if config.selection_forms():
            forms = " and ".join(fields.form(name) for name in config.selection_forms())
            raise SelectionError(f"{forms} given, but asset {definition.name!r} is not partitioned; remove the selector")
        return StatusScope(ScopeKind.UNPARTITIONED, "unpartitioned: one outcome", (None,))
    if config.selection_forms():
        return _selected(definition, config, source, fields)
    if isinstance(partition_def, PartitionAtRuntime):
        return _registry(partition_def, registry)
    if isinstance(partition_def, CronPartitionDef):
        return _latest_ticks(partition_def, now)
    scope = _window(partition_def, now) or _declared(partition_def)
    if scope is None:
        raise SelectionError(
            f"asset {definition.name!r} ({partition_def.kind} definition, domain {partition_def.domain}) has no bounded "
            f"set of keys to report by default; select keys with {fields.keys}"
            + (f" or {fields.range}" if partition_def.supports_range else "")
        )
    return scope
