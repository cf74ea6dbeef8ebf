"""The fuzz target: what the reference broker does with bytes a client sends, run in-process.

`ci/fuzz` drives `test_one_input` with atheris (libFuzzer); the regression tests in
`tests/fuzz/` call it directly. Each stage mirrors one part of the broker's request path and
uses the broker's own code, so a bug found here is a bug a socket peer can trigger:

1. framing: `harness.wire.framing.FrameDecoder` with the broker's default
   socket.request.max.bytes, exactly as `KafkaConnection.data_received` feeds it;
2. header and body: `KafkaApis.handle_frame`'s steps up to the handler — peek the header,
   answer an unknown ApiVersions version (KIP-511), decode with the broker's `supports`, refuse
   a ZooKeeper-only API on a standalone broker;
3. Produce: per partition, the leader's checks from `ReplicaManager.append_records`
   (`validate_batches` with the default max.message.bytes, the base offset rule);
4. an accepted batch, read back as the broker later reads stored batches: ListOffsets'
   `log_read.first_record_at_or_after`, and the log cleaner's decoding of an uncompressed or
   gzip batch (where decompression happens) and its rebuild without a superseded record.

What counts as handled is what the broker handles without logging "Unexpected error":
`ProtocolError` (the socket server closes that one connection) and `InvalidBatch` (Produce
answers with its Kafka error code). Any other exception escaping a stage is a crash; libFuzzer's
`-timeout` turns a hang into one. Admin and group handlers are not run: their input is fuzzed
through decoding only, so no fuzz input can grow broker state without bound (a CreateTopics
asking for 2^31 partitions).

Input format — the first byte holds flags, the rest is data:
  bit 0 (STREAM): data is a raw byte stream, size prefixes included, fed to the decoder as is;
                  clear: data is one frame body and the target writes its size prefix, so
                  mutations of the body are not wasted on breaking the framing;
  bit 1 (FIX_CRC): recompute each produced batch's CRC-32C before validation, so mutations
                  reach the checks and decoders behind the CRC (a real client computes it too);
  bits 2-7 (SPLIT): when non-zero, feed the stream in chunks of that many bytes, as a socket
                  may deliver it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from harness.wire import protocol
from harness.wire.framing import FrameDecoder
from harness.wire.protocol import ProtocolError
from harness.wire.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    InvalidBatch,
    compute_crc,
    read_header,
    rebuild_batch,
    validate_batches,
)
from reference_broker.config import KafkaConfig
from reference_broker.log import cleaner, log_read
from reference_broker.server import kafka_apis
from reference_broker.server.apis.api_versions import unsupported_version_response

STREAM = 0x01
FIX_CRC = 0x02
SPLIT_SHIFT = 2

PRODUCE = 0
_CONFIG = KafkaConfig({})
MAX_REQUEST_SIZE: int = _CONFIG["socket.request.max.bytes"]
MAX_MESSAGE_BYTES: int = _CONFIG["message.max.bytes"]
_U32 = struct.Struct(">I")


def make_input(body: bytes, *, stream: bool = False, fix_crc: bool = False,
               split: int = 0) -> bytes:
    """A fuzz input (flags byte + data): seeds and regression inputs are written with it."""
    if not 0 <= split < 64:
        raise ValueError("split is 0..63")
    return bytes([(STREAM if stream else 0) | (FIX_CRC if fix_crc else 0)
                  | (split << SPLIT_SHIFT)]) + body


@dataclass
class Stats:
    """What the inputs reached; `ci/fuzz --stats` prints it to show what a corpus covers."""

    frames: int = 0
    decoded: int = 0
    produce_batches: int = 0
    accepted_batches: int = 0
    decoded_batches: int = 0


STATS = Stats()


def test_one_input(data: bytes) -> None:
    """One fuzz execution. Returns when the broker would have coped; raises when it would not."""
    if not data:
        return
    flags, payload = data[0], data[1:]
    stream = payload if flags & STREAM else struct.pack(">i", len(payload)) + payload
    split = flags >> SPLIT_SHIFT
    decoder = FrameDecoder(MAX_REQUEST_SIZE)
    chunks = [stream[i:i + split] for i in range(0, len(stream), split)] if split else [stream]
    for chunk in chunks:
        try:
            frames = decoder.feed(chunk)
        except ProtocolError:
            return  # the connection closes
        for frame in frames:
            try:
                handle_frame(frame, fix_crc=bool(flags & FIX_CRC))
            except ProtocolError:
                return  # the connection closes; later frames are never read
    decoder.pending_partial()


def handle_frame(frame: bytes, *, fix_crc: bool = False) -> None:
    """KafkaApis.handle_frame's steps, in its order, without a running broker."""
    STATS.frames += 1
    api_key, version, correlation_id = protocol.peek_header(frame)
    if api_key == protocol.API_VERSIONS_KEY and not kafka_apis.supports(api_key, version):
        protocol.encode_response(api_key, 0, correlation_id,
                                 unsupported_version_response(zookeeper_mode=False))
        return
    request = protocol.decode_request(frame, kafka_apis.supports)
    STATS.decoded += 1
    handler = kafka_apis.registry()[api_key]
    if handler.zk_only:
        raise ProtocolError(f"{request.api_name} is served only in ZooKeeper mode")
    if api_key == PRODUCE:
        _produce(request.body, fix_crc)


def _produce(body: Any, fix_crc: bool) -> None:
    """ReplicaManager.append_records' checks for every partition the request names."""
    for topic_data in body.topic_data:
        for data in topic_data.partition_data:
            records = data.records
            if records is None:
                continue  # answered with INVALID_RECORD
            if fix_crc:
                records = _with_fixed_crcs(records)
            STATS.produce_batches += 1
            try:
                (header,) = validate_batches(records, MAX_MESSAGE_BYTES)
            except InvalidBatch:
                continue  # answered with the batch's Kafka error
            if header.base_offset != 0:
                continue  # answered with INVALID_RECORD
            STATS.accepted_batches += 1
            _read_back(bytes(records[header.position:header.position + header.size]))


def _with_fixed_crcs(records: bytes) -> bytes:
    """`records` with the CRC-32C of every batch whose header and length fit made right."""
    buf = bytearray(records)
    pos = 0
    while len(buf) - pos >= HEADER_SIZE:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        size = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(buf):
            break
        _U32.pack_into(buf, pos + 17, compute_crc(buf, pos, size))
        pos += size
    return bytes(buf)


class _StoredBatch:
    """One stored batch as `log_read` asks a segment for it: the bytes at a position."""

    def __init__(self, batch: bytes) -> None:
        self._batch = batch

    def read_batch(self, position: int, size: int) -> bytes:
        return self._batch[position:position + size]


def _read_back(batch: bytes) -> None:
    """The broker's later reads of an accepted batch: a ListOffsets timestamp lookup inside
    it and the cleaner's decoding of a compacted topic's batch."""
    header = read_header(batch, 0)
    segment: Any = _StoredBatch(batch)
    log_read.first_record_at_or_after(segment, 0, header, header.base_timestamp, 0)
    # The cleaner: control and snappy/lz4/zstd batches are kept whole, unread; the others are
    # decoded, and rebuilt without the records a later one superseded.
    records = cleaner.batch_records(header, batch)
    if records is not None:
        STATS.decoded_batches += 1
        if len(records) > 1:
            rebuild_batch(header, records[1:])
