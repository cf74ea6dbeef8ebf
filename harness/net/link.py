"""One proxied TCP connection: two directions, each a chain of toxics between two sockets.

Shape, as in Toxiproxy::

    client socket --pump--> [toxic] -> [toxic] -> tail --deliver--> upstream socket  (upstream)
    client socket <--deliver-- tail <- [toxic] <--pump-- upstream socket            (downstream)

Each toxic runs as a :class:`Stage` with its own input queue, so toxics pipeline (a latency
toxic and a bandwidth toxic overlap instead of adding up). A stage finds its output by looking
up the next stage at the moment it emits; adding, changing or removing a toxic on a live
connection is therefore a synchronous list edit plus, for change and removal, interrupting the
one stage concerned. Queues are unbounded; back-pressure comes from a byte budget per
direction: the pump stops reading its socket while too many bytes are inside the chain, so a
slow toxic slows the sender down the way a slow network would.

A direction ends when the close reaches its tail: the destination socket is closed, which makes
the other direction's pump read end-of-stream from it, so the close travels round through the
other chain too. When both directions have ended the connection is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import struct
from collections.abc import Iterable, Mapping

from harness.net.toxic_behaviours import BEHAVIOURS, Behaviour, Chunk
from harness.net.toxics import Stream, Toxic

READ_SIZE = 32 * 1024
MAX_IN_FLIGHT = 4 * 1024 * 1024
CLOSE_GRACE_SECONDS = 1.0

log = logging.getLogger(__name__)


class Stage:
    """One toxic running on one direction of one connection (implements ``StagePort``)."""

    def __init__(self, link: Link, toxic: Toxic) -> None:
        self.link = link
        self.toxic = toxic
        self.input: asyncio.Queue[Chunk | None] = asyncio.Queue()
        self.state: dict[str, int] = {}
        self.active = False
        self.closed = False
        self._held: Chunk | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the toxic, or a pass-through if this connection's roll spares it.

        The roll against ``toxicity`` happens here, once per connection and direction; it is
        rolled again only when the toxic is updated, as Toxiproxy does when it restarts one.
        """
        self.active = random.random() < self.toxic.toxicity
        behaviour = BEHAVIOURS[self.toxic.type if self.active else "noop"]
        self._task = asyncio.create_task(self._run(behaviour, self.toxic.attributes))

    async def _run(self, behaviour: Behaviour, attributes: Mapping[str, int]) -> None:
        try:
            await behaviour(self, attributes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("toxic %s failed; closing its connection", self.toxic.name)
            self.link.connection.close()

    async def interrupt(self) -> None:
        """Stop the behaviour; bytes it had taken but not passed on go on unchanged."""
        await self.cancel()
        if self._held is not None and not self.closed:
            self.emit(self._held)
        self._held = None

    async def cancel(self) -> None:
        """Stop the behaviour and wait until it has stopped.

        ``asyncio.wait`` rather than awaiting the task, so the task's own cancellation is not
        confused with a cancellation of the caller, which must still propagate.
        """
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])

    async def receive(self) -> Chunk | None:
        return await self.input.get()

    def emit(self, chunk: Chunk) -> None:
        self.link.queue_after(self).put_nowait(chunk)

    def hold(self, chunk: Chunk | None) -> None:
        self._held = chunk

    def discard(self, chunk: Chunk) -> None:
        self.link.release(len(chunk.data))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.link.queue_after(self).put_nowait(None)

    def reset(self) -> None:
        self.link.connection.reset()


