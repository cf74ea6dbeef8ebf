"""The same hostile frames, over sockets, to the reference broker and to Apache Kafka 3.9.

    .venv/bin/python ci/hostile_frames.py [--frames 10000] [--seed 1]
                                          [--kinds reference,apache-kafka]

The fuzzer (ci/fuzz) proves the reference broker's request path survives hostile bytes
in-process; this sends hostile frames to running brokers, where what matters is what a peer
sees. For each kind it starts ZooKeeper and one broker (harness.cluster.LocalCluster), keeps a
witness connection open, and then, for each frame of one seeded sequence
(harness.conformance.hostile.frames: random bytes, mutations of real client requests, real
requests with a rewritten size prefix), opens a connection of its own, sends the frame and
judges the broker by Kafka's rule (harness.conformance.hostile.judge: closed without a word,
answered under the frame's correlation id, or left waiting for the rest). After every frame the
witness must still get an ApiVersions answer; at the end the broker process must be the one that
started (restarts: 0) and a fresh confluent-kafka producer and consumer must round-trip a
record. Figures go to bench-results/hostile.json and docs/fuzzing.md.

The originals are the real client frames in ci/fuzz_seeds (librdkafka and kafka-python),
limited to requests that answer at once and change nothing that could hurt a broker: a mutated
CreateTopics may ask for 2^24 partitions, and a mutated Fetch or JoinGroup may be held for a
timeout of 2^31 ms, which would measure the mutation, not the broker.

Exit codes: 0 every broker kept to the rules, 1 a broker misbehaved or restarted, 2 usage,
3 a broker could not be started.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "ci"))

from bench_common import machine_info, print_results, write_json_atomically  # noqa: E402

from harness.cluster.local import LocalCluster  # noqa: E402
from harness.cluster.registry import BROKER_KINDS  # noqa: E402
from harness.cluster.spec import ClusterSpec  # noqa: E402
from harness.conformance import hostile  # noqa: E402
from harness.raw_client import RawClient  # noqa: E402
from harness.schema import SCHEMA_VERSION  # noqa: E402

SEEDS = REPO / "ci" / "fuzz_seeds"
RESULTS = REPO / "bench-results" / "hostile.json"
KINDS = ("reference", "apache-kafka")
# Requests whose mutations are answered at once and cannot grow a broker's state without bound.
ORIGINAL_APIS = ("api_versions", "metadata", "produce", "list_offsets", "describe_configs",
                 "find_coordinator", "describe_groups", "list_groups", "offset_fetch",
                 "init_producer_id", "offset_commit")
STREAM_FLAG = 0x01  # ci/fuzz_target.py: the seed is a raw byte stream, not one frame body


def originals() -> list[bytes]:
    """The captured client requests of ORIGINAL_APIS, as frames with their size prefix."""
    frames = []
    for path in sorted(SEEDS.iterdir()):
        api = path.name.split("-v")[0].split("-", 2)[-1] if "-v" in path.name else ""
        data = path.read_bytes()
        if api not in ORIGINAL_APIS or not data or data[0] & STREAM_FLAG:
            continue
        body = data[1:]
        frames.append(len(body).to_bytes(4, "big") + body)
    return frames


@dataclass
class KindResult:
    kind: str
    version: str
    frames_sent: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    witness_answers: int = 0
    broker_restarts: int = 0
    fresh_client_ok: bool = False
    seconds: float = 0.0
    misbehaviour: str | None = None  # the first broken rule, with the frame that broke it
    each: list[str] = field(default_factory=list, repr=False)  # each frame's outcome, in order


def witness_ok(witness: RawClient) -> bool:
    """The witness connection, open since before the first frame, still gets ApiVersions."""
    try:
        return len(witness.advertised(0)) > 0
    except (RuntimeError, AssertionError, ConnectionError):
        return False


def fresh_round_trip(bootstrap: str) -> bool:
    """A record produced with acks=all and read back by a new consumer."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("after-hostile-frames", b"still-serving")
    if producer.flush(30) != 0:
        return False
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hostile-check",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("after-hostile-frames", 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return message.value() == b"still-serving"
        return False
    finally:
        consumer.close()


