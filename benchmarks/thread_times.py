"""Processor time per kind of thread, for the benchmarks' ``--diagnose`` lines (Linux).

On a machine with few cores, work a store or a daemon moves to another
thread overlaps the run only when a processor is free for it. Each thread's
``schedstat`` says how long it ran and how long it was runnable but waited
for a processor (the run queue); summed per role, named by the thread's
name, they show which thread pays and whether the machine is full.
"""

from __future__ import annotations

import os
import threading

__all__ = ["Snapshot", "by_role", "describe", "snapshot"]

#: Per live thread (native id): nanoseconds on a processor and in the run queue, and its name.
Snapshot = dict[int, tuple[int, int, str]]


def snapshot() -> Snapshot | None:
    """Every live thread's processor and run-queue nanoseconds so far; None without ``/proc`` schedstat."""
    if not os.path.isdir("/proc/self/task"):
        return None
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    times: Snapshot = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as schedstat:
                on_cpu, waiting, _ = schedstat.read().split()
        except (OSError, ValueError):  # the thread ended meanwhile, or the kernel keeps no schedstat
            continue
        times[int(task)] = (int(on_cpu), int(waiting), names.get(int(task), ""))
    return times or None


def by_role(
    before: Snapshot, after: Snapshot, roles: tuple[tuple[str, str], ...], caller: str = "caller"
) -> dict[str, tuple[float, float]]:
    """Seconds on a processor and in the run queue between two snapshots, per role.

    ``roles`` maps thread name prefixes to roles; the calling thread is
    ``caller``, any other thread ``other``. A thread that ended between the
    snapshots is missing from ``after``: its time is not counted.
    """
    me = threading.get_native_id()
    spent: dict[str, list[int]] = {}
    for task, (on_cpu, waiting, name) in after.items():
        earlier_cpu, earlier_wait, _ = before.get(task, (0, 0, ""))
        role = caller if task == me else next((role for prefix, role in roles if name.startswith(prefix)), "other")
        totals = spent.setdefault(role, [0, 0])
        totals[0] += on_cpu - earlier_cpu
        totals[1] += waiting - earlier_wait
    return {role: (cpu / 1e9, waiting / 1e9) for role, (cpu, waiting) in sorted(spent.items())}


def describe(spent: dict[str, tuple[float, float]], per: int) -> str:
    """``cpu_us_<role>=...`` per role and the total ``runq_us``, in microseconds each divided by ``per``."""
    parts = [f"cpu_us_{role}={cpu / per * 1e6:.1f}" for role, (cpu, _) in spent.items()]
    parts.append(f"runq_us={sum(waiting for _, waiting in spent.values()) / per * 1e6:.1f}")
    return " ".join(parts)
