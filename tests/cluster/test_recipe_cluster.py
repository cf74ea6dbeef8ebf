"""A recipe whose broker needs no ZooKeeper still gets its faults: the cluster runs without a
ZooKeeper (no node, no proxy, nothing told of one), its state is read through the Admin API,
the clients' link is cut and healed and slowed by a toxic, and the broker is killed and
restarted.

The broker is the reference broker in its standalone mode (no ``zookeeper.connect``), with
``peer_addressing = "advertised"``: the case of a broker that cannot be told per-pair
addresses, which may therefore not claim ``faults``."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer

from harness.cluster.kinds import Capability
from harness.cluster.proxied import CLIENT
from harness.cluster.targets import Target, start_target

STANDALONE = '''
[broker]
name = "standalone"
command = ["{python}", "-m", "reference_broker", "{config_file}"]
zookeeper = false
peer_addressing = "advertised"
capabilities = ["process_faults", "create_topics"]

[config]
file = "server.properties"
template = """
log.dirs={data_dir}
num.partitions=1
{properties}
listeners=PLAINTEXT://{host}:{client_port}
advertised.listeners=PLAINTEXT://{advertised}
"""

[ready]
check = "api-versions"
'''


def _produce(target: Target, value: bytes, timeout_ms: int) -> str | None:
    """Send one record with acks=all; None when acknowledged, else the delivery error."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all",
                         "message.timeout.ms": timeout_ms, "log_level": 0})
    producer.produce("recipe-topic", value,
                     on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
    left = producer.flush(timeout_ms / 1000 + 10)
    return f"{left} unflushed" if left else (errors[0] if errors else None)


@pytest.fixture
def target(tmp_path):
    recipe = tmp_path / "standalone.toml"
    recipe.write_text(STANDALONE)
    started = start_target("recipe", brokers=1, recipe=recipe, run_dir=tmp_path / "run")
    try:
        yield started
    finally:
        started.close()


def test_a_broker_without_zookeeper_gets_client_link_and_process_faults(target, tmp_path):
    assert target.kind == "recipe"  # a target name: suites start runs of the same target
    assert target.nodes is not None and target.nodes.kind.name == "standalone"
    assert target.capabilities == {Capability.PROCESS_FAULTS, Capability.CREATE_TOPICS}
    assert "exposes a ZooKeeper" in (target.missing(Capability.ZOOKEEPER) or "")
    nodes, faults = target.nodes, target.faults
    assert nodes is not None and faults is not None
    assert nodes.zookeeper is None and faults.nodes == ["broker-1", CLIENT]
    assert not (tmp_path / "run" / "zookeeper").exists()
    config = (tmp_path / "run" / "broker-1" / "server.properties").read_text()
    assert "zookeeper" not in config
    assert nodes.registered_broker_ids() == [1]  # the Admin API's view

    assert _produce(target, b"before", 10_000) is None
    faults.isolate("broker-1")
    assert faults.active()["partition"] == [["broker-1", CLIENT], [CLIENT, "broker-1"]]
    assert _produce(target, b"cut", 2_000) is not None
    faults.heal()
    assert _produce(target, b"healed", 10_000) is None

    # Toxics too: every answer from the broker is held 300 ms on the clients' link.
    name = faults.add_toxic(f"{CLIENT}->broker-1", "latency", {"latency": 300})
    started = time.monotonic()
    assert _produce(target, b"slow", 10_000) is None
    assert time.monotonic() - started >= 0.3
    faults.remove_toxic(f"{CLIENT}->broker-1", name)
    assert faults.active() == {"partition": [], "toxics": {}}

    nodes.kill(1)
    with pytest.raises(KafkaException):
        nodes.registered_broker_ids()
    nodes.start_broker(1)  # no registration to outlive the crash: it starts at once
    assert nodes.registered_broker_ids() == [1]
    assert _produce(target, b"restarted", 10_000) is None
