"""A sync body's attempt scope: its log is made at the first line, shared by threads in its context, and ended after it."""

from __future__ import annotations

import contextvars
import logging
import threading
import time

import pytest

import partita as p
from partita.events.emission import activate, deactivate
from partita.execution.attempt_logs import OUTSIDE_ATTEMPTS, current_attempt_log, current_log
from partita.execution.attempt_scope import AttemptScope

DAYS = p.DatePartitionDef()
KEYS = ["2026-08-08", "2026-08-09", "2026-08-10"]
WAIT = 30.0


def test_bodies_that_write_nothing_make_no_log_and_each_writer_gets_its_own() -> None:
    registry = p.AssetRegistry()
    seen: dict[str, object] = {}

    @p.asset(partition_def=DAYS, registry=registry)
    def extract(context) -> None:
        if context.partition_key.day == 9:
            context.logger.info("only this key logs")
        seen[context.partition_key.isoformat()] = current_log()

    result = p.Flow(["extract"], registry=registry).run({"partition_keys": KEYS})

    assert result.succeeded
    assert set(result.attempt_logs) == {("extract", 1)}
    assert [line.message for line in result.logs("extract", "2026-08-09")] == ["only this key logs"]
    # Asking for the current log makes it: each body got a log of its own attempt.
    assert {key: (log.asset, log.index) for key, log in seen.items()} == {
        "2026-08-08": ("extract", 0),
        "2026-08-09": ("extract", 1),
        "2026-08-10": ("extract", 2),
    }


def test_threads_that_share_the_bodys_context_write_to_one_log_numbered_once() -> None:
    registry = p.AssetRegistry()
    per_thread = 50

    @p.asset(registry=registry)
    def fan() -> None:
        logger = logging.getLogger("partita.asset.fan")
        start = threading.Barrier(4, timeout=WAIT)

        def write(name: str) -> None:
            start.wait()
            for number in range(per_thread):
                logger.info("%s %d", name, number)

        helpers = [
            threading.Thread(target=contextvars.copy_context().run, args=(write, f"helper{n}")) for n in range(3)
        ]
        for helper in helpers:
            helper.start()
        write("body")
        for helper in helpers:
            helper.join(WAIT)

    result = p.Flow(["fan"], registry=registry, log_capture=p.LogCapture(head=1000)).run()

    lines = result.logs("fan")
    assert len(lines) == 4 * per_thread
    assert sorted(line.seq for line in lines) == list(range(1, 4 * per_thread + 1))
    for name in ("body", "helper0", "helper1", "helper2"):
        assert [line.message for line in lines if line.message.split()[0] == name] == [
            f"{name} {number}" for number in range(per_thread)
        ]


def test_output_without_a_final_newline_is_kept_when_the_sync_body_ends_even_if_it_fails() -> None:
    registry = p.AssetRegistry()

    @p.asset(partition_def=DAYS, registry=registry)
    def flaky(context) -> None:
        print("unfinished", end="")
        if context.partition_key.day == 8:
            raise RuntimeError("failed after writing")

    result = p.Flow(["flaky"], registry=registry, log_capture=True).run({"partition_keys": KEYS[:2]})

    for key in KEYS[:2]:
        assert [(line.stream, line.message) for line in result.logs("flaky", key)] == [
            (p.LogStream.STDOUT, "unfinished")
        ]


def test_what_a_listener_prints_while_showing_a_line_is_not_the_bodys_output() -> None:
    registry = p.AssetRegistry()
    shown: list[str] = []

    class Printer:
        def on_log(self, line, key_text) -> None:
            shown.append(line.message)
            print(f"[live] {line.message}")  # the CLI prints lines live like this

    @p.asset(registry=registry)
    def talks(context) -> None:
        context.logger.info("hello")

    result = p.Flow(["talks"], registry=registry, log_capture=True).run(observers=[Printer()])

    assert shown == ["hello"]
    assert [line.message for line in result.logs("talks")] == ["hello"]


