"""The engine's fast builders give the very objects the frozen dataclasses' constructors give.

A plain success is also kept as one object the garbage collector tracks until
its ``invocations`` are read; read, copied, pickled or replaced, it is the
`AttemptResult` the constructor gives.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle

import pytest

from partita.results import plain_success
from partita.results.attempts import AttemptResult, AttemptStatus, Invocation, Resolution
from partita.results.plain_success import plain_success_times, succeeded_attempt, succeeded_invocation


def _values(instance: object) -> dict[str, object]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def test_a_succeeded_invocation_equals_the_constructors_and_stays_frozen():
    fast = succeeded_invocation(2, 10.5, 11.25)

    assert type(fast) is Invocation
    assert fast == Invocation(2, 10.5, 11.25, True)
    assert fast.duration == 0.75
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.number = 3  # type: ignore[misc]


def _fast() -> AttemptResult:
    return succeeded_attempt("load", "2026-08-08", True, OUTPUT, 1.0, 2.5, 4)


OUTPUT = {"rows": 3}


def _built() -> AttemptResult:
    return AttemptResult(
        "load",
        "2026-08-08",
        True,
        AttemptStatus.SUCCESS,
        output=OUTPUT,
        invocations=(Invocation(1, 1.0, 2.5, True),),
        resolution=Resolution.EXECUTED,
        index=4,
    )


def test_a_succeeded_attempt_has_every_field_of_the_constructors_and_stays_frozen():
    fast = _fast()

    assert isinstance(fast, AttemptResult)
    assert (fast.started_at, fast.finished_at, fast.duration) == (1.0, 2.5, 1.5)
    assert _values(fast) == _values(_built())  # the defaults too: reason, blocked_by, exception, failure
    assert repr(fast) == repr(_built())
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.status = AttemptStatus.FAILED  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no_such_field"):
        fast.no_such_field  # noqa: B018 - the read is what is tested


def _holds_invocations(attempt: AttemptResult) -> bool:
    """Whether it refers to an `Invocation` or a non-empty tuple (objects the collector would track)."""
    return any(isinstance(r, Invocation) or (isinstance(r, tuple) and r) for r in gc.get_referents(attempt))


def test_a_succeeded_attempt_is_one_tracked_object_until_its_invocations_are_read():
    fast = _fast()

    assert not _holds_invocations(fast)  # its times are two floats
    assert plain_success_times(fast) == (1.0, 2.5)
    assert (fast.started_at, fast.duration) == (1.0, 1.5)
    assert not _holds_invocations(fast)  # reading its times made none
    first = fast.invocations
    assert first == (Invocation(1, 1.0, 2.5, True),)
    assert fast.invocations is first and _holds_invocations(fast)  # made once, then kept


@pytest.mark.parametrize(
    "copied",
    [copy.copy, copy.deepcopy, lambda a: pickle.loads(pickle.dumps(a)), lambda a: dataclasses.replace(a, index=4)],
    ids=["copy", "deepcopy", "pickle", "replace"],
)
def test_a_copied_succeeded_attempt_is_the_plain_attempt_result_it_stands_for(copied):
    again = copied(_fast())

    assert type(again) is AttemptResult
    assert {k: v for k, v in _values(again).items() if k != "output"} == {
        k: v for k, v in _values(_built()).items() if k != "output"
    }
    assert again.output == OUTPUT


def test_plain_success_times_of_other_attempts():
    assert plain_success_times(_built()) == (1.0, 2.5)
    retried = dataclasses.replace(_built(), invocations=(Invocation(1, 0.0, 0.5, False), Invocation(2, 1.0, 2.5, True)))
    assert plain_success_times(retried) is None
    assert plain_success_times(dataclasses.replace(_built(), status=AttemptStatus.FAILED)) is None
    reused = dataclasses.replace(_built(), invocations=(), resolution=Resolution.MATERIALIZED)
    assert plain_success_times(reused) is None


def test_a_builder_that_would_leave_a_field_unset_or_set_an_unknown_one_is_refused_at_import():
    with pytest.raises(TypeError, match=r"Invocation's fast builder leaves its fields \['failure'\] unset"):
        plain_success._check_covers(Invocation, ("number", "started_at", "finished_at", "succeeded"), ())  # noqa: SLF001
    with pytest.raises(TypeError, match=r"Invocation has no fields \['attempts'\]"):
        plain_success._slot_setters(Invocation, ("number", "attempts"))  # noqa: SLF001


@pytest.mark.parametrize("stored", [False, True], ids=["no-store", "sqlite"])
def test_a_runs_plain_successes_keep_their_invocations_unmade_through_the_run_and_its_record(tmp_path, stored):
    import partita as p

    registry = p.AssetRegistry()
    keys = p.StaticPartitionDef("tenants", [f"t{index}" for index in range(20)])

    @p.asset(partition_def=keys, registry=registry)
    def load() -> int:
        return 1

    @p.asset(partition_def=keys, registry=registry)
    def publish(load: int) -> int:
        return load + 1

    store = p.open_store(f"sqlite:///{tmp_path / 'partita.db'}") if stored else None
    try:
        result = p.Flow(["publish"], registry=registry, store=store).run({"partition_keys": keys.keys})
        attempts = [attempt for task in result.tasks.values() for attempt in task.attempts]

        assert result.succeeded and len(attempts) == 40
        assert not any(_holds_invocations(attempt) for attempt in attempts)  # neither the run nor its journal made them
        if store is not None:
            recorded = {task.asset: task for task in store.get_tasks(result.run_id)}
            live = {attempt.index: attempt for attempt in result.tasks["load"].attempts}
            for attempt in recorded["load"].attempts:
                assert (attempt.started_at, attempt.finished_at) == (
                    live[attempt.index].started_at,
                    live[attempt.index].finished_at,
                )
        assert all(attempt.invocations[0].succeeded for attempt in attempts)  # and made on demand
    finally:
        if store is not None:
            store.close()