class Link:
    """One direction of a connection: source socket -> toxics -> destination socket."""

    def __init__(
        self,
        connection: Connection,
        source: asyncio.StreamReader,
        destination: asyncio.StreamWriter,
        toxics: Iterable[Toxic],
    ) -> None:
        self.connection = connection
        self.source = source
        self.destination = destination
        self.stages = [Stage(self, toxic) for toxic in toxics]
        self.tail: asyncio.Queue[Chunk | None] = asyncio.Queue()
        self._in_flight = 0
        self._room = asyncio.Event()
        self._room.set()

    def queue_after(self, stage: Stage) -> asyncio.Queue[Chunk | None]:
        index = self.stages.index(stage) + 1
        return self.stages[index].input if index < len(self.stages) else self.tail

    def _entry(self) -> asyncio.Queue[Chunk | None]:
        return self.stages[0].input if self.stages else self.tail

    def release(self, size: int) -> None:
        self._in_flight -= size
        if self._in_flight < MAX_IN_FLIGHT:
            self._room.set()

    async def pump(self) -> None:
        """Read the source socket into the chain until it ends, pausing while the chain is full."""
        loop = asyncio.get_running_loop()
        while True:
            await self._room.wait()
            try:
                data = await self.source.read(READ_SIZE)
            except ConnectionError:
                data = b""
            if not data:
                self._entry().put_nowait(None)
                return
            self._in_flight += len(data)
            if self._in_flight >= MAX_IN_FLIGHT:
                self._room.clear()
            self._entry().put_nowait(Chunk(data, loop.time()))

    async def deliver(self) -> None:
        """Write what leaves the chain to the destination; close it when the chain closes.

        Cancelled (the connection is being closed by force), it leaves the socket to
        ``Connection``, which may have to reset it rather than close it.
        """
        try:
            while (chunk := await self.tail.get()) is not None:
                self.destination.write(chunk.data)
                await self.destination.drain()
                self.release(len(chunk.data))
        except ConnectionError:
            pass
        self.destination.close()

    def start(self) -> None:
        for stage in self.stages:
            stage.start()

    async def stop(self) -> None:
        for stage in self.stages:
            await stage.cancel()

    def add(self, toxic: Toxic) -> None:
        """Append a toxic; the stage before it now emits into the new one."""
        stage = Stage(self, toxic)
        self.stages.append(stage)
        if not self.connection.ending:
            stage.start()

    async def update(self, toxic: Toxic) -> None:
        stage = self._stage(toxic.name)
        if stage.closed or self.connection.ending:
            stage.toxic = toxic
            return
        await stage.interrupt()
        stage.toxic = toxic
        stage.start()

    async def remove(self, name: str) -> None:
        """Take a toxic out of the chain, passing on what it held and what queued for it.

        A timeout toxic that was holding this connection closes it instead, as Toxiproxy's
        does: the client has seen nothing for a while and must not get stale bytes now.
        """
        stage = self._stage(name)
        await stage.interrupt()
        if stage.active and stage.toxic.type == "timeout":
            stage.close()
        elif not stage.closed:
            following = self.queue_after(stage)
            while not stage.input.empty():
                following.put_nowait(stage.input.get_nowait())
        self.stages.remove(stage)

    def _stage(self, name: str) -> Stage:
        return next(stage for stage in self.stages if stage.toxic.name == name)


class Connection:
    """A client connection and its upstream connection, joined by two links."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        toxics: Iterable[Toxic],
    ) -> None:
        chain = list(toxics)
        self._writers = (client[1], upstream[1])
        self.links = {
            Stream.UPSTREAM: Link(
                self, client[0], upstream[1], [t for t in chain if t.stream is Stream.UPSTREAM]
            ),
            Stream.DOWNSTREAM: Link(
                self, upstream[0], client[1], [t for t in chain if t.stream is Stream.DOWNSTREAM]
            ),
        }
        self._task: asyncio.Task[None] | None = None
        self._rst = False
        self.ending = False

    async def run(self) -> None:
        """Carry bytes both ways until both directions have closed, or until closed by force."""
        self._task = asyncio.current_task()
        workers: list[asyncio.Task[None]] = []
        try:
            for link in self.links.values():
                link.start()
                workers.append(asyncio.create_task(link.pump()))
            deliveries = [asyncio.create_task(link.deliver()) for link in self.links.values()]
            workers.extend(deliveries)
            await asyncio.gather(*deliveries)
        finally:
            self.ending = True
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for link in self.links.values():
                await link.stop()
            await asyncio.gather(*(self._shut(writer) for writer in self._writers))

    def close(self) -> None:
        """Close both sockets now (a proxy going down)."""
        if self._task is not None:
            self._task.cancel()

    def reset(self) -> None:
        """Close both sockets with an RST instead of a FIN.

        SO_LINGER with a zero timeout makes the kernel send RST when the socket is closed; it
        is set here, before anything can close the sockets the ordinary way.
        """
        self._rst = True
        for writer in self._writers:
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    async def _shut(self, writer: asyncio.StreamWriter) -> None:
        """Close one socket: at once if forced or reset, else let a graceful close finish."""
        transport = writer.transport
        if self._rst or not transport.is_closing():
            transport.abort()
        try:
            async with asyncio.timeout(CLOSE_GRACE_SECONDS):
                await writer.wait_closed()
        except TimeoutError:
            transport.abort()
        except (ConnectionError, OSError):
            pass
