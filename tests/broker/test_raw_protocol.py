"""Exact broker answers, request by request, through the raw client on harness.wire."""

import time

import pytest

from harness.raw_client import RawClient
from harness.wire.records import build_batch, decode_records
from tests import kafka_api_versions
from tests.broker.conftest import create_topic
from tests.broker.dispatch_marker import Marker

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PID = 0, 1, 2, 3, 18, 22
CREATE_TOPICS = 19


@pytest.fixture
def client(broker):
    with RawClient(broker.host, broker.port) as raw:
        yield raw


def produce_body(topic, batch, acks=-1, partition=0):
    return {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def produce(client, topic, batch, acks=-1, partition=0, version=9):
    response = client.request(PRODUCE, version, produce_body(topic, batch, acks, partition))
    return response.responses[0].partition_responses[0]


def fetch_body(topic, offset, max_wait=0, min_bytes=1, max_bytes=50 << 20,
               partition_max=10 << 20, partition=0):
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset,
                 "partition_max_bytes": partition_max, "current_leader_epoch": -1,
                 "log_start_offset": -1, "last_fetched_epoch": -1}]}]}


def fetch(client, topic, offset, version=12, **kw):
    return client.request(FETCH, version, fetch_body(topic, offset, **kw))


@pytest.mark.parametrize("version", kafka_api_versions.versions(METADATA))  # Kafka 3.9's
def test_metadata_every_version(client, topic, version):
    topics = [{"name": topic}] if version else [{"name": topic}]
    body = client.request(METADATA, version, {"topics": topics,
                                               "allow_auto_topic_creation": False})
    (t,) = body.topics
    assert t.name == topic and t.error_code.value == 0
    assert t.partitions[0].leader_id == 0


def test_acks_validation(client, topic):
    part = produce(client, topic, build_batch([(b"k", b"v")]), acks=2)
    assert part.error_code.name == "invalid_required_acks"


def test_unknown_topic_and_partition(client, topic):
    assert produce(client, "no-such-topic-xyz", build_batch([(None, b"v")])).error_code.name \
        == "unknown_topic_or_partition"
    assert produce(client, topic, build_batch([(None, b"v")]), partition=7).error_code.name \
        == "unknown_topic_or_partition"


def test_bad_crc_is_corrupt_message(client, topic):
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[-1] ^= 1
    assert produce(client, topic, bytes(batch)).error_code.name == "corrupt_message"


def test_batch_above_segment_bytes_is_record_list_too_large(broker, client):
    # Kafka's RecordBatchTooLargeException; the broker once answered a misspelt error name,
    # which failed to encode and closed the connection instead.
    topic = create_topic(broker.bootstrap, config={"segment.bytes": "200"})
    part = produce(client, topic, build_batch([(None, b"x" * 300)]))
    assert part.error_code.name == "record_list_too_large" and part.base_offset == -1
    assert produce(client, topic, build_batch([(None, b"fits")])).base_offset == 0


def test_offsets_assigned_by_patching_the_header(client, topic):
    # A producer's batch carries base offset 0, as Kafka's LogValidator requires.
    refused = produce(client, topic, build_batch([(b"x", b"0")], base_offset=999))
    assert refused.error_code.name == "invalid_record" and refused.base_offset == -1
    first = produce(client, topic, build_batch([(b"a", b"1"), (b"b", b"2")]))
    second = produce(client, topic, build_batch([(b"c", b"3")]))
    assert (first.base_offset, second.base_offset) == (0, 2)
    records = fetch(client, topic, 0).responses[0].partitions[0].records
    assert records.count(b"\x02") >= 1  # at least one v2 batch came back
    batch_one = records[: 12 + int.from_bytes(records[8:12], "big")]
    assert [r.value for r in decode_records(batch_one)] == [b"1", b"2"]


def test_log_append_time_topic_stamps_the_batch(client):
    name = "log-append-time-topic"
    created = client.request(CREATE_TOPICS, 7, {"topics": [{
        "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": [{"name": "message.timestamp.type", "value": "LogAppendTime"}]}],
        "timeout": 5000, "validate_only": False})
    assert created.topics[0].error_code.value == 0
    # Bounds causality guarantees (one machine, one clock): the broker stamps the batch after
    # the request is sent and before its answer arrives.
    before = time.time_ns() // 1_000_000
    part = produce(client, name, build_batch([(None, b"x")], timestamp_ms=5))
    after = time.time_ns() // 1_000_000
    stamped = round(part.log_append_time.timestamp() * 1000)
    assert before <= stamped <= after
    records = fetch(client, name, 0).responses[0].partitions[0].records
    (record,) = decode_records(records)
    assert record.timestamp == stamped  # the producer's 5 is replaced, by the answered time


def test_fetch_offset_out_of_range(client, topic):
    produce(client, topic, build_batch([(None, b"x")]))
    part = fetch(client, topic, 50).responses[0].partitions[0]
    assert part.error_code.name == "offset_out_of_range"
    assert part.high_watermark == 1


def test_fetch_returns_at_least_one_batch_beyond_max_bytes(client, topic):
    produce(client, topic, build_batch([(None, b"x" * 5000)]))
    produce(client, topic, build_batch([(None, b"y" * 5000)]))
    part = fetch(client, topic, 0, max_bytes=100, partition_max=100).responses[0].partitions[0]
    assert len(decode_records(part.records)) == 1  # one whole batch, not two, not a slice


