"""The transaction marker channel against leaders played by in-test TCP responders.

Each responder is a socket server speaking the Kafka protocol through harness.wire: it records
every WriteTxnMarkers request it receives and answers each partition as the test scripts. The
channel must send each partition's marker to the leader the metadata cache names, retry
NOT_LEADER_OR_FOLLOWER with the metadata as it is by then, drop partitions of deleted topics,
and give up on a marker a leader refuses as stale — returning only once every marker is done.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable

from harness.wire import protocol
from harness.wire.errors import ErrorCode
from reference_broker.server.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionInfo,
    TopicInfo,
)
from reference_broker.server.transaction_marker_channel import (
    WRITE_TXN_MARKERS,
    WRITE_TXN_MARKERS_VERSION,
    TransactionMarkerChannelManager,
)

Answer = Callable[[str, int], ErrorCode]


class Leader:
    """A broker that answers WriteTxnMarkers with `answer(topic, partition)` per partition."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[protocol.Request] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()
        self.port = 0

    async def __aenter__(self) -> Leader:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = protocol.decode_request(await reader.readexactly(size))
                self.requests.append(request)
                markers = [{"producer_id": m.producer_id, "topics": [
                    {"name": t.name, "partitions": [
                        {"partition_index": p, "error_code": self.answer(t.name, p)}
                        for p in t.partition_indexes]} for t in m.topics]}
                    for m in request.body.markers]
                writer.write(protocol.encode_response(
                    request.api_key, request.api_version, request.correlation_id,
                    {"markers": markers}))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)


def topic(name: str, leaders: dict[int, int]) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), {
        p: PartitionInfo(p, leader, 3, (1, 2), (1, 2)) for p, leader in leaders.items()})


def sent(leader: Leader) -> list[tuple[int, int, bool, int, list[tuple[str, int]]]]:
    return [(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
             [(t.name, p) for t in m.topics for p in t.partition_indexes])
            for r in leader.requests for m in r.body.markers]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_markers_go_to_each_leader_and_follow_a_moved_leadership():
    cache = MetadataCache("c", controller_id=1)
    cache.put_topic(topic("a", {0: 1, 1: 1}))
    cache.put_topic(topic("b", {0: 2}))

    def first_answer(name: str, partition: int) -> ErrorCode:
        if (name, partition) == ("a", 1):
            # The partition moved to broker 2; the controller's UpdateMetadata says so.
            cache.put_topic(topic("a", {0: 1, 1: 2}))
            return ErrorCode.not_leader_or_follower
        return ErrorCode.none

    async def main() -> None:
        async with Leader(first_answer) as one, Leader(lambda t, p: ErrorCode.none) as two:
            cache.set_brokers([BrokerEndpoint(1, "127.0.0.1", one.port),
                               BrokerEndpoint(2, "127.0.0.1", two.port)])
            ports = {1: one.port, 2: two.port}
            channel = TransactionMarkerChannelManager(
                0, cache, lambda b: ("127.0.0.1", ports[b]), lambda tid: 7,
                retry_backoff_s=0.01)
            try:
                await channel.write_markers("t", 42, 3, True,
                                            frozenset({("a", 0), ("a", 1), ("b", 0)}))
            finally:
                await channel.shutdown()
            assert [r.api_version for r in one.requests + two.requests] == \
                [WRITE_TXN_MARKERS_VERSION] * 3
            assert {r.api_key for r in one.requests + two.requests} == {WRITE_TXN_MARKERS}
            assert sent(one) == [(42, 3, True, 7, [("a", 0), ("a", 1)])]
            assert sorted(sent(two)) == [(42, 3, True, 7, [("a", 1)]),
                                         (42, 3, True, 7, [("b", 0)])]

    run(main())


def test_a_deleted_topic_needs_no_marker_and_a_stale_epoch_is_given_up():
    cache = MetadataCache("c", controller_id=1)
    cache.put_topic(topic("a", {0: 1}))
    cache.put_topic(topic("gone", {0: 1}))
    cache.remove_topic("gone")

    async def main() -> None:
        async with Leader(lambda t, p: ErrorCode.transaction_coordinator_fenced) as one:
            channel = TransactionMarkerChannelManager(
                0, cache, lambda b: ("127.0.0.1", one.port), lambda tid: 0,
                retry_backoff_s=0.01)
            try:
                await channel.write_markers("t", 5, 0, False,
                                            frozenset({("a", 0), ("gone", 0)}))
            finally:
                await channel.shutdown()
            assert sent(one) == [(5, 0, False, 0, [("a", 0)])]

    run(main())


def test_an_unreachable_leader_is_retried_until_it_answers():
    cache = MetadataCache("c", controller_id=1)
    cache.put_topic(topic("a", {0: 1}))

    async def main() -> None:
        async with Leader(lambda t, p: ErrorCode.none) as one:
            # The leader has no address at first; it is registered after three rounds.
            addresses: dict[int, tuple[str, int]] = {}
            lookups = []
            three_rounds = asyncio.Event()

            def address_of(broker_id: int) -> tuple[str, int] | None:
                lookups.append(broker_id)
                if len(lookups) >= 3:
                    three_rounds.set()
                return addresses.get(broker_id)

            channel = TransactionMarkerChannelManager(
                0, cache, address_of, lambda tid: 0, retry_backoff_s=0.01)
            writing = asyncio.ensure_future(
                channel.write_markers("t", 5, 0, True, frozenset({("a", 0)})))
            try:
                await three_rounds.wait()
                assert not writing.done() and one.requests == []
                addresses[1] = ("127.0.0.1", one.port)
                await writing
            finally:
                writing.cancel()
                await channel.shutdown()
            assert sent(one) == [(5, 0, True, 0, [("a", 0)])]

    run(main())
