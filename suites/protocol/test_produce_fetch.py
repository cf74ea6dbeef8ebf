"""Produce and Fetch semantics: acks, offsets, Fetch waiting, timestamps and ListOffsets."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.waiting import wait_for
from harness.wire.records import build_batch

from ._records import batch_headers, fetched_records, values
from ._wire import (
    API_VERSIONS,
    API_VERSIONS_BODY,
    FETCH,
    PRODUCE,
    Wire,
    timestamp_ms,
)

EARLIEST, LATEST = -2, -1
INVALID_RECORD = 87
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
BOUND_S = 10.0
MAX_WAIT_MS = 600
_I32 = struct.Struct(">i")


def _wait_for_log_end(wire: Wire, topic: str, expected: int) -> int:
    """The log end offset once it reaches `expected`, or what it was when the bound ran out."""
    deadline = time.monotonic() + BOUND_S
    while True:
        offset = wire.list_offset(topic, LATEST).offset
        if offset >= expected or time.monotonic() > deadline:
            return offset
        time.sleep(0.05)


def test_acks_zero_gets_no_response_and_appends(wire: Wire, new_topic: Callable[..., str]) -> None:
    """A Produce with acks=0 gets no response at all, yet its records are appended [protocol guide, Produce: acks=0].

    The next request on the same connection must get the next response: if the broker answered
    the acks=0 Produce, its frame would arrive first with the wrong correlation id.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    leader = wire.leader(topic)
    version, body = wire.produce_request(topic, build_batch([(None, b"fire-and-forget")]),
                                         acks=0)
    produced = leader.send(PRODUCE, version, body)
    follow_up = leader.send(API_VERSIONS, wire.version(API_VERSIONS), API_VERSIONS_BODY)
    (correlation,) = _I32.unpack_from(leader.receive_frame(), 0)
    assert correlation != produced, "the broker answered an acks=0 Produce"
    assert correlation == follow_up
    assert _wait_for_log_end(wire, topic, 1) == 1
    assert values(wire.fetch(topic, 0).records) == [b"fire-and-forget"]


@pytest.mark.parametrize("acks", [1, -1], ids=["acks-1", "acks-all"])
def test_acked_produce_answers_the_offset_it_appended_at(
        wire: Wire, new_topic: Callable[..., str], acks: int) -> None:
    """A Produce with acks=1 or acks=all answers the base offset its batch was appended at [protocol guide, Produce].

    With acks=all the answer comes only once the batch is committed, so the high watermark a
    Fetch reports right after already covers it.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    answer = wire.produce(topic, build_batch([(b"k", b"v1"), (b"k", b"v2")]), acks=acks)
    assert (answer.error_code.value, answer.base_offset) == (0, 0), answer
    if acks == -1:
        high_watermark = wire.fetch(topic, 0).high_watermark
        assert high_watermark == 2, f"high watermark {high_watermark} after an acks=all Produce"
    # With acks=1 followers may still be copying: read_log waits for the high watermark.
    assert [(r.offset, r.key, r.value) for r in wire.read_log(topic, 2)] == [
        (0, b"k", b"v1"), (1, b"k", b"v2")]


def test_offsets_are_consecutive_across_batches(wire: Wire,
                                                new_topic: Callable[..., str]) -> None:
    """Each batch is appended at the log end offset and its records take consecutive offsets [protocol guide, Produce; Kafka log].

    A producer writes base offset 0 into its batches; the leader assigns the offsets.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    sizes = [1, 3, 2]
    bases = []
    for index, size in enumerate(sizes):
        batch = build_batch([(None, f"{index}-{n}".encode()) for n in range(size)])
        answer = wire.produce(topic, batch)
        assert answer.error_code.value == 0, answer
        bases.append(answer.base_offset)
    assert bases == [0, 1, 4]
    records = wire.read_log(topic, 6)
    assert [r.offset for r in records] == list(range(6))
    assert [r.value for r in records] == [b"0-0", b"1-0", b"1-1", b"1-2", b"2-0", b"2-1"]
    middle = fetched_records(wire.fetch(topic, 2).records)
    assert 2 in [r.offset for r in middle], "a Fetch from offset 2 does not return offset 2"
    assert all(r.offset >= 1 for r in middle), "a Fetch from offset 2 returned an older batch"


