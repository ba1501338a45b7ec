"""A run's timeline as SVG geometry: one lane per asset, bars from start to finish, coloured and patterned by status.

The template draws what `draw_timeline` returns (rectangles with a CSS class
and a title, lane labels, time ticks); nothing here is markup, so every text
is escaped where it is rendered. A run with few attempts gets one bar per
attempt, packed into rows so that overlapping attempts stay visible; a run
with more (`MAX_BARS`) gets, per asset and time bucket, one column split by
status in proportion to the counts, so 100,000 attempts are a few hundred
rectangles.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from partita.store.run_digest import TimelineBar, TimelineBucket, TimelineRows

__all__ = ["BUCKETS", "MAX_BARS", "Timeline", "draw_timeline"]

#: Above this many started attempts the timeline aggregates into buckets.
MAX_BARS = 1000
#: Time buckets across the run when aggregated.
BUCKETS = 120
#: Rows of bars a lane packs overlapping attempts into, at most.
MAX_ROWS = 8
WIDTH = 1000
LABEL_WIDTH = 160
ROW_HEIGHT = 10
LANE_GAP = 8
TOP = 22
#: Statuses from the bottom of a bucket's column up; failures first, where the eye lands.
_ORDER = ("failed", "interrupted", "cancelled", "running", "skipped", "success")


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    status: str
    title: str


@dataclass(frozen=True, slots=True)
class Lane:
    asset: str
    y: float
    height: float
    #: What the lane shows, in words (the text fallback of its colours).
    summary: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str
    #: SVG text-anchor: the end ticks' labels stay inside the drawing.
    anchor: str = "middle"


@dataclass(frozen=True, slots=True)
class Timeline:
    width: int
    height: int
    label_width: int
    lanes: tuple[Lane, ...]
    rects: tuple[Rect, ...]
    ticks: tuple[Tick, ...]
    aggregated: bool
    bucket_seconds: float

    @property
    def empty(self) -> bool:
        return not self.rects


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S")


class _Scale:
    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.span = max(end - start, 1e-3)
        self.pixels = WIDTH - LABEL_WIDTH - 10

    def x(self, at: float) -> float:
        return LABEL_WIDTH + max(0.0, min(1.0, (at - self.start) / self.span)) * self.pixels

    def ticks(self) -> tuple[Tick, ...]:
        """The start's clock time, then offsets from it (a short run's ticks would all read the same second)."""
        offsets = [self.span * i / 4 for i in range(5)]
        anchors = ["start", "middle", "middle", "middle", "end"]
        return tuple(
            Tick(self.x(self.start + offset), _clock(self.start) if not offset else _offset(offset), anchor)
            for offset, anchor in zip(offsets, anchors, strict=True)
        )


def _offset(seconds: float) -> str:
    if seconds < 10:
        return f"+{seconds:.2f}s"
    if seconds < 600:
        return f"+{seconds:.0f}s"
    return f"+{seconds / 60:.0f}min"


def _words(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[status]} {status}" for status in _ORDER if counts.get(status))


def _pack(bars: Sequence[TimelineBar], end: float) -> list[int]:
    """A row per bar (bars sorted by start): the first row whose last bar ended before this one starts."""
    row_ends: list[float] = []
    rows = []
    for bar in bars:
        finish = end if bar.finished_at is None else bar.finished_at
        for row, row_end in enumerate(row_ends):
            if row_end <= bar.started_at:
                row_ends[row] = finish
                rows.append(row)
                break
        else:
            if len(row_ends) < MAX_ROWS:
                row_ends.append(finish)
                rows.append(len(row_ends) - 1)
            else:  # more overlap than rows: share the row that frees up first
                row = min(range(MAX_ROWS), key=row_ends.__getitem__)
                row_ends[row] = max(row_ends[row], finish)
                rows.append(row)
    return rows


def _bar_title(bar: TimelineBar, end: float) -> str:
    key = f" {bar.partition_key}" if bar.partition_key is not None else ""
    finish = "running" if bar.finished_at is None else f"{(bar.finished_at - bar.started_at):.2f}s"
    return f"{bar.asset}{key} (attempt {bar.index}): {bar.status}, started {_clock(bar.started_at)}, {finish}"


def _draw_bars(
    assets: Sequence[str], bars: Sequence[TimelineBar], scale: _Scale, end: float
) -> tuple[list[Lane], list[Rect]]:
    by_asset: dict[str, list[TimelineBar]] = defaultdict(list)
    for bar in bars:
        by_asset[bar.asset].append(bar)
    lanes, rects, y = [], [], float(TOP)
    for asset in assets:
        found = by_asset.get(asset, [])
        rows = _pack(found, end)
        height = ROW_HEIGHT * max(1, max(rows, default=0) + 1)
        counts: dict[str, int] = defaultdict(int)
        for bar, row in zip(found, rows, strict=True):
            counts[bar.status] += 1
            left = scale.x(bar.started_at)
            right = scale.x(end if bar.finished_at is None else bar.finished_at)
            rects.append(
                Rect(
                    left,
                    y + row * ROW_HEIGHT + 1,
                    max(right - left, 2.0),
                    ROW_HEIGHT - 2,
                    bar.status,
                    _bar_title(bar, end),
                )
            )
        lanes.append(Lane(asset, y, height, _words(counts) or "no attempt started"))
        y += height + LANE_GAP
    return lanes, rects


def _draw_buckets(
    assets: Sequence[str], buckets: Sequence[TimelineBucket], scale: _Scale, width: float
) -> tuple[list[Lane], list[Rect]]:
    cells: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for bucket in buckets:
        cells[bucket.asset][bucket.bucket][bucket.status] = bucket.count
    lane_height = ROW_HEIGHT * 4
    lanes, rects, y = [], [], float(TOP)
    for asset in assets:
        columns = cells.get(asset, {})
        peak = max((sum(counts.values()) for counts in columns.values()), default=0)
        totals: dict[str, int] = defaultdict(int)
        for number, counts in sorted(columns.items()):
            left = scale.x(scale.start + number * width)
            column_width = max(scale.x(scale.start + (number + 1) * width) - left - 0.5, 1.0)
            bottom = y + lane_height
            for status in _ORDER:
                count = counts.get(status, 0)
                if not count:
                    continue
                totals[status] += count
                height = max(lane_height * count / peak, 1.0)
                bottom -= height
                title = f"{asset}: {count} {status}, started {_clock(scale.start + number * width)}–{_clock(scale.start + (number + 1) * width)}"
                rects.append(Rect(left, bottom, column_width, height, status, title))
        lanes.append(Lane(asset, y, lane_height, _words(totals) or "no attempt started"))
        y += lane_height + LANE_GAP
    return lanes, rects


def _interrupted(rows: TimelineRows) -> TimelineRows:
    def status(value: str) -> str:
        return "interrupted" if value == "running" else value

    bars = None if rows.bars is None else tuple(bar._replace(status=status(bar.status)) for bar in rows.bars)
    buckets = tuple(bucket._replace(status=status(bucket.status)) for bucket in rows.buckets)
    return dataclasses.replace(rows, bars=bars, buckets=buckets)


def draw_timeline(assets: Sequence[str], rows: TimelineRows, *, interrupted: bool = False) -> Timeline:
    """The timeline of ``assets`` (lanes in this order) from what the store returned.

    ``interrupted``: the run's owner is gone, so attempts stored as running are drawn interrupted, as history reads them.
    """
    if interrupted:
        rows = _interrupted(rows)
    scale = _Scale(rows.start, rows.end)
    if rows.bars is not None:
        lanes, rects = _draw_bars(assets, rows.bars, scale, rows.end)
    else:
        lanes, rects = _draw_buckets(assets, rows.buckets, scale, rows.bucket_seconds)
    height = int((lanes[-1].y + lanes[-1].height if lanes else TOP) + LANE_GAP)
    return Timeline(
        WIDTH, height, LABEL_WIDTH, tuple(lanes), tuple(rects), scale.ticks(), rows.bars is None, rows.bucket_seconds
    )
