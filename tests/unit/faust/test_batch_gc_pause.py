"""A join's batch pauses the cyclic collector, awaits included, and resumes it after."""

from __future__ import annotations

import asyncio
import gc

from streamjoin._gc import gc_paused_async


async def test_overlapping_batches_resume_the_collector_when_the_last_one_ends() -> None:
    seen: list[bool] = []
    first_in = asyncio.Event()
    second_done = asyncio.Event()

    async def first() -> None:
        async with gc_paused_async():
            first_in.set()
            await second_done.wait()
            seen.append(gc.isenabled())  # the second ended: still paused for this one

    async def second() -> None:
        await first_in.wait()
        async with gc_paused_async():
            seen.append(gc.isenabled())
        second_done.set()

    assert gc.isenabled()
    await asyncio.gather(first(), second())
    assert seen == [False, False]
    assert gc.isenabled()


async def test_a_collector_off_before_the_batch_stays_off() -> None:
    gc.disable()
    try:
        async with gc_paused_async():
            await asyncio.sleep(0)
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_an_error_in_the_batch_still_resumes_the_collector() -> None:
    try:
        async with gc_paused_async():
            raise RuntimeError("batch failed")
    except RuntimeError:
        pass
    assert gc.isenabled()


async def test_under_load_the_collector_stays_off_between_batches_and_runs_on_schedule() -> None:
    """With *every*, batches in a row keep the collector off between them; the
    last pause to end collects the young generations once *every* s and all of
    them once *full_every* s; with no batch for *every* s it runs on its own again."""
    collected: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        between: list[bool] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + 0.65
        while loop.time() < end:  # bounded: 0.65 s of back-to-back batches
            async with gc_paused_async(every=0.1, full_every=0.3):
                await asyncio.sleep(0.01)
            between.append(gc.isenabled())
        assert not any(between), "the collector ran on its own between batches"
        assert 2 <= collected.count(1) <= 7, collected  # ~every 0.1 s (some were full)
        assert 1 <= collected.count(2) <= 3, collected  # ~every 0.3 s
        assert 0 not in collected  # nothing but the scheduled collections
        await asyncio.sleep(0.25)  # no batch for longer than *every*
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(seen)
        gc.enable()


async def test_a_collector_off_before_scheduled_batches_stays_off() -> None:
    gc.disable()
    try:
        async with gc_paused_async(every=0.05, full_every=0.1):
            await asyncio.sleep(0)
        await asyncio.sleep(0.12)
        assert not gc.isenabled()
    finally:
        gc.enable()
