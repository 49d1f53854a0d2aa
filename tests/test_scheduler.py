"""common.scheduler: one timer for many deadlines, driven here by a manual clock (`run_due`)."""

from __future__ import annotations

import asyncio

from common.scheduler import Scheduler
from managed_ledger.clock import ManualClock


def make() -> tuple[ManualClock, Scheduler, list[str]]:
    clock = ManualClock(1_000)
    return clock, Scheduler(clock.now_ms), []


def test_runs_what_is_due_in_deadline_order() -> None:
    clock, s, ran = make()
    s.schedule("b", 1_200, lambda: ran.append("b"))
    s.schedule("a", 1_100, lambda: ran.append("a"))
    s.schedule("c", 1_300, lambda: ran.append("c"))
    assert s.run_due() == 0 and ran == []
    clock.advance(200)
    assert s.run_due() == 2 and ran == ["a", "b"]
    assert s.deadline("c") == 1_300 and len(s) == 1
    clock.advance(100)
    assert s.run_due() == 1 and ran == ["a", "b", "c"]
    assert len(s) == 0 and s.next_deadline() is None


def test_cancel_and_reschedule() -> None:
    clock, s, ran = make()
    s.schedule("a", 1_100, lambda: ran.append("a"))
    s.schedule("b", 1_100, lambda: ran.append("b"))
    s.cancel("a")
    s.schedule("b", 1_500, lambda: ran.append("b2"))  # replaces: later
    clock.advance(100)
    assert s.run_due() == 0 and ran == []
    assert s.next_deadline() == 1_500
    s.schedule("b", 1_050, lambda: ran.append("b3"))  # replaces: earlier
    assert s.run_due() == 1 and ran == ["b3"]
    clock.advance(1_000)
    assert s.run_due() == 0  # the replaced entries never run
    s.cancel("nothing")  # cancelling what is not there is fine


def test_schedule_by_keeps_the_earlier_deadline() -> None:
    clock, s, ran = make()
    s.schedule_by("a", 1_500, lambda: ran.append("late"))
    s.schedule_by("a", 1_200, lambda: ran.append("early"))
    s.schedule_by("a", 1_900, lambda: ran.append("later"))
    assert s.deadline("a") == 1_200
    clock.advance(1_000)
    assert s.run_due() == 1 and ran == ["early"]


def test_a_callback_may_schedule_itself_again_and_a_failing_one_stops_nothing() -> None:
    clock, s, ran = make()

    def again() -> None:
        ran.append("again")
        s.schedule("a", clock.now_ms(), again)

    def boom() -> None:
        raise RuntimeError("boom")

    s.schedule("a", 1_000, again)
    s.schedule("x", 1_000, boom)
    s.schedule("z", 1_000, lambda: ran.append("z"))
    assert s.run_due() == 3 and ran == ["again", "z"]  # the re-entry waits for the next call
    assert s.run_due() == 1 and ran == ["again", "z", "again"]


async def test_the_task_runs_entries_on_time_and_stops_on_close() -> None:
    s = Scheduler(lambda: int(asyncio.get_running_loop().time() * 1000))
    fired = asyncio.Event()
    now = int(asyncio.get_running_loop().time() * 1000)
    s.schedule("late", now + 60_000, lambda: None)
    s.schedule("soon", now + 20, fired.set)  # earlier than the task's sleep: it wakes for it
    await asyncio.wait_for(fired.wait(), 10)
    assert len(s) == 1
    await s.close()
    s.schedule("after-close", now, lambda: None)
    assert len(s) == 0
