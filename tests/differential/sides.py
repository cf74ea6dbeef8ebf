"""What the differential tests share: a broker side (target, wire, raw clients), and the
field-by-field comparison of two answers with the fields allowed to differ."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cluster.targets import Target, start_target
from harness.raw_client import RawClients
from suites.protocol._samples import Names
from suites.protocol._wire import Wire

# Fields whose values belong to one broker instance or moment, not to the protocol.
MAY_DIFFER = {
    "throttle_time": "how long a broker asks a client to back off is its own quota's business",
    "topic_id": "a topic's id is a random UUID made at creation",
    "cluster_id": "a random id made when the cluster's ZooKeeper is first used",
    "node_id": "broker ids: each cluster numbers its own",
    "controller_id": "broker ids: each cluster numbers its own",
    "leader_id": "broker ids: each cluster numbers its own",
    "host": "each broker listens where the harness put it",
    "port": "each broker listens where the harness put it",
    "error_message": "free text; the error code carries the meaning",
    "member_id": "made by the coordinator from the client id and a random UUID",
    "producer_id": "allocated from the cluster's own producer-id blocks",
    "log_append_time": "the broker's clock",
    "timestamp": "the broker's clock",
    "api_keys": "compared on their own, with the declared differences: "
                "test_the_reference_broker_advertises_kafka_39s_ranges",
}
SAME_NAMES = f"differential-{uuid.uuid4().hex[:8]}"
BROKER_PROPERTIES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1,
                     "auto.create.topics.enable": "true"}


@dataclass
class Side:
    target: Target
    wire: Wire
    clients: RawClients

    def names(self, topic: str, version: int) -> Names:
        return Names(topic, self.wire.topic_id(topic), f"{SAME_NAMES}-group",
                     f"{SAME_NAMES}-unused-v{version}")


def make_side(kind: str, run_dir: Path) -> Side:
    target = start_target(kind, brokers=1, run_dir=run_dir, properties=BROKER_PROPERTIES)
    clients = RawClients(target.bootstrap)
    return Side(target, Wire(clients, clients.bootstrap), clients)


def comparable(answer: Any) -> Any:
    """An answer with its config lists sorted by name: Kafka lists a topic's configs in the
    order of a Java hash map, which says nothing."""
    if isinstance(answer, dict):
        return {key: comparable(value) for key, value in answer.items()}
    if isinstance(answer, list):
        if answer and all(isinstance(x, dict) and "config_source" in x for x in answer):
            return [comparable(x) for x in sorted(answer, key=lambda x: x["name"])]
        return [comparable(x) for x in answer]
    return answer


def differences(ours: Any, kafkas: Any, path: str = "") -> list[str]:
    """Where two decoded answers differ, outside :data:`MAY_DIFFER` (``path: ours != Kafka's``)."""
    if isinstance(ours, dict) and isinstance(kafkas, dict):
        found = []
        for key in sorted(set(ours) | set(kafkas)):
            if key in MAY_DIFFER:
                continue
            found += differences(ours.get(key), kafkas.get(key), f"{path}.{key}")
        return found
    if isinstance(ours, list) and isinstance(kafkas, list):
        if len(ours) != len(kafkas):
            return [f"{path}: {len(ours)} items != Kafka's {len(kafkas)}"]
        return [d for i, (a, b) in enumerate(zip(ours, kafkas, strict=True))
                for d in differences(a, b, f"{path}[{i}]")]
    return [] if ours == kafkas else [f"{path}: {ours!r} != Kafka's {kafkas!r}"]
