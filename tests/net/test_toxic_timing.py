"""The built-in server's timed toxics, held to their exact figures on a virtual clock.

``test_toxic_effects`` measures toxics on live sockets, where only lower bounds are safe: a busy
machine can make anything later, never earlier. How precisely a toxic keeps to its figures
(latency within +-jitter, a bandwidth's rate, when a timeout or a slow close fires) is asserted
here instead, on the behaviours of ``harness.net.toxic_behaviours`` driven through a stand-in for
their stage on the event loop of ``tests/virtual_time.py``: the behaviours tell time only through
the loop, so these figures are exact and no load can move them.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from harness.net.toxic_behaviours import BEHAVIOURS, Chunk
from tests.virtual_time import run, settle


class RecordingStage:
    """What a behaviour sees of its stage: an input queue; what it emits and when it closes
    are recorded with the loop's (virtual) time."""

    def __init__(self) -> None:
        self.state: dict[str, int] = {}
        self.input: asyncio.Queue[Chunk | None] = asyncio.Queue()
        self.emitted: list[tuple[float, bytes]] = []
        self.emission = asyncio.Event()  # set at each emit
        self.closed_at: float | None = None

    async def receive(self) -> Chunk | None:
        return await self.input.get()

    def send(self, data: bytes | None) -> float:
        """Hand the behaviour a chunk stamped now (None: the stream ends); returns now."""
        now = asyncio.get_running_loop().time()
        self.input.put_nowait(None if data is None else Chunk(data, now))
        return now

    def emit(self, chunk: Chunk) -> None:
        self.emitted.append((asyncio.get_running_loop().time(), chunk.data))
        self.emission.set()

    def hold(self, chunk: Chunk | None) -> None:
        pass

    def discard(self, chunk: Chunk) -> None:
        pass

    def close(self) -> None:
        self.closed_at = asyncio.get_running_loop().time()

    def reset(self) -> None:
        raise AssertionError("no timed toxic resets")


def start(kind: str, attributes: dict[str, int]) -> tuple[RecordingStage, asyncio.Task[None]]:
    stage = RecordingStage()
    return stage, asyncio.create_task(BEHAVIOURS[kind](stage, attributes))


@pytest.fixture
def seeded_random():
    """The behaviours roll ``random``'s module-level generator: seeded, then put back."""
    saved = random.getstate()
    random.seed(18)
    yield
    random.setstate(saved)


def test_latency_delays_each_chunk_by_latency_plus_or_minus_jitter(seeded_random):
    async def scenario() -> list[float]:
        stage, task = start("latency", {"latency": 100, "jitter": 20})
        delays = []
        for i in range(200):  # one chunk at a time, each sent when the previous came out
            stage.emission.clear()
            sent = stage.send(b"%d" % i)
            await stage.emission.wait()
            delays.append(stage.emitted[i][0] - sent)
        stage.send(None)
        await task
        return delays

    delays = run(scenario())
    assert all(0.080 <= d <= 0.120 for d in delays), (min(delays), max(delays))
    assert min(delays) < 0.085 and max(delays) > 0.115, "the jitter spreads the delays"


def test_bandwidth_keeps_to_its_rate():
    async def scenario() -> tuple[float, list[tuple[float, bytes]]]:
        stage, task = start("bandwidth", {"rate": 100})  # KB/s
        sent = stage.send(b"b" * 200_000)
        stage.send(None)
        await task
        return sent, stage.emitted

    sent, emitted = run(scenario())
    assert b"".join(data for _, data in emitted) == b"b" * 200_000
    # 100 ms worth of bytes at a time, each slice when the rate allows it: 200 KB take 2 s.
    assert [len(data) for _, data in emitted] == [10_000] * 20
    assert [round(at - sent, 6) for at, _ in emitted] \
        == [round(0.1 * n, 6) for n in range(1, 21)]


def test_slicer_cuts_average_plus_or_minus_variation_with_its_pause(seeded_random):
    async def scenario() -> tuple[float, list[tuple[float, bytes]]]:
        stage, task = start("slicer", {"average_size": 100, "size_variation": 20,
                                       "delay": 5000})  # microseconds
        sent = stage.send(bytes(range(200)) * 10)
        stage.send(None)
        await task
        return sent, stage.emitted

    sent, emitted = run(scenario())
    sizes = [len(data) for _, data in emitted]
    assert b"".join(data for _, data in emitted) == bytes(range(200)) * 10
    assert all(80 <= size <= 120 for size in sizes[:-1]) and 0 < sizes[-1] <= 120, sizes
    assert len(set(sizes)) > 1, "the sizes vary"
    # A slice, then 5 ms, then the next one.
    assert [round(at - sent, 6) for at, _ in emitted] \
        == [round(0.005 * n, 6) for n in range(len(emitted))]


def test_timeout_closes_exactly_timeout_after_the_last_chunk():
    async def scenario() -> tuple[float, float | None, int]:
        stage, task = start("timeout", {"timeout": 400})
        last = 0.0
        for _ in range(20):  # a chunk every 50 ms for a second: each re-arms the timer
            last = stage.send(b"still here")
            await asyncio.sleep(0.05)
            assert stage.closed_at is None
        await task
        return last, stage.closed_at, len(stage.emitted)

    last, closed_at, emitted = run(scenario())
    assert emitted == 0, "a timeout toxic drops all data"
    assert closed_at is not None and closed_at - last == pytest.approx(0.4)


def test_slow_close_passes_data_at_once_and_the_close_after_its_delay():
    async def scenario() -> tuple[float, list[tuple[float, bytes]], float, float | None]:
        stage, task = start("slow_close", {"delay": 300})
        sent = stage.send(b"data")
        await settle(lambda: bool(stage.emitted), "the data passed on")
        ended = stage.send(None)
        await task
        return sent, stage.emitted, ended, stage.closed_at

    sent, emitted, ended, closed_at = run(scenario())
    assert emitted == [(sent, b"data")], "data is not delayed at all"
    assert closed_at is not None and closed_at - ended == pytest.approx(0.3)
