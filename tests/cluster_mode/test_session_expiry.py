"""ZooKeeper session expiry (issue 5, Kafka's KafkaZkClient/KafkaController behaviour).

A broker frozen for longer than zookeeper.session.timeout.ms loses its session: ZooKeeper drops
its ephemeral znodes (`/brokers/ids/[id]`, and `/controller` if it held it), the rest of the
cluster treats it as dead, and when it wakes up it must register again under a new session (a
new broker epoch) and, if it was the controller, resign instead of acting on a stale epoch.
"""

from __future__ import annotations

import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

SESSION_MS = 3000


def _epoch_of(c, broker_id: int) -> int | None:
    with c.zk() as zk:
        stat = zk.exists(f"/brokers/ids/{broker_id}")
    return None if stat is None else stat.czxid


def test_frozen_controller_loses_its_session_resigns_and_registers_again(cluster):
    c = cluster(brokers=3, zookeeper_session_timeout_ms=SESSION_MS)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic("expiry", 3, 3)])["expiry"].result(30)
    frozen = c.controller_id()
    epoch = c.controller_epoch()
    broker_epoch = _epoch_of(c, frozen)

    c.pause(frozen)
    new_controller = c.wait_for(
        lambda: (cid := c.controller_id()) is not None and cid != frozen and cid,
        SESSION_MS / 1000 + 15, "another broker to take /controller")
    assert c.controller_epoch() == epoch + 1
    c.wait_for(lambda: c.broker_registration(frozen) is None, 15,
               f"broker {frozen}'s registration to expire")
    # Partitions it led were moved to live ISR members while it slept.
    c.wait_for(lambda: all(c.leader("expiry", p) not in (frozen, None, -1) for p in range(3)),
               15, "every partition of 'expiry' to be led by a live broker")

    c.resume(frozen)
    c.wait_for(lambda: (e := _epoch_of(c, frozen)) is not None and e > broker_epoch, 30,
               f"broker {frozen} to register again under a new session")
    assert c.controller_id() == new_controller
    assert c.controller_epoch() == epoch + 1
    registration = c.broker_registration(frozen)
    assert registration is not None and registration["version"] >= 4
    log = c.broker(frozen).log_path.read_text()
    assert "resigning" in log.lower(), "the deposed controller never resigned"

    # It rejoins the ISRs as a follower, and the cluster takes acks=all writes again.
    c.wait_for(lambda: all(frozen in c.partition_state("expiry", p)["isr"] for p in range(3)),
               30, f"broker {frozen} to rejoin every ISR")
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    delivered = []
    for p in range(3):
        producer.produce("expiry", value=json.dumps({"p": p}).encode(), partition=p,
                         on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None, None, None]
