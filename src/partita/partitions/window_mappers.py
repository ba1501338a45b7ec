"""Mappers that move along one time axis: offsets (lags and windows) and fan-out to finer keys.

`OffsetMapper` pairs two definitions of one cadence: key K needs the keys
from K+start_offset to K+end_offset (a running total: day D needs D-1).
`FanOutMapper` is the inverse of a roll-up: a finer consumer key needs the
one coarser upstream key whose window contains it (an hour needs its day),
and an upstream key concerns every consumer key in its window. Keys outside
a definition's bounds are dropped, as roll-ups drop them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from partita.errors import DefinitionError
from partita.partitions.base import PartitionDef
from partita.partitions.mappers import CADENCE, PartitionMapper, Requirement, candidates_in, window_of
from partita.partitions.time import DatePartitionDef, HourlyPartitionDef, MonthlyPartitionDef, WeeklyPartitionDef

__all__ = ["FanOutMapper", "OffsetMapper"]

_STEPPED = (HourlyPartitionDef, DatePartitionDef, WeeklyPartitionDef, MonthlyPartitionDef)


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionError(f"OffsetMapper {name} must be a whole number of keys")
    return value


def _shifted(definition: PartitionDef, key: Any, steps: int) -> Any:
    """The key ``steps`` keys after ``key`` (before, when negative), ignoring the definition's bounds."""
    if isinstance(definition, HourlyPartitionDef):
        # Elapsed hours: across a daylight-saving change the wall clock skips or repeats one.
        return (key.astimezone(dt.UTC) + dt.timedelta(hours=steps)).astimezone(key.tzinfo)
    if isinstance(definition, WeeklyPartitionDef):
        return key + dt.timedelta(weeks=steps)
    if isinstance(definition, MonthlyPartitionDef):
        months = key.year * 12 + key.month - 1 + steps
        return key.replace(year=months // 12, month=months % 12 + 1)
    return key + dt.timedelta(days=steps)


class OffsetMapper(PartitionMapper):
    """Key K needs the upstream keys K+start_offset .. K+end_offset of a definition of the same cadence.

    ``OffsetMapper(-1)`` is a lag of one key (yesterday, the previous hour,
    week or month); ``OffsetMapper(start_offset=-6, end_offset=0)`` is a
    trailing window of seven. Hourly offsets count elapsed hours, so they
    step over a skipped hour and through both occurrences of a repeated one.
    Under an asset's own name in ``deps`` it reads the asset's own earlier
    keys. Daily, hourly, weekly and monthly definitions.
    """

    def __init__(self, offset: int | None = None, *, start_offset: int | None = None, end_offset: int | None = None) -> None:
        if offset is not None and (start_offset is not None or end_offset is not None):
            raise DefinitionError("OffsetMapper takes an offset or start_offset and end_offset, not both")
        if offset is None and (start_offset is None or end_offset is None):
            raise DefinitionError("OffsetMapper needs an offset, or both start_offset and end_offset")
        start = _whole(offset if offset is not None else start_offset, "offset" if offset is not None else "start_offset")
        end = _whole(offset if offset is not None else end_offset, "offset" if offset is not None else "end_offset")
        if start > end:
            raise DefinitionError("OffsetMapper start_offset must not be after end_offset")
        self.start_offset, self.end_offset = start, end

    @property
    def one_upstream_key(self) -> bool:  # type: ignore[override]
        return self.start_offset == self.end_offset

    @property
    def width(self) -> int:
        """How many upstream keys each consumer key names before the bounds drop any."""
        return self.end_offset - self.start_offset + 1

    def describe(self) -> str:
        if self.one_upstream_key:
            return f"OffsetMapper({self.start_offset})"
        return f"OffsetMapper(start_offset={self.start_offset}, end_offset={self.end_offset})"

    def fit_error(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> str | None:
        if not isinstance(upstream, _STEPPED) or not isinstance(downstream, _STEPPED):
            return "an offset steps through daily, hourly, weekly or monthly keys"
        if type(upstream) is not type(downstream) or upstream.key_contract() != downstream.key_contract():
            return "an offset pairs two definitions of the same kind and settings (the same cadence)"
        return None

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        up, down = self.fitted(upstream, downstream)
        key = down.parse_key(downstream_key)
        return Requirement(_in_bounds(up, (_shifted(up, key, step) for step in range(self.start_offset, self.end_offset + 1))))

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        up, down = self.fitted(upstream, downstream)
        key = up.parse_key(upstream_key)
        return _in_bounds(down, (_shifted(down, key, -step) for step in range(self.end_offset, self.start_offset - 1, -1)))


def _in_bounds(definition: PartitionDef, candidates: Any) -> tuple[str, ...]:
    texts = []
    for candidate in candidates:
        try:
            texts.append(definition.format_key(definition.normalize_key(candidate)))
        except ValueError:
            continue  # outside the definition's bounds: it can never exist
    return tuple(texts)


#: The window one key of each coarser definition covers.
_PERIOD_OF = {DatePartitionDef: "day", WeeklyPartitionDef: "week", MonthlyPartitionDef: "month", HourlyPartitionDef: "hour"}


class FanOutMapper(PartitionMapper):
    """A finer consumer key needs the one coarser upstream key whose window contains it.

    An hour needs its day (the day in the consumer's time zone), a day its
    week or month; the other way, a day concerns its 23, 24 or 25 hours.
    The inverse of `RollupMapper`: an upstream key concerns every consumer
    key that a roll-up of the same period would gather back into it.
    """

    one_upstream_key = True

    def describe(self) -> str:
        return "FanOutMapper()"

    def fit_error(self, upstream: PartitionDef | None, downstream: PartitionDef | None) -> str | None:
        up = CADENCE.get(type(upstream))  # type: ignore[arg-type]
        down = CADENCE.get(type(downstream))  # type: ignore[arg-type]
        if up is None or (down is None and type(downstream).__name__ != "CronPartitionDef"):
            return "a fan-out maps a daily, weekly, monthly or hourly upstream to finer time keys"
        if down is not None and down >= up:
            return f"a fan-out's consumer keys must be finer than its upstream's, and {type(downstream).__name__} keys are not"
        return None

    def requirement(self, downstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> Requirement:
        up, down = self.fitted(upstream, downstream)
        moment = down.parse_key(downstream_key)
        if isinstance(up, HourlyPartitionDef):
            moment = moment.astimezone(ZoneInfo(up.timezone)) if isinstance(moment, dt.datetime) else moment
        start, _ = window_of(_PERIOD_OF[type(up)], moment, getattr(up, "weekday", 0))
        return Requirement(_in_bounds(up, (start,)))

    def downstream_keys(self, upstream_key: str, upstream: PartitionDef | None, downstream: PartitionDef | None) -> tuple[str, ...]:
        up, down = self.fitted(upstream, downstream)
        start, end = window_of(_PERIOD_OF[type(up)], up.parse_key(upstream_key), getattr(up, "weekday", 0))
        return tuple(down.format_key(key) for key in candidates_in(down, start, end))
