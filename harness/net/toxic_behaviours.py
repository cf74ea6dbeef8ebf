"""What each toxic type does to the bytes of one direction of one connection.

Each behaviour is a coroutine that pulls chunks from its stage, and pushes them on (changed,
delayed, split or dropped) until the stream ends. The stage it runs in (see
:mod:`harness.net.link`) can cancel it at any await point to swap the toxic's settings or take
it out of the chain; before each await a behaviour therefore calls ``hold`` with whatever it
has taken but not yet passed on, so an interruption forwards those bytes instead of losing them.

Semantics follow Toxiproxy's toxics; where they differ it is said at the behaviour.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class Chunk:
    """Bytes read in one go from a socket, with the loop time they are due to move on."""

    data: bytes
    timestamp: float


class StagePort(Protocol):
    """What a behaviour may do; implemented by :class:`harness.net.link.Stage`."""

    state: dict[str, int]

    async def receive(self) -> Chunk | None:
        """The next chunk, or ``None`` once the stream has ended."""

    def emit(self, chunk: Chunk) -> None:
        """Pass a chunk on to the next toxic (or the socket)."""

    def hold(self, chunk: Chunk | None) -> None:
        """Remember bytes taken but not yet emitted, to forward them if interrupted."""

    def discard(self, chunk: Chunk) -> None:
        """Drop a chunk on the floor."""

    def close(self) -> None:
        """End the stream here; the connection closes once the close reaches the socket."""

    def reset(self) -> None:
        """Abort the whole connection with a TCP RST on both sockets."""


Behaviour = Callable[[StagePort, Mapping[str, int]], Awaitable[None]]


def _now() -> float:
    return asyncio.get_running_loop().time()


async def noop(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Pass everything through; also what a toxic does on a connection its toxicity spared."""
    while (chunk := await stage.receive()) is not None:
        stage.emit(chunk)
    stage.close()


async def latency(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Delay each chunk by ``latency`` ms, plus or minus up to ``jitter`` ms (uniform).

    The delay counts from when the chunk became due here (its timestamp), not from when this
    toxic got to it, so a burst is not delayed once per chunk; after the wait the chunk's
    timestamp moves on by the delay, so chained latency toxics add up.
    """
    while (chunk := await stage.receive()) is not None:
        jitter = attributes["jitter"]
        delay_ms = attributes["latency"] + (random.uniform(-jitter, jitter) if jitter else 0)
        due = chunk.timestamp + max(delay_ms, 0) / 1000
        wait = due - _now()
        if wait > 0:
            stage.hold(chunk)
            await asyncio.sleep(wait)
            stage.hold(None)
        chunk.timestamp = due
        stage.emit(chunk)
    stage.close()


async def bandwidth(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Let at most ``rate`` KB/s (1 KB = 1000 bytes, as Toxiproxy counts) through; 0 = no limit.

    Large chunks go out in slices of 100 ms worth of bytes so the receiver sees a steady trickle
    rather than long silences. The schedule restarts after an idle spell: no burst credit.
    """
    rate = attributes["rate"]
    free_at = _now()
    while (chunk := await stage.receive()) is not None:
        if rate == 0:
            stage.emit(chunk)
            continue
        data = chunk.data
        while data:
            piece, data = data[: rate * 100], data[rate * 100 :]
            free_at = max(free_at, _now()) + len(piece) / (rate * 1000)
            stage.hold(Chunk(piece + data, chunk.timestamp))
            await asyncio.sleep(free_at - _now())
            stage.hold(Chunk(data, chunk.timestamp) if data else None)
            stage.emit(Chunk(piece, chunk.timestamp))
    stage.close()


async def slow_close(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Pass data through, but wait ``delay`` ms before passing the close on."""
    while (chunk := await stage.receive()) is not None:
        stage.emit(chunk)
    await asyncio.sleep(attributes["delay"] / 1000)
    stage.close()


async def timeout(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Drop all data; close the connection once ``timeout`` ms pass without data (0 = never).

    The timer re-arms on every chunk, as Toxiproxy's Go implementation does (its documentation
    only says "after timeout"): a client that keeps talking into the void is held, and closed
    ``timeout`` ms after it falls silent. Removing the toxic closes the connections it held
    (see ``Link.remove``).
    """
    limit_ms = attributes["timeout"]
    while True:
        try:
            async with asyncio.timeout(limit_ms / 1000 if limit_ms else None):
                chunk = await stage.receive()
        except TimeoutError:
            break
        if chunk is None:
            break
        stage.discard(chunk)
    stage.close()


async def reset_peer(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """On the first data (or close) in this direction, wait ``timeout`` ms, then reset with RST.

    As in Toxiproxy, the triggering chunk is dropped and nothing passes during the wait; a
    connection that never sends in this direction is never reset.
    """
    chunk = await stage.receive()
    if chunk is not None:
        stage.discard(chunk)
    await asyncio.sleep(attributes["timeout"] / 1000)
    stage.reset()


async def slicer(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Cut each chunk into writes of ``average_size`` +/- ``size_variation`` bytes.

    ``delay`` microseconds pass after each slice, so the receiver sees the slices as separate
    reads, the way a slow or fragmenting network delivers them.
    """
    average, variation = attributes["average_size"], attributes["size_variation"]
    pause = attributes["delay"] / 1_000_000
    while (chunk := await stage.receive()) is not None:
        data = chunk.data
        while data:
            size = average + random.randint(-variation, variation)
            piece, data = data[:size], data[size:]
            stage.emit(Chunk(piece, chunk.timestamp))
            stage.hold(Chunk(data, chunk.timestamp) if data else None)
            await asyncio.sleep(pause)
        stage.hold(None)
    stage.close()


async def limit_data(stage: StagePort, attributes: Mapping[str, int]) -> None:
    """Close the connection once ``bytes`` bytes have passed, cutting the chunk that crosses it.

    The count lives in the stage's state, so changing the limit on a live connection keeps
    what was already sent.
    """
    limit = attributes["bytes"]
    state = stage.state
    state.setdefault("sent", 0)
    while (chunk := await stage.receive()) is not None:
        room = max(limit - state["sent"], 0)
        if len(chunk.data) > room:
            stage.discard(Chunk(chunk.data[room:], chunk.timestamp))
            chunk = Chunk(chunk.data[:room], chunk.timestamp)
        if chunk.data:
            state["sent"] += len(chunk.data)
            stage.emit(chunk)
        if state["sent"] >= limit:
            break
    stage.close()


BEHAVIOURS: dict[str, Behaviour] = {
    "noop": noop,
    "latency": latency,
    "bandwidth": bandwidth,
    "slow_close": slow_close,
    "timeout": timeout,
    "reset_peer": reset_peer,
    "slicer": slicer,
    "limit_data": limit_data,
}