def test_batch_with_a_nonzero_base_offset_is_invalid_record(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A produced batch whose base offset is not 0 is refused with INVALID_RECORD and not appended [Kafka LogValidator].

    Apache Kafka 3.9 answers INVALID_RECORD (87) to a batch written with base offset 1000: the
    offsets are the leader's to assign, and a client that sets one is broken.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    answer = wire.produce(topic, build_batch([(None, b"x")], base_offset=1000))
    assert answer.error_code.value == INVALID_RECORD, answer
    assert wire.list_offset(topic, -1).offset == 0, "the refused batch was appended"
    accepted = wire.produce(topic, build_batch([(None, b"y")]))
    assert (accepted.error_code.value, accepted.base_offset) == (0, 0), accepted


def test_fetch_waits_max_wait_when_min_bytes_is_not_reached(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A Fetch with less than min_bytes available waits for max_wait, then answers with what there is [protocol guide, Fetch: max_wait_ms, min_bytes]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    assert wire.produce(topic, build_batch([(None, b"small")])).error_code.value == 0
    _wait_for_log_end(wire, topic, 1)
    started = time.monotonic()
    answer = wire.fetch(topic, 0, max_wait=MAX_WAIT_MS, min_bytes=1 << 20)
    elapsed = time.monotonic() - started
    assert elapsed >= 0.9 * MAX_WAIT_MS / 1000, f"answered after {elapsed:.2f} s"
    assert elapsed < BOUND_S
    assert values(answer.records) == [b"small"]
    empty_started = time.monotonic()
    empty = wire.fetch(topic, 1, max_wait=MAX_WAIT_MS, min_bytes=1)
    waited = time.monotonic() - empty_started
    assert waited >= 0.9 * MAX_WAIT_MS / 1000, f"empty fetch answered after {waited:.2f} s"
    assert values(empty.records) == []


def test_fetch_answers_at_once_when_min_bytes_is_available(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A Fetch answers as soon as min_bytes are available, without waiting for max_wait [protocol guide, Fetch: min_bytes]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    wire.produce(topic, build_batch([(None, b"ready")]))
    _wait_for_log_end(wire, topic, 1)
    started = time.monotonic()
    answer = wire.fetch(topic, 0, max_wait=30_000, min_bytes=1)
    assert time.monotonic() - started < BOUND_S
    assert values(answer.records) == [b"ready"]


def test_fetch_without_max_wait_returns_available_data(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A Fetch with max_wait 0 answers at once with the records already available [protocol guide, Fetch: max_wait_ms, min_bytes]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    wire.produce(topic, build_batch([(None, b"already-there")]))
    _wait_for_log_end(wire, topic, 1)
    assert values(wire.fetch(topic, 0, max_wait=0).records) == [b"already-there"]


def test_parked_fetch_wakes_when_records_arrive(wire: Wire,
                                                new_topic: Callable[..., str]) -> None:
    """A Fetch parked for lack of data is answered once an append gives it min_bytes, before max_wait [protocol guide, Fetch: min_bytes; Kafka DelayedFetch]."""  # noqa: E501
    topic = new_topic(1, exact=False)
    # A new topic is in every broker's metadata a moment before its leader serves it (Kafka 4
    # in KRaft mode answers such a Fetch at once with an error): park only once it is served.
    wait_for(lambda: wire.fetch(topic, 0, max_wait=0).error_code.value == 0, BOUND_S,
             f"the leader of {topic} to serve Fetch")
    leader = wire.connect(wire.leader_address(topic))
    version, body = wire.fetch_request(topic, 0, max_wait=30_000, min_bytes=1)
    parked = leader.send(FETCH, version, body)
    wire.produce(topic, build_batch([(None, b"wake")]), acks=-1)
    started = time.monotonic()
    try:
        correlation, answer = leader.receive(FETCH, version)
    except TimeoutError:
        pytest.fail("the parked Fetch was not answered within 10 s of the append")
    assert correlation == parked
    assert time.monotonic() - started < BOUND_S
    woken = answer.responses[0].partitions[0]
    assert values(woken.records) == [b"wake"], \
        f"answered {woken.error_code!r} with high watermark {woken.high_watermark} and no record"


def test_a_partition_answered_with_an_error_carries_empty_records_not_null(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A Fetch partition answered with an error (OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION) carries an empty record set, never a null one [Kafka FetchResponse.partitionResponse: MemoryRecords.EMPTY].

    The schema lets Records be null, but Apache Kafka never sends null, and librdkafka refuses
    it: "Protocol parse failure for Fetch ... invalid MessageSetSize -1", for every such answer,
    over and over while a broker restarts.
    """  # noqa: E501
    topic = new_topic(1, exact=False)
    assert wire.produce(topic, build_batch([(None, b"one")])).error_code.value == 0
    _wait_for_log_end(wire, topic, 1)
    beyond = wire.fetch(topic, 5, max_wait=0)
    assert beyond.error_code.value == OFFSET_OUT_OF_RANGE, beyond
    assert beyond.records is not None, "OFFSET_OUT_OF_RANGE answered null records"
    assert values(beyond.records) == []
    version, body = wire.fetch_request(topic, 0, max_wait=0, partition=7)  # it has one
    answer = wire.leader(topic).request(FETCH, version, body)
    (missing,) = answer.responses[0].partitions
    assert missing.error_code.value == UNKNOWN_TOPIC_OR_PARTITION, missing
    assert missing.records is not None, "UNKNOWN_TOPIC_OR_PARTITION answered null records"


def test_a_follower_answers_a_consumer_fetch_from_its_own_log_up_to_its_high_watermark(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """A consumer's Fetch (v11+, which carries a rack id) sent to a follower is served from the follower's log up to the follower's high watermark, not refused [KIP-392; Kafka FetchParams.fetchOnlyLeader].

    Clients go to a follower only when a leader names it preferred_read_replica, which Kafka
    does only with a replica.selector.class; but the follower serves whoever asks.
    """  # noqa: E501
    version = wire.version(FETCH, at_least=11)
    topic = new_topic(1, exact=False)
    leader = wire.leader_address(topic)
    (described,) = wire.metadata(topic).topics
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in wire.metadata().brokers}
    followers = [brokers[r] for r in described.partitions[0].replica_nodes
                 if r in brokers and brokers[r] != leader]
    if not followers:
        pytest.skip("the topic has no follower (a single-broker target)")
    assert wire.produce(topic, build_batch([(None, b"f1"), (None, b"f2")])).error_code.value == 0
    follower = wire.connect(followers[0])

    def served() -> Any:
        _, body = wire.fetch_request(topic, 0, max_wait=0)
        (answer,) = follower.request(FETCH, version, body).responses[0].partitions
        return answer if answer.error_code.value != 0 or answer.high_watermark >= 2 else None

    answer = wait_for(served, BOUND_S, f"the follower of {topic} to learn the high watermark")
    assert answer.error_code.value == 0, answer
    assert values(answer.records) == [b"f1", b"f2"]


def test_create_time_topic_keeps_the_producer_timestamp(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """On a CreateTime topic the record keeps the producer's timestamp and the answer has log_append_time -1 [KIP-32; topic config message.timestamp.type]."""  # noqa: E501
    topic = new_topic(1, config={"message.timestamp.type": "CreateTime"})
    stamped = int(time.time() * 1000) - 3_600_000
    answer = wire.produce(topic, build_batch([(None, b"ct")], timestamp_ms=stamped))
    assert answer.error_code.value == 0
    assert timestamp_ms(answer.log_append_time) == -1
    records = fetched_records(wire.fetch(topic, 0).records)
    assert [r.timestamp for r in records] == [stamped]
    assert not batch_headers(wire.fetch(topic, 0).records)[0].is_log_append_time


def test_log_append_time_topic_stamps_broker_time(wire: Wire,
                                                  new_topic: Callable[..., str]) -> None:
    """On a LogAppendTime topic the broker stamps its own time, answers it as log_append_time and serves it as the record timestamp [KIP-32; topic config message.timestamp.type]."""  # noqa: E501
    topic = new_topic(1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    answer = wire.produce(topic, build_batch([(None, b"lat")], timestamp_ms=5))
    after = int(time.time() * 1000)
    assert answer.error_code.value == 0
    appended = timestamp_ms(answer.log_append_time)
    assert before - 1000 <= appended <= after + 1000, (before, appended, after)
    fetched = wire.fetch(topic, 0).records
    assert batch_headers(fetched)[0].is_log_append_time
    assert [r.timestamp for r in fetched_records(fetched)] == [appended]


def test_list_offsets_earliest_latest_and_by_timestamp(
        wire: Wire, new_topic: Callable[..., str]) -> None:
    """ListOffsets answers the log start (-2), the log end (-1), and for a timestamp the first offset whose timestamp is at or after it [protocol guide, ListOffsets; KIP-79]."""  # noqa: E501
    topic = new_topic(1, config={"message.timestamp.type": "CreateTime"})
    base = int(time.time() * 1000) - 600_000
    for offset_ts in (1_000, 5_000, 3_000):
        answer = wire.produce(topic, build_batch([(None, b"t")], timestamp_ms=base + offset_ts))
        assert answer.error_code.value == 0
    _wait_for_log_end(wire, topic, 3)

    def lookup(timestamp: int) -> tuple[int, int]:
        found = wire.list_offset(topic, timestamp)
        assert found.error_code.value == 0, found
        return found.offset, found.timestamp

    assert lookup(EARLIEST)[0] == 0
    assert lookup(LATEST)[0] == 3
    assert lookup(base) == (0, base + 1_000)
    assert lookup(base + 2_000) == (1, base + 5_000)
    assert lookup(base + 4_000) == (1, base + 5_000)
    assert lookup(base + 9_000)[0] == -1