def test_delayed_fetch_waits_for_min_bytes_then_wakes_on_append(broker, topic):
    """The fetch reads an empty log and parks; the append wakes it long before its max_wait
    (60 s: the client's 10 s socket timeout fails the test first)."""
    with RawClient(broker.host, broker.port) as client, \
            RawClient(broker.host, broker.port) as other:
        marker = Marker(broker, other)
        correlation = client.send(FETCH, 12, fetch_body(topic, 0, max_wait=60_000, min_bytes=1))
        marker.send(client)
        marker.wait_seen()  # so the fetch has read the empty log before the append
        produce(other, topic, build_batch([(None, b"wake")]))
        got, body = client.receive(FETCH, 12)
        marker.answered(client)
    assert got == correlation
    records = body.responses[0].partitions[0].records
    assert records, "the fetch was answered without the record appended while it waited"
    assert [r.value for r in decode_records(records)] == [b"wake"]


def test_delayed_fetch_times_out_after_max_wait(client, topic):
    started = time.monotonic()
    body = fetch(client, topic, 0, max_wait=400, min_bytes=1)
    # The wait cannot begin before the request is sent; how late the answer comes depends on
    # the machine's load, so only the client's 10 s socket timeout bounds it from above.
    assert time.monotonic() - started >= 0.4
    assert body.responses[0].partitions[0].records == b""


def test_responses_stay_in_request_order_behind_a_delayed_fetch(broker, topic):
    """A produce pipelined behind a parked fetch completes first (another connection sees it
    appended), yet its answer waits until the fetch has been answered."""
    with RawClient(broker.host, broker.port) as client, \
            RawClient(broker.host, broker.port) as other:
        marker = Marker(broker, other)
        first = client.send(FETCH, 12, fetch_body(topic, 0, max_wait=60_000, min_bytes=1))
        marker.send(client)
        marker.wait_seen()  # the produce behind the fetch is done; the fetch is still parked
        produce(other, topic, build_batch([(None, b"wake")]))
        answered = int.from_bytes(client.receive_frame()[:4], "big")  # its correlation id
        assert answered == first, "the produce's answer overtook the parked fetch's"
        marker.answered(client)


def test_fetch_by_topic_id(client, topic):
    produce(client, topic, build_batch([(None, b"by-id")]))
    md = client.request(METADATA, 12, {"topics": [{"name": topic}]})
    topic_id = md.topics[0].topic_id
    body = fetch_body(topic, 0)
    body["topics"][0]["topic_id"] = topic_id
    response = client.request(FETCH, 16, body)
    assert response.responses[0].topic_id == topic_id
    assert decode_records(response.responses[0].partitions[0].records)[0].value == b"by-id"


def test_list_offsets_earliest_latest_timestamp_and_max(client, topic):
    for ts in (1000, 5000, 3000):
        produce(client, topic, build_batch([(None, b"t")], timestamp_ms=ts))

    def lookup(timestamp):
        body = client.request(LIST_OFFSETS, 8, {"replica_id": -1, "isolation_level": 0,
                                                "topics": [{"name": topic, "partitions": [
                                                    {"partition_index": 0,
                                                     "timestamp": timestamp,
                                                     "current_leader_epoch": -1}]}]})
        p = body.topics[0].partitions[0]
        return p.error_code.value, p.offset, p.timestamp

    assert lookup(-2)[:2] == (0, 0)
    assert lookup(-1)[:2] == (0, 3)
    assert lookup(2000)[1:] == (1, 5000)
    assert lookup(-3)[1:] == (1, 5000)  # KIP-734: the record with the largest timestamp
    assert lookup(9000)[1] == -1


def _idempotent_batch(pid, epoch, seq, values):
    return build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq)


def test_idempotent_retry_is_answered_with_the_original_offset(client, topic):
    init = client.request(INIT_PID, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                        "producer_id": -1, "producer_epoch": -1})
    pid, epoch = init.producer_id, init.producer_epoch
    assert init.error_code.value == 0 and pid >= 0
    first = produce(client, topic, _idempotent_batch(pid, epoch, 0, [b"a", b"b"]))
    produce(client, topic, _idempotent_batch(pid, epoch, 2, [b"c"]))
    retry = produce(client, topic, _idempotent_batch(pid, epoch, 0, [b"a", b"b"]))
    assert retry.error_code.value == 0 and retry.base_offset == first.base_offset == 0
    records = fetch(client, topic, 0).responses[0].partitions[0].records
    values = []
    pos = 0
    while pos < len(records):
        size = 12 + int.from_bytes(records[pos + 8 : pos + 12], "big")
        values += [r.value for r in decode_records(records[pos : pos + size])]
        pos += size
    assert values == [b"a", b"b", b"c"]  # no second copy of the retried batch
    gap = produce(client, topic, _idempotent_batch(pid, epoch, 10, [b"z"]))
    assert gap.error_code.name == "out_of_order_sequence_number"
    bumped = client.request(INIT_PID, 4, {"transactional_id": None,
                                          "transaction_timeout": 60000,
                                          "producer_id": pid, "producer_epoch": epoch})
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
    produce(client, topic, _idempotent_batch(pid, epoch + 1, 0, [b"d"]))
    stale = produce(client, topic, _idempotent_batch(pid, epoch, 3, [b"old"]))
    assert stale.error_code.name == "invalid_producer_epoch"
