"""Time windows of a cron expression in one time zone: every tick starts a partition.

A key is the instant a window starts, an aware ``datetime`` in the
definition's zone; the window lasts until the next tick. Canonical text is
ISO 8601 to the minute with the UTC offset, ``2026-03-29T01:45+01:00``, so the
two occurrences of a repeated wall time on a fall-back day keep distinct text
and text sorts by wall time within an offset.

Daylight saving follows `HourlyPartitionDef`: a tick is an instant whose wall
time matches the expression (see `partita.partitions.cron_ticks`), so a wall
time skipped when clocks spring forward is no key (the window before it lasts
longer), and a wall time repeated when clocks fall back is two keys.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Hashable
from typing import Any, ClassVar

from partita.errors import DefinitionError
from partita.partitions.cron_ticks import expression_problem, is_tick, ticks_at_most, ticks_from
from partita.partitions.time import _BoundedTimeDef, zone_named

__all__ = ["CronPartitionDef"]

_UTC = dt.UTC
_TEXT = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2})([+-])([0-9]{2}):([0-9]{2})")
_SEARCH_LIMIT = dt.timedelta(days=366 * 32)
_OUT_OF_CALENDAR = "cron partition key lies outside the calendar datetime can represent (years 1 to 9999, in UTC too)"
#: croniter's hashed (H) and random (R) values are not the same on every machine: no stable key space.
_UNSTABLE_ITEM = re.compile(r"(?:^|,)[HR](?:$|[(/,])", re.IGNORECASE)


def _check_cron(cron: Any) -> str:
    """The expression with its fields separated by single spaces, or DefinitionError naming the rule."""
    if not isinstance(cron, str):
        raise DefinitionError("CronPartitionDef cron must be a string of five fields (minute hour day month weekday)")
    fields = cron.split()
    if len(fields) != 5:
        raise DefinitionError(
            "CronPartitionDef cron must have exactly five fields (minute hour day month weekday); "
            "seconds fields and @-aliases are not accepted"
        )
    if any(_UNSTABLE_ITEM.search(field) for field in fields):
        raise DefinitionError("CronPartitionDef cron must not use hashed (H) or random (R) values: keys must be stable")
    text = " ".join(fields)
    problem = expression_problem(text)
    if problem is not None:
        raise DefinitionError(f"CronPartitionDef cron {problem}")
    return text


class CronPartitionDef(_BoundedTimeDef):
    """The windows between the ticks of a five-field cron expression in ``timezone``.

    ``CronPartitionDef("*/15 * * * *", timezone="Europe/Berlin")`` has a key
    every quarter hour. The domain ``cron:<expression>@<timezone>`` carries
    both, so assets partitioned by another expression or zone are another
    key space.
    """

    kind: ClassVar[str] = "cron"
    key_format: ClassVar[str] = "YYYY-MM-DDTHH:MM+HH:MM (the window's start, with its UTC offset)"

    def __init__(self, cron: str, timezone: str = "UTC", start: Any = None, end: Any = None) -> None:
        self._cron = _check_cron(cron)
        self._tz = zone_named(timezone, owner="CronPartitionDef")
        self._timezone = timezone
        super().__init__(start, end)

    @property
    def cron(self) -> str:
        return self._cron

    @property
    def timezone(self) -> str:
        return self._timezone

    @property
    def domain(self) -> str:
        return f"cron:{self._cron}@{self._timezone}"

    def _order(self, key: dt.datetime) -> dt.datetime:
        return key.astimezone(_UTC)

    def normalize_key(self, key: Any) -> dt.datetime:
        if isinstance(key, str):
            return self._parse_text(key)
        if not isinstance(key, dt.datetime):
            raise ValueError("cron partition keys must be aware datetimes or YYYY-MM-DDTHH:MM+HH:MM text")
        if key.tzinfo is None or key.utcoffset() is None:
            raise ValueError("cron partition keys must be timezone-aware datetimes")
        try:
            local = key.astimezone(_UTC).astimezone(self._tz)
        except OverflowError:
            raise ValueError(_OUT_OF_CALENDAR) from None
        if key.tzinfo is self._tz and local.replace(tzinfo=None) != key.replace(tzinfo=None):
            raise ValueError("cron partition key names a wall time that does not exist in the time zone (daylight-saving gap)")
        offset = local.utcoffset() or dt.timedelta(0)
        if offset.total_seconds() % 60:
            raise ValueError("cron partition keys need a UTC offset of whole minutes (local mean time is not supported)")
        if not is_tick(self._cron, self._tz, local):
            raise ValueError("cron partition key is not a tick of the definition's cron expression in its time zone")
        return self._check_bounds(local)

    def _parse_text(self, text: str) -> dt.datetime:
        match = _TEXT.fullmatch(text)
        if match is None:
            raise ValueError("cron partition key text is not canonical YYYY-MM-DDTHH:MM+HH:MM")
        year, month, day, hour, minute = (int(part) for part in match.groups()[:5])
        offset_hours, offset_minutes = int(match.group(7)), int(match.group(8))
        try:
            wall = dt.datetime(year, month, day, hour, minute)
        except ValueError:
            raise ValueError("cron partition key text is not a valid calendar minute") from None
        if offset_hours > 23 or offset_minutes > 59:
            raise ValueError("cron partition key text carries an invalid UTC offset")
        offset = dt.timedelta(hours=offset_hours, minutes=offset_minutes) * (-1 if match.group(6) == "-" else 1)
        try:
            local = (wall - offset).replace(tzinfo=_UTC).astimezone(self._tz)
        except OverflowError:
            raise ValueError(_OUT_OF_CALENDAR) from None
        if local.replace(tzinfo=None) != wall:
            raise ValueError("cron partition key text carries a UTC offset the time zone does not have at that wall time")
        key = self.normalize_key(local)
        if self.format_key(key) != text:
            raise ValueError("cron partition key text is not canonical (a zero offset is written +00:00)")
        return key

    def format_key(self, key: dt.datetime) -> str:
        offset = key.utcoffset() or dt.timedelta(0)
        minutes = int(offset.total_seconds()) // 60
        sign = "+" if minutes >= 0 else "-"
        minutes = abs(minutes)
        return f"{key.year:04d}-{key.month:02d}-{key.day:02d}T{key.hour:02d}:{key.minute:02d}{sign}{minutes // 60:02d}:{minutes % 60:02d}"

    def key_identity(self, key: dt.datetime) -> Hashable:
        # Aware datetimes in one zone compare by wall time and ignore fold: the text keeps repeated ones apart.
        return self.format_key(key)

    def range(self, start: Any, end: Any) -> tuple[dt.datetime, ...]:
        first, last = self._check_range(start, end)
        last_utc = last.astimezone(_UTC)
        ticks = itertools.takewhile(last_utc.__ge__, ticks_from(self._cron, self._tz, first))
        return tuple(tick.astimezone(self._tz) for tick in ticks)

    def ticks_between(self, start: dt.datetime, stop: dt.datetime) -> tuple[dt.datetime, ...]:
        """Every tick in [``start``, ``stop``) of two aware instants, whatever the bounds: a window's keys."""
        stop_utc = stop.astimezone(_UTC)
        ticks = itertools.takewhile(stop_utc.__gt__, ticks_from(self._cron, self._tz, start))
        return tuple(tick.astimezone(self._tz) for tick in ticks)

    def range_size_at_most(self, start: dt.datetime, end: dt.datetime) -> int:
        """An upper bound of ``len(range(start, end))`` for normalized keys, computed without expanding it."""
        return ticks_at_most(self._cron, start, end)

    def recent_keys(self, until: dt.datetime, count: int) -> tuple[dt.datetime, ...]:
        """The last ``count`` keys at or before the aware ``until`` (fewer when the search, at least 32 years back, finds fewer).

        The search window doubles from an hour, so a minute expression walks a
        few hundred ticks and a yearly one a few dozen windows.
        """
        until_utc, window = until.astimezone(_UTC), dt.timedelta(hours=1)
        while True:
            try:
                first = until_utc - window
            except OverflowError:
                first = dt.datetime.min.replace(tzinfo=_UTC)
            ticks = list(itertools.takewhile(until_utc.__ge__, ticks_from(self._cron, self._tz, first)))
            if len(ticks) >= count or window > _SEARCH_LIMIT or first.year == 1:
                return tuple(tick.astimezone(self._tz) for tick in ticks[-count:] if count)
            window *= 2

    def describe(self) -> dict[str, Any]:
        description = super().describe()
        description["cron"] = self._cron
        description["timezone"] = self._timezone
        return description

    def __repr__(self) -> str:
        return f"CronPartitionDef(cron={self._cron!r}, timezone={self._timezone!r})"
