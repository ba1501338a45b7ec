"""The instants at which a five-field cron expression ticks in one time zone.

A tick is an instant whose local wall time in the zone matches the
expression: the rule `HourlyPartitionDef` follows for hours (its keys are
exactly the ticks of ``0 * * * *``). So on a daylight-saving day a wall time
that does not exist (the spring-forward gap) is no tick, and a wall time that
occurs twice (the fall-back repeat) is two ticks, one per occurrence.

croniter's arithmetic is exact on naive wall times, so the expression is
walked in wall time within each stretch of constant UTC offset, and each wall
time becomes one instant by that stretch's offset. zoneinfo does not expose
its transitions: the offset is probed every ``PROBE`` of elapsed time and a
change is bisected to the second (tz data has whole-second transitions).
Offsets that change and change back within ``PROBE`` would be missed; the
tz database's clock changes are weeks or months apart.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from zoneinfo import ZoneInfo

__all__ = ["PROBE", "expression_problem", "is_tick", "ticks_at_most", "ticks_from"]

_UTC = dt.UTC
_MINUTE = dt.timedelta(minutes=1)
#: Offsets are probed this often (in elapsed time) between two ticks.
PROBE = dt.timedelta(hours=6)


def _offset(zone: ZoneInfo, instant: dt.datetime) -> dt.timedelta:
    return instant.astimezone(zone).utcoffset() or dt.timedelta(0)


def _wall(instant: dt.datetime, offset: dt.timedelta) -> dt.datetime:
    """The naive wall time of a UTC ``instant`` at ``offset``."""
    return (instant + offset).replace(tzinfo=None)


def expression_problem(cron: str) -> str | None:
    """Why croniter cannot iterate ``cron`` (five fields, already split), or None when it can."""
    from croniter import CroniterBadDateError, CroniterError, croniter

    if not croniter.is_valid(cron):
        return "is not a valid cron expression (minute hour day month weekday)"
    try:
        croniter(cron, dt.datetime(2000, 1, 1)).get_next(dt.datetime)
    except CroniterBadDateError:
        return "never fires (no calendar date matches it)"
    except (CroniterError, ValueError, OverflowError):
        return "is not a valid cron expression (minute hour day month weekday)"
    return None


def ticks_at_most(cron: str, start: dt.datetime, end: dt.datetime) -> int:
    """An upper bound of the ticks in [``start``, ``end``], computed without walking them.

    Each local day holds at most (minutes x hours the expression names)
    wall times, each at most twice on a clock-change day (at most two a year
    in the tz database); ticks are at least a minute apart.
    """
    from croniter import croniter

    minute_field, hour_field = croniter(cron).expanded[:2]
    per_day = (60 if minute_field == ["*"] else len(minute_field)) * (24 if hour_field == ["*"] else len(hour_field))
    elapsed = end.astimezone(_UTC) - start.astimezone(_UTC)
    days = elapsed.days + 2
    return min(int(elapsed.total_seconds()) // 60 + 1, (days + 2 * (days // 365 + 1)) * per_day)


def _first_change(zone: ZoneInfo, after: dt.datetime, until: dt.datetime, offset: dt.timedelta) -> dt.datetime | None:
    """The first instant in (``after``, ``until``] whose offset is not ``offset``, or None."""
    low = after
    while low < until:
        high = until if until - low <= PROBE else low + PROBE
        if _offset(zone, high) != offset:
            return _bisect(zone, low, high, offset)
        low = high
    return None


def _bisect(zone: ZoneInfo, low: dt.datetime, high: dt.datetime, offset: dt.timedelta) -> dt.datetime:
    """The transition between ``low`` (at ``offset``) and ``high`` (not), to the second."""
    before, after = math.floor(low.timestamp()), math.ceil(high.timestamp())
    while after - before > 1:
        middle = (before + after) // 2
        if _offset(zone, dt.datetime.fromtimestamp(middle, _UTC)) == offset:
            before = middle
        else:
            after = middle
    return dt.datetime.fromtimestamp(after, _UTC)


def _walk(cron: str, wall: dt.datetime) -> Iterator[dt.datetime]:
    """The naive wall times at or after ``wall`` that match ``cron``, in order; ends at the calendar's end."""
    from croniter import CroniterBadDateError, croniter  # imported with the first key, not with partita
    try:
        walker = croniter(cron, wall - _MINUTE)
    except OverflowError:
        # The calendar's first minute: croniter cannot look before it (nor match it), so it is never a tick.
        walker = croniter(cron, wall)
    while True:
        try:
            candidate = walker.get_next(dt.datetime)
        except (CroniterBadDateError, OverflowError, ValueError):
            return
        if candidate >= wall:
            yield candidate


def ticks_from(cron: str, zone: ZoneInfo, start: dt.datetime) -> Iterator[dt.datetime]:
    """Every tick at or after the aware ``start``, oldest first, as UTC instants; ends at the calendar's end."""
    current = start.astimezone(_UTC)
    while True:
        offset = _offset(zone, current)
        checked = current  # the offset is known to be constant on [current, checked]
        restart = None
        for wall in _walk(cron, _wall(current, offset)):
            try:
                instant = (wall - offset).replace(tzinfo=_UTC)
            except OverflowError:
                return
            if instant > checked:
                restart = _first_change(zone, checked, instant, offset)
                if restart is not None:
                    break
                checked = instant
            yield instant
        if restart is None:
            return
        current = restart


def is_tick(cron: str, zone: ZoneInfo, instant: dt.datetime) -> bool:
    """Whether the aware ``instant`` is a tick: its wall time in ``zone`` matches ``cron``, to the minute.

    Asked of the same walk `ticks_from` takes, so a key and a range never disagree.
    """
    local = instant.astimezone(zone)
    if (local.second, local.microsecond) != (0, 0):
        return False
    wall = local.replace(tzinfo=None, fold=0)
    return next(_walk(cron, wall), None) == wall
