"""cancel_and_wait ends a task even when one cancellation is swallowed (CPython gh-86296)."""

import asyncio
import contextlib
import gc

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


def test_nothing_to_cancel_returns_at_once():
    async def main() -> None:
        await asyncio.wait_for(cancel_and_wait(None), 1)

    asyncio.run(main())


def test_a_task_that_already_failed_is_left_as_it_ended_and_its_error_not_logged():
    """A task that ended with an error is not cancelled, and its exception counts as retrieved
    (asyncio would otherwise log "Task exception was never retrieved" when it is collected)."""
    reported: list[dict] = []

    async def boom() -> None:
        raise RuntimeError("failed on its own")

    async def main() -> tuple[bool, bool]:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context:
                                                         reported.append(context))
        task = asyncio.create_task(boom())
        await asyncio.wait([task])
        await cancel_and_wait(task)
        ended = (task.done(), task.cancelled())
        del task
        gc.collect()
        return ended

    assert asyncio.run(main()) == (True, False)
    assert reported == []