def test_outside_attempts_wins_over_the_threads_scope() -> None:
    scope = AttemptScope(lambda *args: None, None, None, 0, 1)  # type: ignore[arg-type]
    token = activate(scope)
    try:
        outside = current_attempt_log.set(OUTSIDE_ATTEMPTS)
        try:
            assert current_log() is None
        finally:
            current_attempt_log.reset(outside)
    finally:
        deactivate(token)
    assert current_log() is None  # no scope active: outside any attempt


class _OwnThreadExecutor:
    """A user's in-process executor (docs/execution.md): each body on a thread of its own."""

    runs_async_bodies = False

    def __init__(self, activate_emitter: bool) -> None:
        self._activate = activate_emitter

    def start(self, loop, deliver, max_workers) -> None:
        self._loop, self._deliver = loop, deliver

    def submit(self, token, fn, kwargs, asset_name, emitter=None) -> None:
        def run() -> None:
            active = activate(emitter) if self._activate else None
            started = time.time()
            try:
                value, succeeded = fn(**kwargs), True
            except BaseException as exc:  # noqa: BLE001 - the attempt's failure
                value, succeeded = exc, False
            finally:
                if active is not None:
                    deactivate(active)
            self._loop.call_soon_threadsafe(self._deliver, [(token, succeeded, value, started, time.time())])

        threading.Thread(target=run).start()

    def shutdown(self, wait=None) -> bool:
        return True


@pytest.mark.parametrize("activate_emitter", [True, False])
def test_an_executor_of_the_users_own_still_gets_each_body_in_a_log_scope(activate_emitter, capsys) -> None:
    registry = p.AssetRegistry()

    @p.asset(registry=registry)
    def talks(context) -> None:
        context.logger.info("hello")
        print("partial", end="")

    flow = p.Flow(["talks"], registry=registry, executor=_OwnThreadExecutor(activate_emitter), log_capture=True)
    result = flow.run()

    assert result.succeeded
    assert [(line.stream, line.message) for line in result.logs("talks")] == [
        (p.LogStream.LOG, "hello"),
        (p.LogStream.STDOUT, "partial"),
    ]
    assert capsys.readouterr().out == ""


def test_a_thread_an_earlier_invocation_left_running_does_not_take_over_the_retrys_lines() -> None:
    registry = p.AssetRegistry()
    go, done = threading.Event(), threading.Event()
    logger = logging.getLogger("partita.asset.job")

    @p.asset(registry=registry, retry=p.RetryPolicy(max_attempts=2, delay=0.0))
    def job(context) -> None:
        if context.invocation_number == 1:

            def late() -> None:
                go.wait(WAIT)
                logger.info("late line from the first invocation's thread")
                done.set()

            threading.Thread(target=contextvars.copy_context().run, args=(late,), daemon=True).start()
            raise RuntimeError("the first invocation fails, logging nothing")
        logger.info("second a")
        logger.info("second b")
        go.set()
        done.wait(WAIT)
        logger.info("second c")

    result = p.Flow(["job"], registry=registry, log_capture=p.LogCapture(head=1, tail=10)).run()

    assert result.succeeded
    assert [(line.invocation, line.message) for line in result.logs("job")] == [
        (2, "second a"),
        (2, "second b"),
        (2, "second c"),
    ]


def test_a_failure_while_ending_the_bodys_log_fails_the_attempt_and_never_hangs_the_run() -> None:
    registry = p.AssetRegistry()

    class Quits:
        def on_event(self, event) -> None:
            pass

        def on_log(self, line, key_text) -> None:
            if line.message == "tail":
                raise SystemExit("the listener quits")

    @p.asset(registry=registry)
    def job() -> None:
        print("tail", end="")  # kept, and shown, only when the invocation ends

    outcome: list[p.RunResult] = []
    runner = threading.Thread(
        target=lambda: outcome.append(p.Flow(["job"], registry=registry, log_capture=True).run(observers=[Quits()])),
        daemon=True,
    )
    runner.start()
    runner.join(WAIT)

    assert outcome, "the run hung"
    assert outcome[0].status is p.RunStatus.FAILED
    assert outcome[0].tasks["job"].attempts[0].failure.type == "builtins.SystemExit"
