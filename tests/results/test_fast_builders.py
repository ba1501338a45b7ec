"""The engine's fast builders give the very objects the frozen dataclasses' constructors give."""

from __future__ import annotations

import dataclasses

import pytest

from partita.results import attempts
from partita.results.attempts import (
    AttemptResult,
    AttemptStatus,
    Invocation,
    Resolution,
    succeeded_attempt,
    succeeded_invocation,
)


def _values(instance: object) -> dict[str, object]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def test_a_succeeded_invocation_equals_the_constructors_and_stays_frozen():
    fast = succeeded_invocation(2, 10.5, 11.25)

    assert type(fast) is Invocation
    assert fast == Invocation(2, 10.5, 11.25, True)
    assert fast.duration == 0.75
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.number = 3  # type: ignore[misc]


def test_a_succeeded_attempt_has_every_field_of_the_constructors_and_stays_frozen():
    invocations = (succeeded_invocation(1, 1.0, 2.0),)
    output = object()
    fast = succeeded_attempt("load", "2026-08-08", True, output, invocations, Resolution.EXECUTED, "m1", 4)
    built = AttemptResult(
        "load",
        "2026-08-08",
        True,
        AttemptStatus.SUCCESS,
        output=output,
        invocations=invocations,
        resolution=Resolution.EXECUTED,
        materialization_id="m1",
        index=4,
    )

    assert type(fast) is AttemptResult
    assert _values(fast) == _values(built)  # the defaults too: reason, blocked_by, exception, failure
    assert fast.started_at == 1.0 and fast.duration == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.status = AttemptStatus.FAILED  # type: ignore[misc]


def test_a_builder_whose_fields_no_longer_match_its_class_is_refused_at_import():
    with pytest.raises(TypeError, match="Invocation's fast builder sets .* but its fields are"):
        attempts._slot_setters(Invocation, ("number", "started_at", "finished_at", "failure", "succeeded"))  # noqa: SLF001
