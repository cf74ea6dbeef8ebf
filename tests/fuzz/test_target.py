"""The fuzz target: handled inputs return, anything the broker would log as "Unexpected error"
raises, and the captured seeds are real client frames that reach every stage."""

import struct
from collections import Counter

import fuzz_target
import pytest
from fuzz_target import make_input

from harness.wire import protocol
from harness.wire.records import HEADER_SIZE, build_batch, read_header

SEEDS = fuzz_target.__file__.rsplit("/", 1)[0] + "/fuzz_seeds"


def produce_frame(records: bytes | None, version: int = 9) -> bytes:
    """A Produce request body (no size prefix) for one partition."""
    return protocol.encode_request(api_key=0, api_version=version, body={
        "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    })[4:]


@pytest.mark.parametrize("data", [
    b"",
    make_input(struct.pack(">i", -1), stream=True),                # negative frame size
    make_input(struct.pack(">i", 2**31 - 1), stream=True),         # over socket.request.max.bytes
    make_input(b"\x00\x03"),                                       # truncated header
    make_input(struct.pack(">hhi", 999, 0, 1)),                    # unknown api key
    make_input(struct.pack(">hhi", 3, 99, 1)),                     # unsupported version
    make_input(struct.pack(">hhi", 18, 99, 1)),                    # KIP-511 ApiVersions answer
    make_input(struct.pack(">hhi", 3, 9, 1) + b"\xff" * 40),       # garbage body
    make_input(produce_frame(None)),                               # null record set
    make_input(produce_frame(b"\x00" * 70)),                       # corrupt batch
    make_input(produce_frame(build_batch([(b"k", b"v")], base_offset=5))),  # offset not 0
], ids=["empty", "negative-size", "oversize", "short-header", "unknown-api", "bad-version",
        "api-versions-kip511", "garbage-body", "null-records", "corrupt-batch", "base-offset"])
def test_inputs_the_broker_handles_return(data):
    fuzz_target.test_one_input(data)


def test_a_non_protocol_exception_escapes_as_a_crash(monkeypatch):
    """The target does not swallow what the broker would not: a decoder raising KeyError
    (the broker's socket server logs it as "Unexpected error") reaches the fuzzer."""
    def broken(records, max_size):
        raise KeyError("simulated decoder bug")

    monkeypatch.setattr(fuzz_target, "validate_batches", broken)
    with pytest.raises(KeyError, match="simulated decoder bug"):
        fuzz_target.test_one_input(make_input(produce_frame(build_batch([(b"k", b"v")]))))


def test_fix_crc_lets_a_mutated_batch_past_the_crc():
    batch = bytearray(build_batch([(b"k", b"v")], compression=1))
    batch[-3] ^= 0xFF  # damage the gzip payload: the CRC no longer matches
    before = fuzz_target.STATS.accepted_batches
    fuzz_target.test_one_input(make_input(produce_frame(bytes(batch))))
    assert fuzz_target.STATS.accepted_batches == before
    fixed = fuzz_target._with_fixed_crcs(bytes(batch))
    assert read_header(fixed).crc != read_header(batch).crc
    assert fixed[:17] == batch[:17] and fixed[21:] == batch[21:]


def test_split_feeding_yields_the_same_frames():
    frame = produce_frame(build_batch([(b"k", b"v")]))
    stream = (struct.pack(">i", len(frame)) + frame) * 2
    before = fuzz_target.STATS.accepted_batches
    fuzz_target.test_one_input(make_input(stream, stream=True, split=5))
    assert fuzz_target.STATS.accepted_batches == before + 2


def seed_files():
    from pathlib import Path

    return sorted(Path(SEEDS).iterdir())


def test_seeds_are_frames_of_both_real_clients_and_reach_every_stage():
    files = seed_files()
    assert len(files) >= 40 and sum(p.stat().st_size for p in files) < 400_000
    clients = Counter(p.name.split("-")[0] for p in files)
    assert clients["librdkafka"] >= 20 and clients["kafka"] >= 10  # kafka-python's start "kafka"
    codecs = set()
    apis = set()
    for path in files:
        data = path.read_bytes()
        if data[0] & fuzz_target.STREAM:
            continue
        request = protocol.decode_request(data[1:])
        apis.add(request.api_name)
        if request.api_key == 0:
            for topic in request.body.topic_data:
                for part in topic.partition_data:
                    codecs.add(part.records[21 + 1] & 7 if len(part.records) > HEADER_SIZE
                               else None)
    assert {"produce", "fetch", "metadata", "api_versions", "join_group", "sync_group",
            "offset_commit", "create_topics", "list_offsets", "find_coordinator"} <= apis
    assert {0, 1, 2, 3, 4} <= codecs  # none, gzip, snappy, lz4, zstd as the clients sent them
    before = fuzz_target.Stats(**vars(fuzz_target.STATS))
    for path in files:
        fuzz_target.test_one_input(path.read_bytes())
    after = fuzz_target.STATS
    assert after.accepted_batches > before.accepted_batches
    assert after.decoded_batches > before.decoded_batches
