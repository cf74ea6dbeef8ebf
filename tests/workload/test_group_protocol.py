"""The consumer's group protocol without a Kafka 4 cluster: what librdkafka 2.16 takes and
refuses under KIP-848's consumer protocol (measured here, so an upgrade that changes it shows),
the specs that refuse what cannot work, and the ApiVersions probe on a broker without it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from harness import history
from harness.cluster.peers import ReferenceBroker
from harness.waiting import wait_for
from harness.workload import client
from harness.workload.broker_apis import lacking_consumer_protocol
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import RunContext
from harness.workload.generator import Generator, WorkloadSpec
from harness.workload.group_protocol import CLASSIC_ONLY, GroupProtocol
from harness.workload.recorder import journal_path

# Values librdkafka takes for each under the classic protocol.
CLASSIC_VALUES = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000,
                  "partition.assignment.strategy": "range", "group.protocol.type": "consumer"}
NOWHERE = "127.0.0.1:9"  # a consumer is made without connecting; nothing listens here


def test_the_protocols_are_the_history_columns_values():
    assert tuple(GroupProtocol) == history.GROUP_PROTOCOLS
    assert GroupProtocol.CONSUMER == history.CONSUMER_PROTOCOL


@pytest.mark.parametrize("key", sorted(CLASSIC_ONLY))
def test_librdkafka_refuses_each_classic_only_property_under_the_consumer_protocol(key):
    base = {"bootstrap.servers": NOWHERE, "group.id": "g"}
    Consumer({**base, key: CLASSIC_VALUES[key]}).close()  # fine under the classic protocol
    with pytest.raises(KafkaException) as refused:
        Consumer({**base, "group.protocol": "consumer", key: CLASSIC_VALUES[key]})
    assert f"`{key}` is not supported for `group.protocol=consumer`" in str(refused.value)


def test_a_consumer_protocol_spec_asks_for_it_and_leaves_the_session_to_the_broker():
    spec = ConsumerSpec(NOWHERE, ("t",), group="g", group_protocol=GroupProtocol.CONSUMER)
    config = spec.client_config(1)
    assert config["group.protocol"] == "consumer"
    assert not CLASSIC_ONLY & set(config)
    Consumer(config).close()  # librdkafka takes it
    classic = ConsumerSpec(NOWHERE, ("t",), group="g").client_config(1)
    assert "group.protocol" not in classic and classic["session.timeout.ms"] == 10_000
    assert (spec.history_group_protocol, ConsumerSpec(NOWHERE, ("t",)).history_group_protocol,
            ConsumerSpec(NOWHERE, ("t",), mode="assign").history_group_protocol) == (
        "consumer", "classic", None)


def test_the_protocol_survives_the_trip_to_the_client_process_as_json():
    workload = WorkloadSpec(NOWHERE, ("t",), producers=0, consumers=1,
                            group_protocol=GroupProtocol.CONSUMER)
    ((role, spec),) = workload.roles()
    context = RunContext("/tmp/h", "r", 1, 0, 1)
    document = json.loads(client.command(role, spec, context)[-1])
    assert document["spec"]["group_protocol"] == "consumer"
    rebuilt = client._as_spec(ConsumerSpec, document["spec"])
    assert rebuilt == spec and rebuilt.group_protocol is GroupProtocol.CONSUMER


def test_what_cannot_work_under_the_consumer_protocol_is_refused_by_the_specs():
    with pytest.raises(ValueError, match="needs group mode"):
        ConsumerSpec(NOWHERE, ("t",), mode="assign", group_protocol=GroupProtocol.CONSUMER)
    with pytest.raises(ValueError, match="heartbeat.interval.ms, session.timeout.ms: not for"):
        ConsumerSpec(NOWHERE, ("t",), group_protocol=GroupProtocol.CONSUMER,
                     config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    with pytest.raises(ValueError, match="group_protocol must be one of classic, consumer"):
        ConsumerSpec(NOWHERE, ("t",), group_protocol="eager")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs consumer_mode 'group'"):
        WorkloadSpec(NOWHERE, ("t",), consumer_mode="assign",
                     group_protocol=GroupProtocol.CONSUMER)


def test_a_broker_without_consumer_group_heartbeat_is_found_by_its_api_versions(tmp_path):
    """The reference broker serves Kafka 3.9's APIs: no ConsumerGroupHeartbeat (key 68)."""
    with ReferenceBroker(tmp_path / "broker",
                         properties={"offsets.topic.replication.factor": 1}) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        assert lacking_consumer_protocol([(7, host, int(port))]) == [7]


def _journal_rows(path: Path) -> list[dict]:
    """The complete rows a running client has journalled so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines(keepends=True)
            if line.endswith("\n")]


def test_partitions_librdkafka_says_were_lost_are_info_revokes(tmp_path):
    """on_lost — here the classic protocol's own session timeout while the coordinator hangs;
    under KIP-848 a heartbeat refused as fenced — is an info revoke per partition: the member
    learns late that it no longer owns them, which the checker's exclusivity rule must know."""
    with ReferenceBroker(tmp_path / "broker",
                         properties={"offsets.topic.replication.factor": 1,
                                     "group.initial.rebalance.delay.ms": 0}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("lost", 2, 1)])["lost"].result(10)
        history_dir = tmp_path / "history"
        context = RunContext(str(history_dir), "lost", 1, time.monotonic_ns(), int(120e9))
        spec = ConsumerSpec(broker.bootstrap, ("lost",), group="lost", session_timeout_ms=6000)
        generator = Generator([("consumer", spec)], context, tmp_path / "logs")
        journal = journal_path(history_dir, 1)
        generator.start()
        try:
            wait_for(lambda: [r for r in _journal_rows(journal) if r["f"] == "assign"], 60,
                     "the consumer's assignment")
            broker.pause()
            try:
                wait_for(lambda: [r for r in _journal_rows(journal) if r["type"] == "info"], 60,
                         "the consumer to lose its partitions to its session timeout")
            finally:
                broker.resume()
        finally:
            generator.stop()
    lost = [e for e in history.read_history(history_dir) if e.type == "info"]
    assert {(e.f, e.partition, e.error, e.group, e.group_protocol) for e in lost} == {
        ("revoke", 0, "_ASSIGNMENT_LOST", "lost", "classic"),
        ("revoke", 1, "_ASSIGNMENT_LOST", "lost", "classic")}
    assert len({e.op for e in lost}) == 1  # one callback, one op
