"""Attempt logs: what a body logs (and prints, with output capture) is kept with its attempt.

Every record logged through ``context.logger`` is kept; ``LogCapture(output=True)``
also keeps the lines a body writes to stdout and stderr. Per attempt the first
``head`` and the last ``tail`` lines are kept and one marker counts the lines
cut between. Without a store the lines stay on the `RunResult`; with one they
are written with the attempts, and ``partita runs logs RUN_ID`` reads them.
"""

from partita import AssetRegistry, DatePartitionDef, Flow, LogCapture, asset

registry = AssetRegistry()


@asset(partition_def=DatePartitionDef(), registry=registry)
def extract(context) -> int:
    context.logger.info("loaded %d rows", 120)
    for batch in range(1, 11):
        context.logger.debug("batch %d of 10 parsed", batch)
    print("wrote extract.parquet")
    return 120


@asset(partition_def=DatePartitionDef(), registry=registry)
def check(context, extract: int) -> None:
    try:
        assert extract > 1000, "fewer rows than last week"
    except AssertionError:
        context.logger.exception("row count check failed")


flow = Flow(["check"], registry=registry, log_capture=LogCapture(output=True, head=3, tail=2))

if __name__ == "__main__":
    import logging

    logging.getLogger("partita.asset").setLevel(logging.DEBUG)  # keep DEBUG records too
    result = flow.run({"partition_keys": ["2026-10-03"]})
    for line in result.logs("extract", "2026-10-03"):
        print(f"extract {line.seq} {line.level_name} {line.message}")
    (failure,) = result.logs("check", "2026-10-03")
    print(f"check {failure.level_name} {failure.message.splitlines()[-1]}")
