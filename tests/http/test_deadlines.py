"""`within`: the delivery path's deadlines, kept by one timer per event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from hookinbox._receiver._deadlines import TICK, within


async def _sleep_within(limit: float | None, sleep: float) -> str:
    async with within(limit):
        await asyncio.sleep(sleep)
    return "finished"


def test_a_block_that_ends_in_time_is_left_alone() -> None:
    assert asyncio.run(_sleep_within(1.0, 0.01)) == "finished"


def test_no_deadline_never_expires() -> None:
    assert asyncio.run(_sleep_within(None, 0.1)) == "finished"


def test_a_late_block_gets_timeout_error_at_most_a_tick_late() -> None:
    async def late() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await _sleep_within(0.1, 5)
        return time.monotonic() - started

    elapsed = asyncio.run(late())
    assert 0.1 <= elapsed < 0.1 + TICK + 0.2  # slack for a loaded machine


def test_only_the_overdue_tasks_of_many_are_stopped_and_the_task_goes_on() -> None:
    async def both() -> list[object]:
        short = [_sleep_within(0.05, 1) for _ in range(50)]
        long = [_sleep_within(2, 0.2) for _ in range(50)]
        results = await asyncio.gather(*short, *long, return_exceptions=True)
        # After its timeout the task is not left cancelled: it can await again.
        await asyncio.sleep(0.01)
        return results

    results = asyncio.run(both())
    assert all(isinstance(r, TimeoutError) for r in results[:50])
    assert results[50:] == ["finished"] * 50


def test_a_cancellation_from_elsewhere_is_not_turned_into_a_timeout() -> None:
    async def cancelled_from_outside() -> None:
        task = asyncio.create_task(_sleep_within(5, 5))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_from_outside())


def test_each_event_loop_keeps_its_own_deadlines() -> None:
    # A second loop (another server thread, a test's loop) starts its own timer.
    for _ in range(2):
        with pytest.raises(TimeoutError):
            asyncio.run(_sleep_within(0.05, 1))
