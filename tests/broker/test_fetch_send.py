"""A Fetch response larger than the socket takes at once still arrives whole and in order.

The socket layer sends a response's log regions with os.sendfile straight away when nothing
waits in the transport's buffer, and hands the rest of a region the socket could not take to
its asynchronous sender. A reader that waits before reading, behind a small receive buffer,
makes the first sendfile stop part-way; the response must still decode, with every batch's
CRC intact, and the next response on the same connection must follow it.
"""

import socket
import time

from harness.raw_client import RawClient
from harness.wire.records import build_batch, compute_crc, iter_headers

from .conftest import create_topic

PRODUCE, FETCH = 0, 1
# ~0.8 MB a batch, ~5.6 MB in all: more than the 4 MiB a send buffer grows to.
BATCHES, RECORDS, VALUE = 7, 800, b"v" * 1000


def _fetch_body(topic: str, offset: int) -> dict:
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 64 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 64 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def test_a_response_bigger_than_the_socket_buffer_arrives_whole(broker):
    topic = create_topic(broker.bootstrap)
    with RawClient(broker.host, broker.port) as producer:
        for _ in range(BATCHES):
            batch = build_batch([(None, VALUE)] * RECORDS)
            response = producer.request(PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout": 10_000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": 0, "records": batch}]}]})
            assert response.responses[0].partition_responses[0].error_code == 0
    with RawClient(broker.host, broker.port) as reader:
        reader._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        first = reader.send(FETCH, 11, _fetch_body(topic, 0))
        second = reader.send(FETCH, 11, _fetch_body(topic, BATCHES * RECORDS - 1))
        time.sleep(0.5)  # the broker fills what the socket takes and must wait for the rest
        for correlation, first_offset, batches in ((first, 0, BATCHES),
                                                   (second, (BATCHES - 1) * RECORDS, 1)):
            got, response = reader.receive(FETCH, 11)
            assert got == correlation
            records = response.responses[0].partitions[0].records
            headers = list(iter_headers(records))
            assert [h.base_offset for h in headers] == [
                first_offset + i * RECORDS for i in range(batches)]
            assert sum(h.position + h.size == len(records) for h in headers[-1:]) == 1
            for h in headers:
                assert h.records_count == RECORDS
                assert compute_crc(records, h.position, h.size) == h.crc