def run_kind(name: str, frames: list[bytes], run_dir: Path) -> KindResult:
    kind = BROKER_KINDS[name]()
    cluster = LocalCluster(ClusterSpec(brokers=1), run_dir / name, kind=kind)
    result = KindResult(name, kind.version())
    cluster.start()
    try:
        broker = cluster.broker(1)
        pid = broker.pid
        host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        started = time.monotonic()
        outcomes: Counter[str] = Counter()
        with RawClient(host, int(port)) as witness:
            for number, frame in enumerate(frames):
                try:
                    outcome = hostile.check_frame(host, int(port), frame).value
                    outcomes[outcome] += 1
                    result.each.append(outcome)
                    if not witness_ok(witness):
                        raise hostile.Misbehaviour("the witness's ApiVersions failed")
                except (hostile.Misbehaviour, OSError) as exc:
                    result.misbehaviour = f"frame {number} ({frame[:64].hex()}): {exc}"
                    break
                result.frames_sent += 1
                result.witness_answers += 1
        result.seconds = round(time.monotonic() - started, 1)
        result.outcomes = dict(outcomes)
        result.broker_restarts = 0 if broker.is_running() and broker.pid == pid else 1
        result.fresh_client_ok = fresh_round_trip(cluster.bootstrap)
    finally:
        cluster.stop()
    return result


def disagreements(frames: list[bytes], results: list[KindResult]) -> list[dict[str, object]]:
    """The frames the brokers treated differently, counted by the request they claim to be
    (api key and version from the header) and what each broker did: where a broker departs
    from Kafka's handling of a malformed request, not only from its rules."""
    if len(results) < 2:
        return []
    counted: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for number, frame in enumerate(frames):
        seen = tuple(r.each[number] if number < len(r.each) else "not sent" for r in results)
        if len(set(seen)) > 1:
            claimed = (f"api {struct.unpack_from('>h', frame, 4)[0]} "
                       f"v{struct.unpack_from('>h', frame, 6)[0]}" if len(frame) >= 8
                       else "under 8 bytes")
            counted[(claimed, seen)] += 1
    return [{"request": request, "count": count,
             "outcomes": {r.kind: what for r, what in zip(results, seen, strict=True)}}
            for (request, seen), count in counted.most_common()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--run-dir", type=Path, default=REPO / ".harness" / "hostile")
    parser.add_argument("--json-out", type=Path, default=RESULTS)
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if args.frames < 1 or not kinds or set(kinds) - set(KINDS):
        parser.error(f"--frames must be >= 1 and --kinds a list of {', '.join(KINDS)}")
    sequence = list(hostile.frames(args.seed, args.frames, originals()))
    results = []
    for name in kinds:
        try:
            results.append(run_kind(name, sequence, args.run_dir))
        except Exception as exc:  # noqa: BLE001 - a broker that cannot start is exit 3
            print(f"hostile_frames: could not run {name}: {exc}", file=sys.stderr)
            return 3
    differences = disagreements(sequence, results)
    write_json_atomically(args.json_out, {
        "schema_version": SCHEMA_VERSION, "machine": machine_info(), "seed": args.seed,
        "frames": args.frames, "originals": len(originals()),
        "results": [{k: v for k, v in asdict(r).items() if k != "each"} for r in results],
        "disagreements": differences})
    for line in differences:
        print(f"{line['count']:6,} frames: {line['request']}: "
              + ", ".join(f"{kind} {what}" for kind, what in line["outcomes"].items()))
    rows = [[r.kind + " " + r.version, f"{r.frames_sent:,}",
             ", ".join(f"{k} {v:,}" for k, v in sorted(r.outcomes.items())),
             f"{r.witness_answers:,}", str(r.broker_restarts),
             "yes" if r.fresh_client_ok else "NO", f"{r.seconds:.0f} s",
             r.misbehaviour or "none"] for r in results]
    print_results(f"{args.frames:,} hostile frames, seed {args.seed}", rows, args.markdown,
                  headers=("broker", "frames sent", "what the broker did", "witness answers",
                           "restarts", "fresh client", "time", "rule broken"))
    clean = all(r.misbehaviour is None and r.broker_restarts == 0 and r.fresh_client_ok
                for r in results)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
