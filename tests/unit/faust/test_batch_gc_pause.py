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
