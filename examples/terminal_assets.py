"""An entry file without a Flow.

The CLI then targets the registered assets that nothing depends on:

    partita assets examples/terminal_assets.py
"""

from partita import MonthlyPartitionDef, asset, default_registry, run

months = MonthlyPartitionDef()


@asset(partition_def=months)
def invoices(context) -> int:
    return context.partition_key.month * 10


@asset(partition_def=months)
def revenue(invoices: int) -> int:
    return invoices * 3


@asset
def headcount() -> int:
    return 12


if __name__ == "__main__":
    terminal = default_registry().terminal_assets()
    print("terminal assets:", ", ".join(terminal))
    result = run(list(terminal), {"partition_keys": ["2026-01", "2026-02"]})
    print("run status:", result.status.value, "revenue:", [a.output for a in result.tasks["revenue"].attempts])
