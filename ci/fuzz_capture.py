"""Capture the fuzz seed corpus: the frames real clients send to the reference broker.

    .venv/bin/python ci/fuzz_capture.py [--out ci/fuzz_seeds]

Seeds written by hand only reach what their author thought of; frames from librdkafka
(confluent-kafka) and kafka-python carry the versions, flexible-version tags, compression codecs
and batch layouts those clients really use. This starts a reference broker on loopback behind a
recording relay (the broker advertises the relay, so every connection of every client passes
through it), runs an admin, producer (each compression codec), consumer-group and offsets
workload with each client, cuts what the clients sent into frames with the broker's own
FrameDecoder, and writes each distinct (client, API, version) frame — a few per key — as a fuzz
input (`fuzz_target.make_input`). Produce frames are also written with the FIX_CRC flag, and the
start of each connection as a raw stream, so the fuzzer starts from every input mode.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

CI = Path(__file__).resolve().parent
sys.path.insert(0, str(CI))

import fuzz_target  # noqa: E402

from harness.cluster.peers import ReferenceBroker  # noqa: E402
from harness.net.ports import LOOPBACK, free_port  # noqa: E402
from harness.wire import protocol  # noqa: E402
from harness.wire.framing import FrameDecoder  # noqa: E402
from harness.wire.records import COMPRESSION_NAMES  # noqa: E402

PER_KEY = 3  # distinct frames kept per (client, api, version[, codec])


class RecordingRelay:
    """A loopback TCP relay to the broker that keeps what each client connection sent."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.label = "unlabelled"
        self.sent: list[tuple[str, bytearray]] = []
        self._server = socket.create_server((LOOPBACK, self.port))
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream)
            except OSError as exc:
                print(f"relay: the broker refused a connection: {exc}", file=sys.stderr)
                client.close()
                continue
            record = bytearray()
            self.sent.append((self.label, record))
            self._sockets += [client, upstream]
            for args in ((client, upstream, record), (upstream, client, None)):
                thread = threading.Thread(target=self._pump, args=args, daemon=True)
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if record is not None:
                    record += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closing = True
        self._server.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


def confluent_workload(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {"seed-plain": {}, "seed-compact": {"cleanup.policy": "compact"}}
    for future in admin.create_topics([NewTopic(name, 2, 1, config=config)
                                       for name, config in topics.items()]).values():
        future.result(timeout=30)
    for future in admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, "seed-compact")]).values():
        future.result(timeout=30)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "enable.idempotence": codec != "none", "linger.ms": 5})
        for i in range(20):
            producer.produce("seed-plain" if i % 2 else "seed-compact", key=f"k{i % 4}",
                             value=f"value {i} {codec}" * 3, headers=[("h", b"x")])
        producer.flush(30)
    group = f"seed-group-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["seed-plain"])
    deadline, seen = time.monotonic() + 30, 0
    while seen < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition("seed-plain", 0)], timeout=10)
    consumer.offsets_for_times([TopicPartition("seed-plain", 0, 0)], timeout=10)
    consumer.close()
    admin.list_consumer_groups().result(timeout=30)
    admin.describe_consumer_groups([group])[group].result(timeout=30)
    admin.delete_topics(["seed-plain"])["seed-plain"].result(timeout=30)


def kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("seed-kp", 1, 1)])
    for codec in (None, "gzip"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec)
        for i in range(10):
            producer.send("seed-kp", key=b"k%d" % (i % 3), value=b"kafka-python %d" % i)
        producer.flush(30)
        producer.close()
    consumer = KafkaConsumer("seed-kp", bootstrap_servers=bootstrap, group_id="seed-kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    for i, _message in enumerate(consumer):
        if i >= 5:
            break
    consumer.commit()
    consumer.close()
    admin.list_groups()
    admin.describe_groups(["seed-kp-group"])
    admin.close()


def write_seeds(sent: list[tuple[str, bytearray]], out: Path) -> int:
    """One file per distinct frame, at most PER_KEY per (client, api, version)."""
    kept: dict[tuple[str, str], int] = defaultdict(int)
    inputs: dict[str, bytes] = {}
    streams: set[str] = set()
    for label, data in sent:
        try:
            frames = FrameDecoder(fuzz_target.MAX_REQUEST_SIZE).feed(bytes(data))
        except Exception as exc:
            raise SystemExit(f"a client sent an unframeable stream: {exc}") from exc
        if frames and label not in streams:  # a connection's opening, as the socket sends it
            streams.add(label)
            head = b"".join(len(f).to_bytes(4, "big") + f for f in frames[:6])
            inputs[f"{label}-stream"] = fuzz_target.make_input(head, stream=True, split=7)
        for frame in frames:
            api_key, version, _ = protocol.peek_header(frame)
            name = f"{label}-{protocol.api_name(api_key)}-v{version}"
            if api_key == fuzz_target.PRODUCE:  # a few of each codec, not of the first one
                name += "-" + _codec(frame)
            key = (label, name)
            digest = hashlib.sha1(frame[8:]).hexdigest()[:8]
            if kept[key] >= PER_KEY or any(k.startswith(name) and k.endswith(digest)
                                           for k in inputs):
                continue
            kept[key] += 1
            inputs[f"{name}-{digest}"] = fuzz_target.make_input(frame)
            if api_key == fuzz_target.PRODUCE:
                inputs[f"{name}-{digest}-fixcrc"] = fuzz_target.make_input(frame, fix_crc=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name, data in sorted(inputs.items()):
        fuzz_target.test_one_input(data)  # a client's own frame must not crash the target
        (out / name).write_bytes(data)
    return len(inputs)


def _codec(frame: bytes) -> str:
    """The compression of a Produce request's first batch (seed names and diversity)."""
    body = protocol.decode_request(frame).body
    for topic in body.topic_data:
        for part in topic.partition_data:
            if part.records and len(part.records) > 22:
                return COMPRESSION_NAMES.get(part.records[22] & 7, "unknown")
    return "empty"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=CI / "fuzz_seeds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzz-capture-") as tmp:
        broker_port = free_port()
        relay = RecordingRelay((LOOPBACK, broker_port))
        broker = ReferenceBroker(Path(tmp) / "broker", port=broker_port, properties={
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{relay.port}"})
        try:
            with broker:
                bootstrap = f"{LOOPBACK}:{relay.port}"
                for label, workload in (("librdkafka", confluent_workload),
                                        ("kafka-python", kafka_python_workload)):
                    relay.label = label
                    workload(bootstrap)
                    time.sleep(1)
        finally:
            relay.close()
    count = write_seeds(relay.sent, args.out)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{count} seed inputs, {size} bytes, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
