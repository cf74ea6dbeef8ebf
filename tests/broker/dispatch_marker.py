"""Proof that the broker has read what a connection sent so far, without sleeping."""

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.records import build_batch
from tests.broker.conftest import create_topic

PRODUCE, LIST_OFFSETS = 0, 2
WAIT_S = 10  # generous: a pipelined produce is appended in milliseconds on an idle machine


class Marker:
    """Proof that the broker has read what a connection sent so far.

    The broker dispatches the requests of one connection in the order they arrive, starting
    each before it reads the next. So a produce to a topic of the test's own, pipelined behind
    some requests: once an observer connection sees it appended, every request sent before it on
    that connection has been handed to its handler. Its answer comes after theirs (answers keep
    request order), and :meth:`answered` reads it."""

    def __init__(self, broker, observer: RawClient) -> None:
        self.topic = create_topic(broker.bootstrap)
        self.observer = observer
        self.sent = 0

    def send(self, conn: RawClient) -> None:
        conn.send(PRODUCE, 9, {"acks": 1, "timeout": 5000, "topic_data": [
            {"name": self.topic, "partition_data": [
                {"index": 0, "records": build_batch([(None, b"marker")])}]}]})
        self.sent += 1

    def wait_seen(self) -> None:
        wait_for(lambda: self._end_offset() >= self.sent, WAIT_S,
                 f"marker {self.sent} to be appended to {self.topic}")

    def answered(self, conn: RawClient) -> None:
        _, response = conn.receive(PRODUCE, 9)
        (answer,) = response.responses[0].partition_responses
        assert answer.error_code == ErrorCode.none, answer

    def _end_offset(self) -> int:
        answer = self.observer.request(LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": self.topic,
                "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        return answer.topics[0].partitions[0].offset
