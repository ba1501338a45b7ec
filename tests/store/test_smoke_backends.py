import datetime as dt

import partita
from partita.store import open_store


def test_a_run_is_recorded_and_read_back_on_every_backend(store_url):
    registry = partita.AssetRegistry()

    @partita.asset(partition_def=partita.DatePartitionDef(), registry=registry)
    def daily(context):
        if context.partition_key.day == 9:
            raise RuntimeError("no data")
        return 1

    result = partita.Flow(["daily"], registry=registry, store=store_url).run(
        {"partition_range": ("2026-08-08", "2026-08-10")}
    )
    store = open_store(store_url)
    try:
        run = store.get_run(result.run_id)
        assert run.status == "failed"
        assert run.counts == {"success": 2, "failed": 1}
        tasks = store.get_tasks(result.run_id)
        assert [a.status for a in tasks[0].attempts] == ["success", "failed", "success"]
        assert run.header.started_at <= dt.datetime.now(dt.UTC)
    finally:
        store.close()
