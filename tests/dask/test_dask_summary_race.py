"""A body's summary can reach the driver before `Client.map` has returned its future there.

Under load the driver's thread may be descheduled between Dask sending the
tasks and the session keeping their futures: the body runs, and its summary
arrives on the client's thread first. The output handle made from that
summary must still hold the future, or the downstream body receives None
for its input. Assets are module level so workers find them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import partita as p

MARKS = "PARTITA_TEST_DASK_MARKS"
REGISTRY = p.AssetRegistry()
WAIT = 30.0


def _finish(name: str) -> None:
    (Path(os.environ[MARKS]) / f"done-{name}").write_text("")


@p.asset(registry=REGISTRY)
def quick_source():
    _finish("quick_source")
    return {"rows": 3}


@p.asset(registry=REGISTRY)
def quick_reader(quick_source):
    _finish("quick_reader")
    return quick_source["rows"] + 1


def test_an_output_whose_summary_arrived_before_submit_returned_reaches_its_reader(dask_client, marks, monkeypatch):
    real_map = dask_client.map

    def map_returning_late(*args, **kwargs):
        before = len(list(marks.glob("done-*")))
        futures = real_map(*args, **kwargs)
        deadline = time.monotonic() + WAIT
        while len(list(marks.glob("done-*"))) == before and all(future.status != "error" for future in futures):
            assert time.monotonic() < deadline, "the body never ran"
            time.sleep(0.01)  # the body runs on its worker meanwhile (or its task fails there)
        time.sleep(0.2)  # the driver's thread, descheduled, returns only after the summary has arrived
        return futures

    monkeypatch.setattr(dask_client, "map", map_returning_late)
    result = p.Flow(["quick_reader"], registry=REGISTRY, executor=p.DaskExecutor(client=dask_client)).run()

    assert result.status is p.RunStatus.SUCCESS, [a.failure for a in result.attempts()]
    assert result.output("quick_reader") == 4
