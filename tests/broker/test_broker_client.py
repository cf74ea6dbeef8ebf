"""BrokerClient against a scripted asyncio peer (failures on demand) and a real reference broker."""

import asyncio
import contextlib
import random
import struct

import pytest

from harness.net.ports import free_port
from harness.wire import protocol
from reference_broker.network.broker_client import BrokerClient, BrokerClientError

SHUTDOWN = 7  # ControlledShutdown v3: a small inter-broker request with a response to match
SILENT, CLOSE = -1, -2  # broker ids the peer below treats specially


class ScriptedPeer:
    """A peer that answers ControlledShutdown v3 with `remaining_partitions=[("t", broker_id)]`.

    Each request is answered by its own task after a random delay, so responses leave out of
    request order. Broker id SILENT is never answered; CLOSE makes the peer drop the connection.
    """

    def __init__(self, max_delay: float = 0.0) -> None:
        self.max_delay = max_delay
        self.connections = 0
        self.requests: list[protocol.Request] = []
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> "ScriptedPeer":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        self.connections += 1
        self._writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = protocol.decode_request(await reader.readexactly(size))
                self.requests.append(request)
                if request.body.broker_id == CLOSE:
                    break
                if request.body.broker_id != SILENT:
                    task = asyncio.create_task(self._answer(writer, request))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._tasks.discard(asyncio.current_task())

    async def _answer(self, writer: asyncio.StreamWriter, request: protocol.Request) -> None:
        await asyncio.sleep(random.uniform(0, self.max_delay))
        body = {"error_code": 0, "remaining_partitions": [
            {"topic_name": "t", "partition_index": request.body.broker_id}]}
        if not writer.is_closing():
            writer.write(protocol.encode_response(SHUTDOWN, 3, request.correlation_id, body))


def shutdown(client: BrokerClient, broker_id: int, **kwargs):
    return client.request(SHUTDOWN, 3, {"broker_id": broker_id, "broker_epoch": 1}, **kwargs)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_pipelined_requests_are_matched_by_correlation_id():
    async def main():
        async with ScriptedPeer(max_delay=0.05) as peer:
            client = BrokerClient("127.0.0.1", peer.port, client_id="controller-0")
            try:
                ids = list(range(200))
                responses = await asyncio.gather(*(shutdown(client, i) for i in ids))
            finally:
                await client.close()
        assert [r.remaining_partitions[0].partition_index for r in responses] == ids
        assert peer.connections == 1  # concurrent first requests share one connect
        assert {r.client_id for r in peer.requests} == {"controller-0"}
        # Answers came back out of request order, and still went to the right callers.
        assert len({r.correlation_id for r in peer.requests}) == 200

    run(main())


def test_timeout_fails_every_request_in_flight_and_the_next_one_reconnects():
    async def main():
        async with ScriptedPeer() as peer:
            client = BrokerClient("127.0.0.1", peer.port, client_id="c", request_timeout_s=0.3)
            try:
                patient = asyncio.create_task(shutdown(client, SILENT, timeout_s=30))
                with pytest.raises(BrokerClientError, match=rf"127\.0\.0\.1:{peer.port}: "
                                   r"controlled_shutdown v3 .* no response within 0\.3s"):
                    await shutdown(client, SILENT)
                with pytest.raises(BrokerClientError, match="failed: .*no response"):
                    await asyncio.wait_for(patient, 5)
                assert not client.connected
                answer = await shutdown(client, 5)
                assert answer.remaining_partitions[0].partition_index == 5
                assert peer.connections == 2
            finally:
                await client.close()

    run(main())


def test_peer_closing_fails_in_flight_requests_and_the_next_request_reconnects():
    async def main():
        async with ScriptedPeer() as peer:
            client = BrokerClient("127.0.0.1", peer.port, client_id="c")
            try:
                waiting = [asyncio.create_task(shutdown(client, SILENT)) for _ in range(5)]
                await asyncio.sleep(0.05)
                with pytest.raises(BrokerClientError,
                                   match=rf"127\.0\.0\.1:{peer.port}: .*closed by peer"):
                    await shutdown(client, CLOSE)
                for task in waiting:
                    with pytest.raises(BrokerClientError, match="closed by peer"):
                        await task
                assert (await shutdown(client, 3)).remaining_partitions[0].partition_index == 3
                assert peer.connections == 2
            finally:
                await client.close()

    run(main())


def test_connect_failure_names_the_address():
    async def main():
        port = free_port()
        client = BrokerClient("127.0.0.1", port, client_id="c", connect_timeout_s=2)
        with pytest.raises(BrokerClientError, match=rf"127\.0\.0\.1:{port}: connect failed"):
            await shutdown(client, 1)
        await client.close()

    run(main())


def test_set_address_moves_the_next_request_to_the_new_peer():
    async def main():
        async with ScriptedPeer() as old, ScriptedPeer() as new:
            client = BrokerClient("127.0.0.1", old.port, client_id="c")
            try:
                await shutdown(client, 1)
                stuck = asyncio.create_task(shutdown(client, SILENT))
                await asyncio.sleep(0.05)
                client.set_address("127.0.0.1", old.port)  # unchanged: keeps the connection
                assert client.connected and not stuck.done()
                client.set_address("127.0.0.1", new.port)
                with pytest.raises(BrokerClientError, match="address changed"):
                    await stuck
                assert client.address == ("127.0.0.1", new.port)
                await shutdown(client, 2)
            finally:
                await client.close()
        assert [r.body.broker_id for r in old.requests] == [1, SILENT]
        assert [r.body.broker_id for r in new.requests] == [2]

    run(main())


def test_close_fails_in_flight_requests_and_refuses_new_ones():
    async def main():
        async with ScriptedPeer() as peer:
            client = BrokerClient("127.0.0.1", peer.port, client_id="c")
            stuck = asyncio.create_task(shutdown(client, SILENT))
            await asyncio.sleep(0.05)
            await client.close()
            with pytest.raises(BrokerClientError, match="client closed"):
                await stuck
            with pytest.raises(BrokerClientError, match="closed"):
                await shutdown(client, 1)

    run(main())


def test_a_cancelled_caller_does_not_disturb_the_others():
    async def main():
        async with ScriptedPeer(max_delay=0.1) as peer:
            client = BrokerClient("127.0.0.1", peer.port, client_id="c")
            try:
                doomed = asyncio.create_task(shutdown(client, 1))
                kept = asyncio.create_task(shutdown(client, 2))
                await asyncio.sleep(0.01)
                doomed.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await doomed
                assert (await kept).remaining_partitions[0].partition_index == 2
                assert (await shutdown(client, 3)).remaining_partitions[0].partition_index == 3
                assert peer.connections == 1
            finally:
                await client.close()

    run(main())


# --- against the real reference broker ------------------------------------------------------


def test_api_versions_and_metadata_from_the_reference_broker(broker):
    async def main():
        client = BrokerClient(broker.host, broker.port, client_id="broker-client-test")
        try:
            versions = await client.request(18, 3, {"client_software_name": "t",
                                                    "client_software_version": "1"})
            metadata = await client.request(3, 12, {"topics": None,
                                                    "allow_auto_topic_creation": False})
            many = await asyncio.gather(*(
                client.request(18, 3, {"client_software_name": "t",
                                       "client_software_version": str(i)})
                for i in range(50)))
        finally:
            await client.close()
        assert versions.error_code.value == 0
        assert 18 in {k.api_key for k in versions.api_keys}
        assert [(b.host, b.port) for b in metadata.brokers] == [(broker.host, broker.port)]
        assert all(v == versions for v in many)

    run(main())
