"""Cron ticks as real instants, and the consumer partition each tick schedules (SPEC §12).

A cron expression speaks of wall-clock times in one zone, but a schedule must
be counted in elapsed time: on a daylight-saving day some wall times do not
exist and others occur twice. So the expression is iterated over naive wall
times (where croniter's arithmetic is exact), and every wall time is mapped
to the instants at which it occurs:

- a wall time that occurs once is one tick;
- a wall time that does not exist (the spring-forward gap) is one tick at the
  first valid instant after it, the end of the gap; several gap times that
  land on that instant are one tick;
- a wall time that occurs twice (the fall-back repeat) is two ticks when the
  expression fires every hour (its hour field is ``*``), so that each elapsed
  hour is covered, and one tick, at its first occurrence, otherwise: a daily
  01:30 still runs once that day.

Ticks are compared and ordered in UTC: aware datetimes of one zone compare by
wall time and ignore ``fold``, which would merge the two copies of a
repeated hour.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from partita.errors import DefinitionError

__all__ = ["cron_ticks", "fires_after", "is_five_field_cron", "next_ticks", "scheduled_key", "tick_before"]

_UTC = dt.UTC
_EPSILON = dt.timedelta(microseconds=1)
_HALF_HOUR = dt.timedelta(minutes=30)
#: Hour starts are looked for this many half hours back: an hour lasts at most three (a two-hour shift).
_HOUR_START_PROBES = 7
_DAY = dt.timedelta(days=1)


def is_five_field_cron(cron: Any) -> bool:
    """A valid five-field expression (minute hour day-of-month month day-of-week), nothing else.

    croniter also accepts a leading seconds field and ``@hourly``-style
    aliases; the documented form is five fields, so those are refused rather
    than read in a way the user did not mean.
    """
    return isinstance(cron, str) and len(cron.split()) == 5 and bool(croniter.is_valid(cron))


def fires_after(cron: str, moment: dt.datetime) -> bool:
    """Whether a valid expression has any tick after ``moment`` (``0 0 31 2 *`` never has)."""
    try:
        croniter(cron, moment.replace(tzinfo=None)).get_next(dt.datetime)
    except CroniterBadDateError:
        return False
    return True


def cron_ticks(cron: str, zone: ZoneInfo, after: dt.datetime, until: dt.datetime) -> list[dt.datetime]:
    """The instants in (``after``, ``until``] at which ``cron`` ticks in ``zone``, oldest first, in ``zone``."""
    after_utc, until_utc = after.astimezone(_UTC), until.astimezone(_UTC)
    every_hour = croniter(cron).expanded[1] == ["*"]
    # A repeated wall time earlier than after's own can still have its second
    # occurrence after it: start the wall-time walk back by the zone's shift.
    start_wall = after_utc.astimezone(zone).replace(tzinfo=None, fold=0) - _offset_spread(zone, after_utc)
    walk = croniter(cron, start_wall)
    found: set[dt.datetime] = set()
    while True:
        wall = walk.get_next(dt.datetime)
        occurrences = _instants_of(wall, zone)
        if not every_hour:
            occurrences = occurrences[:1]
        # The first occurrence never decreases along the walk, so nothing later can be due.
        if occurrences[0] > until_utc:
            break
        found.update(instant for instant in occurrences if after_utc < instant <= until_utc)
    return [instant.astimezone(zone) for instant in sorted(found)]


def next_ticks(cron: str, zone: ZoneInfo, after: dt.datetime, count: int) -> list[dt.datetime]:
    """The first ``count`` ticks after ``after`` (fewer only when the expression fires that rarely).

    The window doubles from an hour: a minute schedule walks a few dozen
    ticks, one that fires once a leap year is found in some twenty steps, and
    the search gives up past 32 years.
    """
    window = dt.timedelta(hours=1)
    while True:
        found = cron_ticks(cron, zone, after, after + window)
        if len(found) >= count or window > dt.timedelta(days=366 * 32):
            return found[:count]
        window *= 2


def tick_before(cron: str, zone: ZoneInfo, moment: dt.datetime) -> dt.datetime | None:
    """The last tick at or before ``moment`` (None past 32 years back), searched like `next_ticks`."""
    window = dt.timedelta(hours=1)
    while window <= dt.timedelta(days=366 * 32):
        found = cron_ticks(cron, zone, moment - window, moment)
        if found:
            return found[-1]
        window *= 2
    return None


def _offset_spread(zone: ZoneInfo, around: dt.datetime) -> dt.timedelta:
    """How far the zone's UTC offset moves within a day of ``around`` (zero on ordinary days)."""
    offsets = [
        (around + step).astimezone(zone).utcoffset() or dt.timedelta(0) for step in (-_DAY, dt.timedelta(0), _DAY)
    ]
    return max(offsets) - min(offsets)


def _instants_of(wall: dt.datetime, zone: ZoneInfo) -> list[dt.datetime]:
    """The UTC instants at which the naive ``wall`` time occurs in ``zone``: one, or two when repeated.

    A wall time in a gap has none; it is given the first valid instant after
    it, where the gap ends.
    """
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return [first.astimezone(_UTC)]
    if _exists(first):
        return [first.astimezone(_UTC), second.astimezone(_UTC)]
    return [_gap_end(first, second, zone)]


