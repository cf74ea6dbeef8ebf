"""Stopping asyncio tasks reliably.

On Python 3.11 ``asyncio.wait_for`` can swallow a cancellation that arrives just as the awaited
future completes (CPython gh-86296): the task carries on as if never cancelled. A loop that
awaits ``wait_for`` — a request with a timeout, then the next item of a queue — then never ends,
and whoever awaits it after ``cancel()`` hangs. Cancelling again until the task is done closes
that window without relying on the task's cooperation twice.
"""

from __future__ import annotations

import asyncio

RECANCEL_INTERVAL_S = 0.5


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel `task` (again, while it keeps running) and return once it has finished."""
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=RECANCEL_INTERVAL_S)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
