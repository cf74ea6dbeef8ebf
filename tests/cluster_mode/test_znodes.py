"""Every znode a working cluster writes has the layout the seeds (Kafka's ZooKeeper data model)
give it: the JSON fields and value types below, and it decodes with the project's one
path/encode/decode object for that znode."""

from __future__ import annotations

import json
import re

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from reference_broker.log.topic_partition import TopicPartition
from reference_broker.zk.admin_znodes import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    IsrChangeNotificationSequenceZNode,
)
from reference_broker.zk.broker_znodes import (
    BrokerIdZNode,
    ClusterIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    ProducerIdBlockZNode,
)
from reference_broker.zk.topic_znodes import TopicPartitionStateZNode, TopicZNode


def _walk(zk, path: str = "/") -> dict[str, bytes]:
    found = {}
    for child in zk.get_children(path):
        full = f"{path.rstrip('/')}/{child}"
        if full == "/zookeeper":
            continue
        data, _ = zk.get(full)
        found[full] = data
        found.update(_walk(zk, full))
    return found


def test_every_znode_matches_the_seeds_schemas(cluster):
    c = cluster(brokers=3, zookeeper_session_timeout_ms=4000,
                properties={"replica.lag.time.max.ms": 1500})
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("schema", 2, 3)])["schema"].result(30)
    fs = admin.incremental_alter_configs([ConfigResource("topic", "schema", incremental_configs=[
        ConfigEntry("retention.ms", "3600000",
                    incremental_operation=AlterConfigOpType.SET)])])
    for f in fs.values():
        f.result(30)
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    for i in range(100):
        producer.produce("schema", value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "schema-group",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["schema"])
    c.wait_for(lambda: consumer.poll(0.5) is not None, 30, "a consumed record")
    consumer.close()
    # An ISR change: a follower dies and the leaders drop it (and notify the controller).
    c.kill(3)
    c.wait_for(lambda: all(3 not in c.partition_state("schema", p)["isr"] for p in (0, 1)),
               20, "broker 3 to leave the ISRs")

    with c.zk() as zk:
        tree = _walk(zk)
    seen_kinds = set()
    for path, data in tree.items():
        if re.fullmatch(r"/brokers/ids/\d+", path):
            doc = json.loads(data)
            assert {"version", "host", "port", "endpoints", "jmx_port", "timestamp",
                    "listener_security_protocol_map"} <= set(doc), path
            assert isinstance(doc["port"], int) and isinstance(doc["timestamp"], str)
            assert all(re.fullmatch(r"\w+://[^:]+:\d+", e) for e in doc["endpoints"])
            BrokerIdZNode.decode(int(path.rsplit("/", 1)[1]), data)
            seen_kinds.add("broker")
        elif re.fullmatch(r"/brokers/topics/[^/]+", path):
            doc = json.loads(data)
            assert doc["version"] in (1, 2, 3)
            assert all(k.isdigit() and all(isinstance(b, int) for b in v)
                       for k, v in doc["partitions"].items())
            TopicZNode.decode(path.rsplit("/", 1)[1], data)
            seen_kinds.add("topic")
        elif m := re.fullmatch(r"/brokers/topics/([^/]+)/partitions/(\d+)/state", path):
            doc = json.loads(data)
            assert {"controller_epoch", "leader", "version", "leader_epoch", "isr"} <= set(doc)
            assert all(isinstance(doc[k], int)
                       for k in ("controller_epoch", "leader", "version", "leader_epoch"))
            TopicPartitionStateZNode.decode(TopicPartition(m[1], int(m[2])), data)
            seen_kinds.add("state")
        elif path == "/controller":
            doc = json.loads(data)
            assert {"version", "brokerid", "timestamp"} <= set(doc)
            ControllerZNode.decode(data)
            seen_kinds.add("controller")
        elif path == "/controller_epoch":
            assert data.decode().isdigit()
            ControllerEpochZNode.decode(data)
            seen_kinds.add("controller_epoch")
        elif path == "/cluster/id":
            doc = json.loads(data)
            assert doc["version"] == "1" and len(doc["id"]) == 22
            ClusterIdZNode.decode(data)
            seen_kinds.add("cluster_id")
        elif re.fullmatch(r"/config/topics/[^/]+", path):
            doc = json.loads(data)
            assert doc["version"] == 1 and isinstance(doc["config"], dict)
            ConfigEntityZNode.decode(data)
            seen_kinds.add("topic_config")
        elif re.fullmatch(r"/config/changes/config_change_\d{10}", path):
            doc = json.loads(data)
            assert doc == {"version": 2, "entity_path": doc["entity_path"]}
            ConfigEntityChangeNotificationSequenceZNode.decode(data)
            seen_kinds.add("config_change")
        elif re.fullmatch(r"/isr_change_notification/isr_change_\d{10}", path):
            doc = json.loads(data)
            assert doc["version"] == 1
            assert all(set(p) == {"topic", "partition"} for p in doc["partitions"])
            IsrChangeNotificationSequenceZNode.decode(data)
            seen_kinds.add("isr_change")
        elif path == "/latest_producer_id_block":
            doc = json.loads(data)
            assert {"version", "broker", "block_start", "block_end"} <= set(doc)
            ProducerIdBlockZNode.decode(data)
            seen_kinds.add("producer_ids")
        else:
            assert data in (b"", None) or path.startswith("/brokers/topics/"), \
                f"unexpected data at {path}: {data[:80]!r}"
    assert {"broker", "topic", "state", "controller", "controller_epoch", "cluster_id",
            "topic_config", "producer_ids"} <= seen_kinds, seen_kinds
