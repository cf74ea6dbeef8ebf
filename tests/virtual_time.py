"""An asyncio event loop on a virtual clock, for code that tells time only through its loop.

``loop.time()`` is virtual: it stands still while anything is ready to run and, once nothing is,
jumps straight to the next timer. So ``call_later`` timers, ``asyncio.sleep`` and timeouts fire
in exactly the order and at exactly the (virtual) times the code under test asked for, however
loaded the machine is, and a test may assert those times exactly. Timers never wait for real
time, so a scenario of seconds runs in milliseconds.

Real I/O still works (the selector is polled without waiting first); only a loop with nothing
scheduled at all waits for real, for another thread to wake it — as ``asyncio.Runner`` does
when it shuts down its default executor — and gives up after :data:`REAL_WAIT_LIMIT_S`.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

START_S = 1_000_000.0  # far from 0, so that timestamps derived from the clock are unremarkable
REAL_WAIT_LIMIT_S = 30.0
SETTLE_STEPS = 10_000


class _JumpingSelector(selectors.BaseSelector):
    """A selector that reports real readiness at once and turns any wait into a clock jump."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._real = selectors.DefaultSelector()
        self._loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only another thread can wake the loop
            ready = self._real.select(REAL_WAIT_LIMIT_S)
            if not ready:
                raise RuntimeError(f"the event loop waited {REAL_WAIT_LIMIT_S:.0f}s (real) with "
                                   "nothing scheduled: the scenario awaits something that "
                                   "never happens")
            return ready
        self._loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual_now = START_S
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(coroutine)


def clock_ms() -> int:
    """The running loop's clock in milliseconds: an injectable ``now_ms`` that follows the
    virtual clock."""
    return int(asyncio.get_running_loop().time() * 1000)


async def settle(condition: Callable[[], bool], what: str) -> None:
    """Let ready tasks run, without the clock moving, until ``condition()`` holds; an
    AssertionError naming ``what`` if it does not once they have had :data:`SETTLE_STEPS`
    turns of the loop."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(SETTLE_STEPS):
        if condition():
            assert loop.time() == started, "settle() is for conditions that need no time"
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{what}: not reached after {SETTLE_STEPS} turns of the event loop")
