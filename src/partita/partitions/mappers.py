"""Partition mappers: which downstream keys an upstream event concerns, and what each needs.

A mapper answers two questions in canonical key text, so every decision
round-trips through the definitions' own text:

- ``downstream_keys(upstream_key)``: the consumer keys an upstream event may
  complete (identity: the same key; a daily roll-up of hours: that day);
- ``requirement(downstream_key)``: the upstream keys that must all have an
  event before the consumer runs (or at least ``minimum`` of them).

Roll-ups list every upstream key in their window (hours walked in UTC and
seen in the definition's time zone, so a daylight-saving day has 23 or 25),
then keep those within the upstream definition's bounds: a window that
starts before the definition still needs only the keys that can exist.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef
from partita.partitions.cron import CronPartitionDef
from partita.partitions.multi import MultiPartitionDef, MultiPartitionKey
from partita.partitions.time import (
    DatePartitionDef,
    HourlyPartitionDef,
    MonthlyPartitionDef,
    WeeklyPartitionDef,
    zone_named,
)

__all__ = [
    "CADENCE",
    "AllowedKeysMapper",
    "DimensionMapper",
    "FixedKeyMapper",
    "IdentityMapper",
    "PartitionMapper",
    "ProductMapper",
    "Requirement",
    "RollupMapper",
]


@dataclass(frozen=True, slots=True)
class Requirement:
    """Upstream keys a downstream key needs; ``minimum`` of them (all when None)."""

    keys: tuple[str, ...]
    minimum: int | None = None
    #: How many of ``keys`` may be missing (at least one must be present); exclusive with ``minimum``.
    max_missing: int | None = None

    def needed(self) -> int:
        """How many of ``keys`` must have an event: every one, ``minimum`` of them, or all but ``max_missing``."""
        if self.max_missing is not None:
            return max(len(self.keys) - self.max_missing, 1 if self.keys else 0)
        return len(self.keys) if self.minimum is None else min(self.minimum, len(self.keys))

    def present_count(self, present: Collection[str]) -> int:
        return sum(1 for key in self.keys if key in present)

    def satisfied_by(self, present: Collection[str]) -> bool:
        return self.satisfied_with(self.present_count(present))

    def satisfied_with(self, have: int) -> bool:
        """Whether ``have`` of ``keys`` having an event is enough."""
        needed = self.needed()
        return have >= needed and (needed > 0 or not self.keys)


class PartitionMapper:
    """Base class: subclasses map canonical key text between two definitions."""

    #: True when every consumer key needs at most one upstream key. Inside a run
    #: the consumer's body then receives that key's output itself (None when the
    #: key needs none); otherwise a `PartitionedOutputs` of the keys it needs.
    one_upstream_key: bool = False

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        raise NotImplementedError

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__

    def fit_error(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> str | None:
        """Why this mapper cannot pair the two definitions at all (None: it can); a plan checks it once per edge."""
        return None

    def fitted(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[PartitionDef, PartitionDef]:
        """Both definitions, or the ValueError `fit_error` names (for mappers whose every answer needs a fit)."""
        problem = self.fit_error(upstream, downstream)
        if problem is not None:
            raise ValueError(problem)
        assert upstream is not None and downstream is not None
        return upstream, downstream


def _canonical(definition: PartitionDef | None, text: str) -> str:
    """Round-trip text through a definition (raises ValueError when it rejects the key)."""
    if definition is None:
        raise ValueError("the consumer is not partitioned; map to it with FixedKeyMapper")
    return definition.format_key(definition.parse_key(text))


class IdentityMapper(PartitionMapper):
    """Upstream key k completes downstream key k (same canonical text)."""

    one_upstream_key = True

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        return (_canonical(downstream, upstream_key),)

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        # A downstream key is canonical for its own definition: one shared by both sides needs no second round trip.
        key = downstream_key if upstream is None or upstream is downstream else _canonical(upstream, downstream_key)
        return Requirement((key,))


_PERIODS = ("hour", "day", "week", "month", "quarter", "year")


def _next_month(first: dt.date) -> dt.date:
    """The 1st of the month after ``first`` (the 1st of a month)."""
    return first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)


def window_of(period: str, moment: dt.datetime | dt.date, week_start: int) -> tuple[dt.date | dt.datetime, dt.date | dt.datetime]:
    """[start, next start) of the calendar window containing ``moment`` (local wall time)."""
    if period == "hour":
        assert isinstance(moment, dt.datetime)
        start_hour = moment.replace(minute=0, second=0, microsecond=0)
        # An hour later in elapsed time: wall-clock arithmetic would span both occurrences of a repeated hour.
        return start_hour, (start_hour.astimezone(dt.UTC) + dt.timedelta(hours=1)).astimezone(start_hour.tzinfo)
    day = moment.date() if isinstance(moment, dt.datetime) else moment
    if period == "day":
        return day, day + dt.timedelta(days=1)
    if period == "week":
        start = day - dt.timedelta(days=(day.weekday() - week_start) % 7)
        return start, start + dt.timedelta(days=7)
    if period == "month":
        start = day.replace(day=1)
        return start, _next_month(start)
    if period == "quarter":
        start = day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
        month = start.month + 3
        return start, start.replace(year=start.year + (month > 12), month=(month - 1) % 12 + 1)
    start = day.replace(month=1, day=1)
    return start, start.replace(year=start.year + 1)


class RollupMapper(PartitionMapper):
    """Many upstream time keys roll up into the window that contains them.

    ``period`` is hour, day, week, month, quarter or year. The downstream
    key is the window's start in the downstream definition (a day for
    `DatePartitionDef`, the 1st for `MonthlyPartitionDef`, the hour for
    `HourlyPartitionDef`, the first day for `WeeklyPartitionDef`, the tick
    for `CronPartitionDef`); the upstream keys are every key of the upstream
    definition inside the window, so a daylight-saving day has 23 or 25
    hours (and a week belongs to the window its first day falls in). ``minimum`` runs the consumer once that many are present;
    ``max_missing`` once all but that many are (at least one). ``week_start`` is 0 for Monday. ``timezone``
    draws the windows in another zone than an hourly or cron upstream's own (UTC hours into Berlin days).
    """

    def __init__(
        self,
        period: str,
        *,
        minimum: int | None = None,
        max_missing: int | None = None,
        week_start: int = 0,
        timezone: str | None = None,
    ) -> None:
        if period not in _PERIODS:
            raise DefinitionError(f"RollupMapper period must be one of {', '.join(_PERIODS)}")
        if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1):
            raise DefinitionError("RollupMapper minimum must be a positive integer")
        if max_missing is not None and (isinstance(max_missing, bool) or not isinstance(max_missing, int) or max_missing < 0):
            raise DefinitionError("RollupMapper max_missing must be a whole number, 0 or more")
        if minimum is not None and max_missing is not None:
            raise DefinitionError("RollupMapper takes minimum or max_missing, not both")
        if isinstance(week_start, bool) or not isinstance(week_start, int) or not 0 <= week_start <= 6:
            raise DefinitionError("RollupMapper week_start must be 0 (Monday) to 6 (Sunday)")
        self.zone = None if timezone is None else zone_named(timezone, owner="RollupMapper")
        self.period, self.minimum, self.max_missing, self.week_start = period, minimum, max_missing, week_start
        self.timezone = timezone

    def describe(self) -> str:
        extra = "" if self.minimum is None else f", minimum={self.minimum}"
        extra += "" if self.max_missing is None else f", max_missing={self.max_missing}"
        extra += "" if self.timezone is None else f", timezone={self.timezone!r}"
        return f"RollupMapper({self.period!r}{extra})"

    def fit_error(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> str | None:
        up, down = CADENCE.get(type(upstream)), CADENCE.get(type(downstream))  # type: ignore[arg-type]
        period = _PERIODS.index(self.period) + 1
        if up is not None and up > period:
            return (
                f"a roll-up into {self.period} windows gathers keys no coarser than one {self.period}, "
                f"and {type(upstream).__name__} keys are coarser"
            )
        if down is not None and down != period:
            return f"the consumer's keys must be the {self.period} windows themselves, and {type(downstream).__name__} keys are not"
        if self.zone is not None and not isinstance(upstream, HourlyPartitionDef | CronPartitionDef):
            return "a roll-up in another time zone needs an hourly or cron upstream (dates have no time of day)"
        return None

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        if upstream is None or downstream is None:
            raise ValueError("a roll-up maps between two time partition definitions")
        start, _ = window_of(self.period, self._seen_in_zone(upstream.parse_key(upstream_key)), self.week_start)
        return (downstream.format_key(self._downstream_key(downstream, start)),)

    def _seen_in_zone(self, moment: Any) -> Any:
        """A parsed key as the windows see it: hours in the roll-up's zone when it has one; dates stay dates."""
        return moment.astimezone(self.zone) if self.zone is not None and isinstance(moment, dt.datetime) else moment

    def _downstream_key(self, downstream: PartitionDef, start: dt.date | dt.datetime) -> Any:
        if isinstance(downstream, HourlyPartitionDef):
            if not isinstance(start, dt.datetime):
                raise ValueError("an hourly consumer needs an hourly roll-up window")
            return downstream.normalize_key(start)
        if isinstance(downstream, CronPartitionDef):
            moment = start if isinstance(start, dt.datetime) else _local_midnight(start, ZoneInfo(downstream.timezone))
            return downstream.normalize_key(moment)
        day = start.date() if isinstance(start, dt.datetime) else start
        if isinstance(downstream, MonthlyPartitionDef):
            return downstream.normalize_key(day.replace(day=1))
        return downstream.normalize_key(day)

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        if upstream is None or downstream is None:
            raise ValueError("a roll-up maps between two time partition definitions")
        start, end = window_of(self.period, self._seen_in_zone(downstream.parse_key(downstream_key)), self.week_start)
        keys = candidates_in(upstream, start, end, self.zone)
        return Requirement(tuple(upstream.format_key(key) for key in keys), self.minimum, self.max_missing)


