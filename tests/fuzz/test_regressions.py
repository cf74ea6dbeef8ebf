"""Every input ci/fuzz crashed on, kept as a test, and the broker code each one broke.

The first crash (`crashes/crash-5897391e…`, found after 13 executions of the first run): a
Produce whose batch has a valid CRC but a record that runs past the end of the payload. The
leader stores it without decoding it; then a ListOffsets for a timestamp inside that batch made
`decode_records` raise kio's BufferUnderflow, which `log_read` did not expect, so every such
ListOffsets closed its connection with "Unexpected error". Reading that code showed two more
ways in: damaged gzip data behind a valid CRC stopped the log cleaner's compaction of the
partition at every pass, and a record length of -1 with a large record count made
`decode_records` re-read the same bytes up to 2^31 times (a hang).
"""

import struct
import time
from pathlib import Path

import fuzz_target
import pytest
from fuzz_target import _with_fixed_crcs, make_input

from harness.raw_client import RawClient
from harness.wire import protocol
from harness.wire.errors import ErrorCode
from harness.wire.records import (
    HEADER_SIZE,
    UndecodableRecords,
    build_batch,
    decode_records,
    read_header,
)
from reference_broker.log.cleaner import clean
from reference_broker.log.log_config import LogConfig
from tests.log.log_testing import FakeClock, append, open_log

CRASHES = sorted((Path(__file__).parent / "crashes").iterdir())
PRODUCE, LIST_OFFSETS, CREATE_TOPICS = 0, 2, 19


def crash_batch() -> bytes:
    """The record batch of the first crash, with the CRC the fuzz target made right."""
    data = CRASHES[0].read_bytes()
    request = protocol.decode_request(data[1:])
    return _with_fixed_crcs(request.body.topic_data[0].partition_data[0].records)


def gzip_garbage_batch() -> bytes:
    batch = bytearray(build_batch([(b"k", b"v")], compression=1))
    batch[-3] ^= 0xFF  # inside the gzip stream's CRC/length trailer
    return _with_fixed_crcs(bytes(batch))


def negative_length_batch(count: int = 1_000_000) -> bytes:
    """One record whose length is -1 (zigzag varint 0x01), claiming `count` records: before
    the fix it decoded as `count` copies of itself (about 2 s for a million; 2^31 is allowed)."""
    batch = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", batch, 23, count - 1)      # last offset delta
    struct.pack_into(">i", batch, 57, count)          # records count
    batch[HEADER_SIZE] = 0x01
    return _with_fixed_crcs(bytes(batch))


@pytest.mark.parametrize("path", CRASHES, ids=[p.name[:14] for p in CRASHES])
def test_crash_input_is_handled(path):
    fuzz_target.test_one_input(path.read_bytes())


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from harness.cluster.peers import ReferenceBroker

    with ReferenceBroker(tmp_path_factory.mktemp("fuzz-broker")) as running:
        yield running


def as_stream(data: bytes) -> bytes:
    """The bytes a client would send for a fuzz input (its CRC flag aside)."""
    payload = data[1:]
    return payload if data[0] & fuzz_target.STREAM else struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("path", CRASHES, ids=[p.name[:14] for p in CRASHES])
def test_real_broker_survives_the_crash_input(broker, path):
    """Sent over a socket, each input gets an answer or a close of its own connection; the
    broker keeps serving (one of them used to abort the whole process)."""
    with RawClient(broker.host, broker.port) as hostile:
        hostile.send_raw(as_stream(path.read_bytes()))
        hostile.is_closed_by_peer(timeout=1.0)
    assert broker.is_running()
    with RawClient(broker.host, broker.port) as witness:
        assert witness.advertised()[PRODUCE] == (3, 11)


@pytest.mark.parametrize("batch", [crash_batch(), gzip_garbage_batch(), negative_length_batch()],
                         ids=["truncated-record", "gzip-garbage", "negative-length"])
