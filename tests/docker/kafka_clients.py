"""What the docker tests of the Kafka kinds (ZooKeeper mode and KRaft) do with a cluster as its
clients and its owner would: make a topic, produce and consume with acks=all, list what a run
left behind."""

from __future__ import annotations

import time
import uuid

import docker
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster.docker.backend import RUN_LABEL, DockerCluster

QUIET = {"log_level": 0}


def labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    """Every container, network and volume carrying the run's label."""
    selector = {"label": f"{RUN_LABEL}={run_id}"}
    return ([c.name for c in client.containers.list(all=True, filters=selector)]
            + [n.name for n in client.networks.list(filters=selector)]
            + [v.name for v in client.volumes.list(filters=selector)])


def create_topic(cluster: DockerCluster, replication: int = 3) -> str:
    """A one-partition topic (min.insync.replicas 2 when replicated), with a full ISR."""
    name = f"docker-kafka-{uuid.uuid4().hex[:6]}"
    config = {"min.insync.replicas": "2"} if replication > 1 else {}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 1, replication, config=config)])[name].result(30)
    cluster.wait_for(lambda: len((cluster.partition_state(name, 0) or {}).get("isr", []))
                     == replication, 30, f"{name}'s ISR to hold {replication} brokers")
    return name


def produce(cluster: DockerCluster, topic: str, values: list[bytes]) -> None:
    """``values`` produced with acks=all (idempotent), every one acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, **QUIET})
    failures: list[str] = []
    for value in values:
        producer.produce(topic, value,
                         on_delivery=lambda err, _msg: err and failures.append(str(err)))
    assert producer.flush(60) == 0
    assert failures == []


def consume(cluster: DockerCluster, topic: str, count: int, group: str) -> list[bytes]:
    """Up to ``count`` records read by ``group`` from its committed offsets (from the start
    for a new group), within a minute."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def produce_and_consume(cluster: DockerCluster, topic: str, count: int) -> list[bytes]:
    """``count`` records produced with acks=all, then read back from the start by a group."""
    produce(cluster, topic, [f"value-{i}".encode() for i in range(count)])
    return consume(cluster, topic, count, group=topic)
