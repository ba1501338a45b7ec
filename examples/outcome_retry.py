"""A resource circuit opens mid-run; the failed and circuit-skipped keys get a deliberate second run."""

from partita import AssetRegistry, DatePartitionDef, Fail, Flow, OpenCircuit, ResourcePolicy, asset

registry = AssetRegistry()
days = DatePartitionDef()
malformed_days = {"2026-08-09"}  # this day's export is broken
gateway = {"up": False}  # the payment gateway stops answering from 2026-08-10 on


class GatewayUnavailable(Exception):
    """The payment gateway did not answer."""


def classify(error: Exception):
    if isinstance(error, GatewayUnavailable):
        return OpenCircuit()  # stop calling the gateway for the rest of the run
    return Fail()


@asset(partition_def=days, resource="payments", registry=registry)
def settlements(context) -> int:
    day = context.partition_key
    if day.isoformat() in malformed_days:
        raise ValueError("settlement export is malformed")
    if day.day >= 10 and not gateway["up"]:
        raise GatewayUnavailable("payment gateway timed out")
    return 100 * day.day


@asset(partition_def=days, registry=registry)
def ledger(settlements: int) -> str:
    return f"booked {settlements}"


payments = ResourcePolicy(max_concurrency=1, classify_failure=classify)  # one call at a time
flow = Flow(["ledger"], registry=registry, resources={"payments": payments})


def show(result):
    print("run status:", result.status.value)
    for attempt in result.attempts():
        reason = f" ({attempt.reason.value})" if attempt.reason else ""
        print(" ", attempt.asset_name, attempt.partition_key, attempt.status.value + reason)


if __name__ == "__main__":
    result = flow.run({"partition_range": ("2026-08-08", "2026-08-12")})
    show(result)

    failed = result.failed_partition_keys("settlements")
    circuit_skipped = result.circuit_skipped_partition_keys("settlements")
    retry_keys = failed + circuit_skipped
    print("failed:", [day.isoformat() for day in failed])
    print("circuit skipped:", [day.isoformat() for day in circuit_skipped])
    print("ledger circuit skipped:", result.circuit_skipped_partition_keys("ledger"))  # dependency skips only

    # The export was repaired and the gateway is back: re-running is our decision,
    # with exactly the keys that did not complete.
    malformed_days.clear()
    gateway["up"] = True
    retry_result = flow.run({"partition_keys": retry_keys})
    show(retry_result)