def test_undecodable_payload_is_one_value_error(batch):
    started = time.monotonic()
    with pytest.raises(UndecodableRecords):
        decode_records(batch)
    assert time.monotonic() - started < 1.0
    fuzz_target.test_one_input(make_input(produce_body(batch)))


def produce_body(batch: bytes, topic: str = "t") -> bytes:
    return protocol.encode_request(api_key=PRODUCE, api_version=9, body={
        "acks": 1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })[4:]


def test_cleaner_keeps_an_undecodable_batch_whole_and_compacts_the_rest(tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(cleanup_policy="compact"), now_ms=FakeClock())
    append(log, bytearray(build_batch([(b"a", b"1")], timestamp_ms=10_000)))
    log.roll()
    bad = gzip_garbage_batch()
    append(log, bytearray(bad))
    log.roll()
    append(log, bytearray(build_batch([(b"a", b"2")], timestamp_ms=10_000)))
    log.roll()
    append(log, bytearray(build_batch([(b"z", b"active")], timestamp_ms=10_000)))
    result = clean(log, now_ms=10_000)
    assert result.records_removed == 1  # a=1, superseded by a=2
    data = log.read(0, 1 << 20, log.log_end_offset).read_bytes()
    headers = []
    pos = 0
    while pos < len(data):
        headers.append(read_header(data, pos))
        pos += headers[-1].size
    kept = [h for h in headers if h.compression == 1]
    assert len(kept) == 1 and data[kept[0].position + 21:kept[0].position + kept[0].size] \
        == bad[21:]


def test_broker_answers_list_offsets_over_the_crash_batch(tmp_path):
    """End to end on a real broker: the batch is accepted, and a ListOffsets for a timestamp
    inside it gets an answer at batch granularity, where it used to close the connection."""
    from harness.cluster.peers import ReferenceBroker

    with ReferenceBroker(tmp_path / "broker") as broker, \
            RawClient(broker.host, broker.port) as client:
        created = client.request(CREATE_TOPICS, 5, {
            "topics": [{"name": "fuzzed", "num_partitions": 1, "replication_factor": 1}],
            "timeout": 30_000})
        assert created.topics[0].error_code == ErrorCode.none
        batch = crash_batch()
        produced = client.request(PRODUCE, 9, {"acks": 1, "timeout": 5000, "topic_data": [
            {"name": "fuzzed", "partition_data": [{"index": 0, "records": batch}]}]})
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        timestamp = read_header(batch).base_timestamp
        listed = client.request(LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": "fuzzed", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
        answer = listed.topics[0].partitions[0]
        assert answer.error_code == ErrorCode.none and answer.offset == 0


HUGE_ARRAYS = {
    # Produce v8 (legacy arrays): transactional_id null, acks, timeout, topic_data of 2^31-1.
    "produce-v8-legacy": struct.pack(">hhi", PRODUCE, 8, 1) + b"\x00\x01c" + b"\xff\xff"
    + struct.pack(">hii", 1, 1000, 2**31 - 1),
    # Metadata v12 (compact arrays): topics of 2^32-2 elements, then two booleans.
    "metadata-v12-compact": struct.pack(">hhi", 3, 12, 1) + b"\x00\x01c\x00"
    + b"\xff\xff\xff\xff\x0f" + b"\x01\x00\x00",
}


@pytest.mark.parametrize("name", sorted(HUGE_ARRAYS))
def test_a_huge_declared_array_is_refused_before_kio_allocates_it(name):
    """Run in a child: before the fix kio's native reader aborted the process."""
    import subprocess
    import sys

    code = ("import sys\nfrom harness.wire import protocol\n"
            f"frame = {HUGE_ARRAYS[name]!r}\n"
            "try:\n    protocol.decode_request(frame)\n"
            "except protocol.ProtocolError as exc:\n    print(exc)\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, check=False)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "array of length" in child.stdout and "bytes remain" in child.stdout
