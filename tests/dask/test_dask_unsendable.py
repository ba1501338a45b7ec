"""A body or input that cannot be sent to the cluster fails its own attempt, naming the asset; the others run."""

from __future__ import annotations

import threading

import partita as p


def test_a_body_that_cannot_be_pickled_fails_its_attempt_by_name_and_the_rest_of_the_pass_runs(dask_client):
    registry = p.AssetRegistry()
    lock = threading.Lock()  # a closure over a lock: cloudpickle sends the body by value, and fails

    @p.asset(registry=registry)
    def holds_a_lock():
        with lock:
            return 1

    @p.asset(registry=registry)
    def plain():
        return 2

    result = p.Flow(
        ["holds_a_lock", "plain"], registry=registry, executor=p.DaskExecutor(client=dask_client), store=False
    ).run()

    (failed,) = result.tasks["holds_a_lock"].attempts
    assert failed.status is p.AttemptStatus.FAILED
    assert failed.invocations[0].failure.type == "partita.errors.ExecutionError"
    message = failed.invocations[0].failure.message
    assert "asset 'holds_a_lock': its body or inputs cannot be sent to the Dask cluster" in message
    assert "lock" in message
    assert result.output("plain") == 2  # submitted in the same loop pass, sent and run
    assert result.status is p.RunStatus.FAILED