def _exists(local: dt.datetime) -> bool:
    """Whether an aware wall time survives a round trip through UTC (it is not in a gap)."""
    return local.astimezone(_UTC).astimezone(local.tzinfo).replace(tzinfo=None) == local.replace(tzinfo=None, fold=0)


def _gap_end(first: dt.datetime, second: dt.datetime, zone: ZoneInfo) -> dt.datetime:
    """The instant a gap ends (its transition), found between the two readings of a wall time in it.

    In a gap, ``fold=1`` reads the wall time with the later offset, which
    lands before the transition, and ``fold=0`` with the earlier offset,
    which lands at or after it. zoneinfo does not expose transitions, so they
    are bisected to the second (tz data has whole-second transitions).
    """
    low = int(second.timestamp())
    high = int(first.timestamp())
    new_offset = dt.datetime.fromtimestamp(high, zone).utcoffset()
    while high - low > 1:
        middle = (low + high) // 2
        if dt.datetime.fromtimestamp(middle, zone).utcoffset() == new_offset:
            high = middle
        else:
            low = middle
    return dt.datetime.fromtimestamp(high, _UTC)


# -- the consumer partition of a tick ----------------------------------------------


def scheduled_key(consumer: Any, zone: ZoneInfo, tick: dt.datetime, previous: dt.datetime) -> str | None:
    """The consumer key ``tick`` schedules: the latest partition that has ended by the tick.

    A tick on a partition boundary schedules the partition that ends there
    (the tick at 10:00 runs the hour 09). A tick inside a partition (``*/15``
    with an hourly consumer) must not run a partition that is still under
    way, so it names the one before; that partition is scheduled only by the
    first tick after its end (``None`` for the others). Keys come from the
    real instant in the consumer's own zone (an hourly definition's zone,
    else the cron's), never from a wall time. An unpartitioned consumer runs
    once per tick, keyed by the tick.
    """
    if consumer is None:
        return tick.astimezone(zone).isoformat()
    boundary = _containing(consumer, zone, tick)[1]
    if boundary <= previous.astimezone(_UTC):
        return None  # the partition that ended there was scheduled by an earlier tick (or precedes start)
    key = _containing(consumer, zone, boundary - _EPSILON)[0]
    try:
        return str(consumer.format_key(consumer.normalize_key(key)))
    except ValueError:
        return None  # outside the definition's bounds: such a partition never runs


def _containing(consumer: Any, zone: ZoneInfo, instant: dt.datetime) -> tuple[Any, dt.datetime]:
    """The consumer partition that contains ``instant``, and the UTC instant it starts."""
    instant = instant.astimezone(_UTC)
    kind = consumer.kind
    if kind == "hourly":
        return _hour_containing(ZoneInfo(consumer.timezone), instant)
    local = instant.astimezone(zone).date()
    if kind == "date":
        return local, _day_start(local, zone)
    if kind == "monthly":
        first = local.replace(day=1)
        return first, _day_start(first, zone)
    if kind == "weekly":
        first = local - dt.timedelta(days=(local.weekday() - consumer.weekday) % 7)
        return first, _day_start(first, zone)
    if kind == "cron":
        latest = consumer.recent_keys(instant, 1)
        if latest:
            return latest[0], latest[0].astimezone(_UTC)
        raise DefinitionError("CronPartitions: the consumer's cron definition has no window within 32 years of a tick")
    raise DefinitionError(
        "CronPartitions needs a consumer partitioned by hours, days, weeks, months or cron windows "
        "(HourlyPartitionDef, DatePartitionDef, WeeklyPartitionDef, MonthlyPartitionDef, CronPartitionDef) "
        "or an unpartitioned one"
    )


def _hour_containing(zone: ZoneInfo, instant: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The wall-clock hour of ``zone`` that contains the UTC ``instant`` (fold-aware), and its start.

    An hour starts where the local minute is zero. Flooring the local time is
    exact on ordinary days; across a transition (a 30-minute shift, or a gap
    inside the hour) the floor may not exist, so a few earlier instants are
    floored too and the latest real hour start not after ``instant`` wins.
    """
    local = instant.astimezone(zone)
    if (instant - _HOUR_START_PROBES * _HALF_HOUR).astimezone(zone).utcoffset() == local.utcoffset():
        # No transition nearby (nearly always): the floor of the local time is the hour's start.
        start = local.replace(minute=0, second=0, microsecond=0)
        return start, start.astimezone(_UTC)
    best: tuple[dt.datetime, dt.datetime] | None = None
    for step in range(_HOUR_START_PROBES):
        local = (instant - step * _HALF_HOUR).astimezone(zone).replace(minute=0, second=0, microsecond=0)
        start = local.astimezone(_UTC)
        if start > instant or not _exists(local):
            continue
        if best is None or start > best[1]:
            best = (start.astimezone(zone), start)
    assert best is not None, "an hour start lies within three hours of every instant"
    return best


def _day_start(day: dt.date, zone: ZoneInfo) -> dt.datetime:
    """The first instant of a local calendar day (after the gap where midnight does not exist)."""
    return _instants_of(dt.datetime(day.year, day.month, day.day), zone)[0]
