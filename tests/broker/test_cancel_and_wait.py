"""cancel_and_wait ends a task even when one cancellation is swallowed (CPython gh-86296)."""

import asyncio
import contextlib

from reference_broker.network.tasks import cancel_and_wait


def test_a_task_that_swallows_a_cancellation_still_ends():
    async def stubborn(started: asyncio.Event) -> None:
        started.set()
        # What a racing wait_for does: carry on as if not cancelled.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(3600)

    async def main() -> bool:
        started = asyncio.Event()
        task = asyncio.create_task(stubborn(started))
        await started.wait()
        await asyncio.wait_for(cancel_and_wait(task), 5)
        return task.done()

    assert asyncio.run(main())


def test_nothing_to_cancel():
    asyncio.run(cancel_and_wait(None))
