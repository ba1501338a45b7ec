"""Observers that need less (`ResultObserver`): no `AttemptStarted`, each result itself; users' observers get every event."""

from __future__ import annotations

import datetime as dt
import re
from unittest import mock

import partita as p
from partita.execution.events import ObserverFanout, ResultObserver

DAYS = p.DatePartitionDef()
KEYS = [dt.date(2026, 8, 8) + dt.timedelta(days=offset) for offset in range(5)]


class Everything:
    """A user's observer: the protocol's one method."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def on_event(self, event: object) -> None:
        self.events.append(event)


class ResultsOnly(ResultObserver):
    """Like the store's journal: no start events, each finished attempt's result itself."""

    def __init__(self, fail: bool = False) -> None:
        self.events: list[object] = []
        self.results: list[p.AttemptResult] = []
        self._fail = fail

    def on_event(self, event: object) -> None:
        self.events.append(event)

    def on_attempt_finished(self, result: p.AttemptResult) -> None:
        self.results.append(result)
        if self._fail:
            raise RuntimeError("an observer's own bug")


def _chain() -> p.Flow:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def extract() -> int:
        return 1

    @p.asset(partition_def=DAYS, registry=registry)
    def transform(extract: int) -> int:
        return extract

    return p.Flow(["transform"], registry=registry)


def _attempts(result: p.RunResult) -> list[p.AttemptResult]:
    return [attempt for task in result.tasks.values() for attempt in task.attempts]


def test_an_observer_that_takes_results_gets_each_one_and_no_start_events() -> None:
    only = ResultsOnly()
    result = _chain().run({"partition_keys": KEYS}, observers=[only])

    assert result.succeeded
    assert sorted(map(id, only.results)) == sorted(map(id, _attempts(result)))
    kinds = {type(event).__name__ for event in only.events}
    assert kinds == {"RunStarted", "RunFinished"}  # no AttemptStarted, no AttemptFinished


def test_beside_an_observer_of_everything_each_gets_what_it_asked_for() -> None:
    everything, only = Everything(), ResultsOnly()
    result = _chain().run({"partition_keys": KEYS}, observers=[everything, only])

    started = [event for event in everything.events if isinstance(event, p.AttemptStarted)]
    finished = [event.attempt for event in everything.events if isinstance(event, p.AttemptFinished)]
    assert len(started) == 2 * len(KEYS)
    assert [id(attempt) for attempt in finished] == [id(attempt) for attempt in only.results]
    assert sorted(map(id, finished)) == sorted(map(id, _attempts(result)))
    assert not any(isinstance(event, (p.AttemptStarted, p.AttemptFinished)) for event in only.events)


def test_an_observer_that_raises_on_a_result_changes_nothing_for_the_run_or_the_others(caplog) -> None:
    failing, everything = ResultsOnly(fail=True), Everything()
    result = _chain().run({"partition_keys": KEYS}, observers=[failing, everything])

    assert result.succeeded
    assert len(failing.results) == 2 * len(KEYS)
    assert len([event for event in everything.events if isinstance(event, p.AttemptFinished)]) == 2 * len(KEYS)
    assert "an observer's own bug" in caplog.text


def test_the_fanout_says_who_listens() -> None:
    assert not ObserverFanout([]).active and not ObserverFanout([]).starts
    assert ObserverFanout([ResultsOnly()]).active and not ObserverFanout([ResultsOnly()]).starts
    assert ObserverFanout([ResultsOnly(), Everything()]).starts


class Dispatching:
    """A user's observer that routes each event to an ``on_<snake_case>`` method of its own."""

    def __init__(self) -> None:
        self.finished: list[p.AttemptStatus] = []

    def on_event(self, event: object) -> None:
        name = "on_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()
        getattr(self, name, lambda _: None)(event)

    def on_attempt_finished(self, event: p.AttemptFinished) -> None:
        self.finished.append(event.attempt.status)


def test_users_observers_get_every_event_whatever_their_other_methods_are_named() -> None:
    dispatching, anything = Dispatching(), mock.Mock()
    result = _chain().run({"partition_keys": KEYS}, observers=[dispatching, anything])

    assert result.succeeded
    assert dispatching.finished == [p.AttemptStatus.SUCCESS] * (2 * len(KEYS))
    kinds = [type(call.args[0]).__name__ for call in anything.on_event.call_args_list]
    assert kinds.count("AttemptStarted") == kinds.count("AttemptFinished") == 2 * len(KEYS)