#: How coarse each time definition's keys are (the roll-up periods count from 1 in the same order).
CADENCE = {HourlyPartitionDef: 1, DatePartitionDef: 2, WeeklyPartitionDef: 3, MonthlyPartitionDef: 4}


def candidates_in(definition: PartitionDef, start: Any, end: Any, zone: Any = None) -> tuple[Any, ...]:
    """Every key of ``definition`` in [start, end), enumerated without its bounds, then filtered by them.

    A window given as dates starts at local midnight in ``zone`` (default:
    the definition's own time zone).
    """
    keys = []
    for candidate in _candidates(definition, start, end, zone):
        try:
            keys.append(definition.normalize_key(candidate))
        except ValueError:
            continue  # outside the definition's bounds: no event can ever exist for it
    return tuple(keys)


def _candidates(upstream: PartitionDef, start: Any, end: Any, zone: Any = None) -> list[Any]:
    """The keys of ``upstream`` in the window [start, end), ignoring its bounds."""
    if isinstance(upstream, HourlyPartitionDef | CronPartitionDef):
        own = _zone(upstream.timezone)
        window_zone = own if zone is None else zone
        first = _local_midnight(start, window_zone) if not isinstance(start, dt.datetime) else start
        after = _local_midnight(end, window_zone) if not isinstance(end, dt.datetime) else end
        if isinstance(upstream, CronPartitionDef):
            return list(upstream.ticks_between(first, after))
        return _whole_hours(first.astimezone(dt.UTC), after.astimezone(dt.UTC), own)
    day = start.date() if isinstance(start, dt.datetime) else start
    end_day = end.date() if isinstance(end, dt.datetime) else end
    if isinstance(upstream, MonthlyPartitionDef):
        candidates, month = [], day.replace(day=1)
        while month < end_day:
            candidates.append(month)
            month = _next_month(month)
        return candidates
    if isinstance(upstream, WeeklyPartitionDef):
        first_day = day + dt.timedelta(days=(upstream.weekday - day.weekday()) % 7)
        count = max(0, ((end_day - first_day).days + 6) // 7)  # the weeks whose first day lies in the window
        return [first_day + dt.timedelta(weeks=weeks) for weeks in range(count)]
    if isinstance(upstream, DatePartitionDef):
        return [day + dt.timedelta(days=offset) for offset in range((end_day - day).days)]
    raise ValueError("a roll-up's upstream must be an hourly, cron, daily, weekly or monthly definition")


def _whole_hours(current: dt.datetime, stop: dt.datetime, zone: ZoneInfo) -> list[Any]:
    """The instants in [current, stop) where ``zone``'s wall clock shows a whole hour, as local times.

    An hour apart while the offset holds; when it changes by less than an
    hour (Lord Howe's 30 minutes), the next whole hour is that much closer.
    Offsets are whole quarter hours, so this visits the same instants as a
    walk in quarter hours would, about four times faster.
    """
    hours: list[Any] = []
    hour = dt.timedelta(hours=1)
    while current < stop:
        local = current.astimezone(zone)
        if local.minute == 0:
            hours.append(local)
            current += hour
        else:
            current += dt.timedelta(minutes=60 - local.minute)
    return hours


@functools.lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _local_midnight(day: dt.date, zone: Any) -> dt.datetime:
    """The first instant of ``day`` in ``zone`` (a zone may skip midnight itself)."""
    moment = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
    round_trip = moment.astimezone(dt.UTC).astimezone(zone)
    return round_trip if round_trip.date() == day else moment + dt.timedelta(hours=1)


class AllowedKeysMapper(PartitionMapper):
    """Only upstream keys in ``allowed`` (a collection or a predicate) reach the consumer; then ``inner``."""

    def __init__(self, allowed: Collection[str] | Callable[[str], bool], inner: PartitionMapper | None = None) -> None:
        if not callable(allowed) and (isinstance(allowed, (str, bytes)) or not isinstance(allowed, Collection)):
            raise DefinitionError("AllowedKeysMapper allowed must be a collection of keys or a predicate")
        self._allowed = allowed if callable(allowed) else frozenset(allowed)
        self._inner = inner or IdentityMapper()

    def _accepts(self, key: str) -> bool:
        allowed = self._allowed
        return bool(allowed(key)) if callable(allowed) else key in allowed  # type: ignore[operator]

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        if not self._accepts(upstream_key):
            return ()
        return self._inner.downstream_keys(upstream_key, upstream, downstream)

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        needed = self._inner.requirement(downstream_key, upstream, downstream)
        return Requirement(tuple(key for key in needed.keys if self._accepts(key)), needed.minimum)


class FixedKeyMapper(PartitionMapper):
    """Every upstream event concerns one fixed consumer key (or the unpartitioned consumer: ``key=None``)."""

    def __init__(self, key: str | None = None) -> None:
        if key is not None and (not isinstance(key, str) or not key):
            raise DefinitionError("FixedKeyMapper key must be a non-empty string or None")
        self.key = key

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        if self.key is None:
            return ("",)
        return (_canonical(downstream, self.key),)

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        return Requirement((), None)  # any event of the upstream asset


class ProductMapper(PartitionMapper):
    """Multi-partition keys: one mapper per dimension (identity for dimensions not named)."""

    def __init__(self, dimensions: Mapping[str, PartitionMapper]) -> None:
        if not isinstance(dimensions, Mapping) or not dimensions:
            raise DefinitionError("ProductMapper needs a mapping of dimension name to mapper")
        for name, mapper in dimensions.items():
            if not isinstance(mapper, PartitionMapper):
                raise DefinitionError(f"ProductMapper dimension {name!r} must be a PartitionMapper")
        self._dimensions = dict(dimensions)

    def _defs(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[MultiPartitionDef, MultiPartitionDef]:
        if not isinstance(upstream, MultiPartitionDef) or not isinstance(downstream, MultiPartitionDef):
            raise ValueError("ProductMapper maps between two MultiPartitionDef definitions")
        if list(upstream.dimensions) != list(downstream.dimensions):
            raise ValueError("ProductMapper needs the same dimensions upstream and downstream")
        return upstream, downstream

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        up, down = self._defs(upstream, downstream)
        key: MultiPartitionKey = up.parse_key(upstream_key)
        per_dimension: list[tuple[str, ...]] = []
        for name, definition in up.dimensions.items():
            mapper = self._dimensions.get(name, IdentityMapper())
            text = definition.format_key(key[name])
            per_dimension.append(mapper.downstream_keys(text, definition, down.dimensions[name]))
        return tuple("|".join(parts) for parts in itertools.product(*per_dimension))

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        up, down = self._defs(upstream, downstream)
        key: MultiPartitionKey = down.parse_key(downstream_key)
        per_dimension: list[tuple[str, ...]] = []
        minimum = None
        for name, definition in down.dimensions.items():
            mapper = self._dimensions.get(name, IdentityMapper())
            needed = mapper.requirement(definition.format_key(key[name]), up.dimensions[name], definition)
            per_dimension.append(needed.keys)
            minimum = needed.minimum if needed.minimum is not None else minimum
        return Requirement(tuple("|".join(parts) for parts in itertools.product(*per_dimension)), minimum)


class DimensionMapper(PartitionMapper):
    """A product-partitioned upstream read by a consumer keyed like one of its dimensions.

    ``DimensionMapper("date")`` between ``MultiPartitionDef({"date": days,
    "segment": segments})`` and a daily consumer: day D needs every
    ``D|segment`` key, one per declared segment, so the consumer waits for
    all segments of its day. ``inner`` maps the named dimension first (a
    ``RollupMapper("day")`` when that dimension is hourly). Every other
    dimension must be static: its keys are the ones a day waits for.
    """

    def __init__(self, dimension: str, inner: PartitionMapper | None = None) -> None:
        if not isinstance(dimension, str) or not dimension:
            raise DefinitionError("DimensionMapper dimension must be the name of a MultiPartitionDef dimension")
        if inner is not None and not isinstance(inner, PartitionMapper):
            raise DefinitionError("DimensionMapper inner must be a PartitionMapper")
        self.dimension, self._inner = dimension, inner or IdentityMapper()

    def describe(self) -> str:
        inner = "" if isinstance(self._inner, IdentityMapper) else f", {self._inner.describe()}"
        return f"DimensionMapper({self.dimension!r}{inner})"

    def fit_error(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> str | None:
        if not isinstance(upstream, MultiPartitionDef) or self.dimension not in upstream.dimensions:
            return f"the upstream must be a MultiPartitionDef with a dimension {self.dimension!r}"
        for name, definition in upstream.dimensions.items():
            if name != self.dimension and not hasattr(definition, "keys"):
                return f"every other dimension must be static, and {name!r} is not: its keys cannot be listed"
        return self._inner.fit_error(upstream.dimensions[self.dimension], downstream)

    def _upstream(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> MultiPartitionDef:
        up, _ = self.fitted(upstream, downstream)
        assert isinstance(up, MultiPartitionDef)
        return up

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        up = self._upstream(upstream, downstream)
        needed = self._inner.requirement(downstream_key, up.dimensions[self.dimension], downstream)
        per_dimension = [
            needed.keys if name == self.dimension else definition.keys  # type: ignore[attr-defined]
            for name, definition in up.dimensions.items()
        ]
        return Requirement(tuple("|".join(parts) for parts in itertools.product(*per_dimension)), needed.minimum, needed.max_missing)

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        up = self._upstream(upstream, downstream)
        key: MultiPartitionKey = up.parse_key(upstream_key)
        definition = up.dimensions[self.dimension]
        return self._inner.downstream_keys(definition.format_key(key[self.dimension]), definition, downstream)
