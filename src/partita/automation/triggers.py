"""Trigger declarations: when a flow runs by itself (SPEC §12).

- `OnAssetEvents(assets, mapper=IdentityMapper())`: a consumer run per
  downstream key once every listed upstream asset has events for the keys
  that key needs (per the mapper).
- `CronPartitions(cron, timezone="UTC", start=..., catchup="all")`: a run per
  elapsed schedule tick, for the partition of the flow's time definition that
  has ended by that tick; ``start`` is explicit, so there is no implicit
  history. Ticks are real instants, also on daylight-saving days (see
  `partita.automation.schedules`). ``catchup`` says what a pass does with
  ticks it finds missed (the daemon was stopped, or ``start`` is in the
  past): run every one (``"all"``), only the latest (``"latest"``), or at
  most the latest N (an int).

Both take ``rerun_interrupted`` (default 2): how many follow-up runs a
request gets when its consumer run is cut short by a crash, so that every
satisfied trigger ends in a finished run unless the crashes persist, and
``max_keys_per_run`` (default 1): how many due consumer keys one run may
serve as its attempts, like a single-run backfill. Each key still has its
own request, started exactly once, with its own triggering events.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partita.automation.schedules import cron_ticks, fires_after, is_five_field_cron
from partita.definitions.assets import asset_name_of
from partita.errors import DefinitionError
from partita.partitions.mappers import IdentityMapper, PartitionMapper

__all__ = ["CronPartitions", "OnAssetEvents", "Trigger"]

#: Follow-up runs a request gets by default after its run was interrupted.
DEFAULT_RERUN_INTERRUPTED = 2
#: Catch-up choices besides a number: every missed tick, or only the latest one.
CATCHUP_ALL = "all"
CATCHUP_LATEST = "latest"


def _rerun_interrupted(value: Any, owner: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DefinitionError(f"{owner} rerun_interrupted must be a whole number of follow-up runs, 0 or more")
    return value


@dataclass(frozen=True, slots=True, init=False)
class OnAssetEvents:
    """Run the flow for each downstream key whose upstream events are complete."""

    assets: tuple[str, ...]
    mapper: PartitionMapper = field(default_factory=IdentityMapper)
    rerun_interrupted: int = DEFAULT_RERUN_INTERRUPTED
    #: Due consumer keys one run serves at most (1: a run per key).
    max_keys_per_run: int = 1

    def __init__(
        self,
        assets: Any,
        mapper: PartitionMapper | None = None,
        *,
        rerun_interrupted: int = DEFAULT_RERUN_INTERRUPTED,
        max_keys_per_run: int | None = None,
    ) -> None:
        if isinstance(assets, str) or callable(assets):
            assets = [assets]
        if not isinstance(assets, Sequence) or not assets:
            raise DefinitionError("OnAssetEvents assets must name at least one upstream asset")
        names = tuple(asset_name_of(item, field_name="OnAssetEvents assets") for item in assets)
        if mapper is not None and not isinstance(mapper, PartitionMapper):
            raise DefinitionError("OnAssetEvents mapper must be a PartitionMapper")
        object.__setattr__(self, "assets", names)
        object.__setattr__(self, "mapper", mapper or IdentityMapper())
        object.__setattr__(self, "rerun_interrupted", _rerun_interrupted(rerun_interrupted, "OnAssetEvents"))
        object.__setattr__(self, "max_keys_per_run", _max_keys_per_run(max_keys_per_run, "OnAssetEvents"))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "asset_events",
            "assets": list(self.assets),
            "mapper": self.mapper.describe(),
            "max_keys_per_run": self.max_keys_per_run,
        }


def _max_keys_per_run(value: Any, owner: str) -> int:
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(f"{owner} max_keys_per_run must be a whole number of consumer keys, 1 or more")
    return value


def _catchup(value: Any) -> str | int:
    if value in (CATCHUP_ALL, CATCHUP_LATEST):
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(
            'CronPartitions catchup must be "all", "latest" or a whole number of ticks, 1 or more'
        )
    return value


@dataclass(frozen=True, slots=True, init=False)
class CronPartitions:
    """Run the flow for every elapsed tick of ``cron`` from ``start`` on."""

    cron: str
    timezone: str
    start: dt.datetime
    rerun_interrupted: int = DEFAULT_RERUN_INTERRUPTED
    #: ``"all"``, ``"latest"``, or at most this many of the latest missed ticks.
    catchup: str | int = CATCHUP_ALL
    #: Due partitions one run serves at most (1: a run per partition), as when catching up missed ticks.
    max_keys_per_run: int = 1

    def __init__(
        self,
        cron: str,
        *,
        start: Any = None,
        timezone: str = "UTC",
        rerun_interrupted: int = DEFAULT_RERUN_INTERRUPTED,
        catchup: str | int = CATCHUP_ALL,
        max_keys_per_run: int | None = None,
    ) -> None:
        if not is_five_field_cron(cron):
            raise DefinitionError("CronPartitions cron is not a valid cron expression (five fields, e.g. '0 * * * *')")
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise DefinitionError("CronPartitions timezone is not a known IANA time zone name") from None
        if start is None:
            raise DefinitionError("CronPartitions needs an explicit start: history begins there, never implicitly")
        if isinstance(start, str):
            try:
                start = dt.datetime.fromisoformat(start)
            except ValueError:
                raise DefinitionError("CronPartitions start must be an ISO 8601 date-time") from None
        if isinstance(start, dt.date) and not isinstance(start, dt.datetime):
            start = dt.datetime(start.year, start.month, start.day)
        if not isinstance(start, dt.datetime):
            raise DefinitionError("CronPartitions start must be a datetime (history begins there, never implicitly)")
        if start.tzinfo is None:
            start = start.replace(tzinfo=zone)
        if not fires_after(cron, start.astimezone(zone)):
            raise DefinitionError("CronPartitions cron never fires: no calendar date matches its fields")
        object.__setattr__(self, "cron", cron)
        object.__setattr__(self, "timezone", timezone)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "rerun_interrupted", _rerun_interrupted(rerun_interrupted, "CronPartitions"))
        object.__setattr__(self, "catchup", _catchup(catchup))
        object.__setattr__(self, "max_keys_per_run", _max_keys_per_run(max_keys_per_run, "CronPartitions"))

    @property
    def catchup_limit(self) -> int | None:
        """How many of a pass's missed keys run (the latest ones); None for all."""
        if self.catchup == CATCHUP_ALL:
            return None
        return 1 if self.catchup == CATCHUP_LATEST else int(self.catchup)

    def counted_after(self, after: dt.datetime | None) -> dt.datetime:
        """The instant ticks are counted strictly after: the last handled tick, never before ``start``.

        Strictly after start: the tick at start itself would name a partition before it.
        """
        return self.start if after is None or after < self.start else after

    def ticks(self, after: dt.datetime | None, until: dt.datetime) -> list[dt.datetime]:
        """Schedule ticks in (after, until] as real instants, never at or before ``start``."""
        return cron_ticks(self.cron, ZoneInfo(self.timezone), self.counted_after(after), until)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "cron",
            "cron": self.cron,
            "timezone": self.timezone,
            "start": self.start.isoformat(),
            "catchup": self.catchup,
            "max_keys_per_run": self.max_keys_per_run,
        }


Trigger = OnAssetEvents | CronPartitions
