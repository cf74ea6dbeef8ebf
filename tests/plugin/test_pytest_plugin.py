"""The kafka-harness pytest plugin, run the way users run it: pytest in a subprocess with the
plugin loaded from its entry point, against real targets."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.net.netns_support import unavailable

NEEDS = '''
import pytest

@pytest.mark.requires_zookeeper
def test_needs_zookeeper(kafka_target):
    pass

@pytest.mark.requires_faults
def test_needs_faults(kafka_target):
    pass

def test_no_needs(kafka_target):
    assert kafka_target.bootstrap
'''


def test_external_target_skips_what_it_cannot_do_with_the_reason(pytester: pytest.Pytester):
    pytester.makepyfile(NEEDS)
    result = pytester.runpytest_subprocess("--kafka-target", "external", "--kafka-bootstrap-server",
                                           "127.0.0.1:9", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "*needs a target that exposes a ZooKeeper the harness can read; an external target is "
        "reached directly*",
    ])


def test_external_target_needs_a_bootstrap(pytester: pytest.Pytester):
    pytester.makepyfile(NEEDS)
    result = pytester.runpytest_subprocess("--kafka-target", "external")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs a bootstrap address (--kafka-bootstrap-server)*"])


def test_tansu_target_serves_clients_and_skips_faults(pytester: pytest.Pytester):
    pytester.makepyfile('''
import pytest
from confluent_kafka.admin import NewTopic

def test_round_trip(kafka_target, kafka_admin, kafka_producer, kafka_consumer):
    assert kafka_target.kind == "tansu"
    kafka_admin.create_topics([NewTopic("plugin", 1, 1)])["plugin"].result(30)
    p = kafka_producer(acks="all")
    p.produce("plugin", b"hello")
    assert p.flush(30) == 0
    # The dict's earliest reset is what lets a subscriber that comes after the record read it.
    c = kafka_consumer({"auto.offset.reset": "earliest"}, **{"enable.auto.commit": False})
    c.subscribe(["plugin"])
    for _ in range(60):
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            assert msg.value() == b"hello"
            return
    raise AssertionError("nothing consumed")

@pytest.mark.requires_process_faults
def test_kill(kafka_target):
    pass
''')
    result = pytester.runpytest_subprocess("--kafka-target", "tansu", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*the 'tansu' target does not offer it*"])


def test_kfake_target_runs_its_brokers_offers_transactions_and_skips_faults(
        pytester: pytest.Pytester):
    pytester.makepyfile('''
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

@pytest.mark.requires_transactions
@pytest.mark.requires_multi_broker
def test_transactional_producer(kafka_target, kafka_admin):
    assert kafka_target.kind == "kfake"
    assert len(kafka_admin.list_topics(timeout=30).brokers) == 3
    kafka_admin.create_topics([NewTopic("plugin-txn", 1, 1)])["plugin-txn"].result(30)
    p = Producer({"bootstrap.servers": kafka_target.bootstrap, "transactional.id": "plug"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("plugin-txn", b"x")
    p.commit_transaction(30)

@pytest.mark.requires_faults
def test_cut(kafka_target):
    pass

@pytest.mark.requires_process_faults
def test_kill(kafka_target):
    pass
''')
    result = pytester.runpytest_subprocess("--kafka-target", "kfake", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*the 'kfake' target does not offer it*"])


def test_reference_target_offers_faults_and_resets_them_between_tests(
        pytester: pytest.Pytester):
    pytester.makepyfile('''
import pytest
from confluent_kafka.admin import NewTopic

@pytest.mark.requires_faults
@pytest.mark.requires_zookeeper
@pytest.mark.requires_multi_broker
def test_a_isolate(kafka_target, kafka_faults, kafka_admin, kafka_producer):
    kafka_admin.create_topics([NewTopic("plug", 1, 3)])["plug"].result(30)
    p = kafka_producer(acks="all")
    p.produce("plug", b"x")
    assert p.flush(30) == 0
    kafka_faults.isolate("broker-2")
    assert kafka_faults.active()["partition"]

def test_b_healed(kafka_target, kafka_faults):
    assert not kafka_faults.active()["partition"]
''')
    result = pytester.runpytest_subprocess("--kafka-target", "reference", "--kafka-brokers", "3",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=2)


KERNEL_TESTS = '''
import json
import pathlib

import pytest

from harness.raw_client import RawClient


def broker_address(kafka_target):
    host, port = kafka_target.bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


@pytest.mark.requires_faults
def test_a_client_side_cut_times_out(kafka_target, kafka_faults):
    assert kafka_faults.mechanism == "kernel"
    pathlib.Path("namespaces.json").write_text(
        json.dumps(list(kafka_target.cluster.namespaces().values())))
    RawClient(*broker_address(kafka_target), timeout=5).close()
    kafka_faults.isolate("client")
    with pytest.raises(TimeoutError):
        RawClient(*broker_address(kafka_target), timeout=2)
    with pytest.raises(ValueError, match="--network proxy"):
        kafka_faults.add_toxic("client->broker-1", "latency", {"latency": 100})


def test_b_healed_between_tests(kafka_target, kafka_faults):
    assert kafka_faults.active()["partition"] == []
    RawClient(*broker_address(kafka_target), timeout=5).close()


def test_c_crashes(kafka_target, kafka_faults):
    kafka_faults.isolate("broker-1")
    raise RuntimeError("a crashed test")
'''


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_network_kernel_option_partitions_by_iptables_and_leaves_no_namespace(
        pytester: pytest.Pytester):
    pytester.makepyfile(KERNEL_TESTS)
    result = pytester.runpytest_subprocess("--kafka-target", "reference",
                                           "--kafka-network", "kernel", "--kafka-brokers", "1",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*target logs (kept)*"])
    namespaces = json.loads((pytester.path / "namespaces.json").read_text())
    assert len(namespaces) == 2  # ZooKeeper and the broker
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert [namespace for namespace in namespaces if namespace in listed] == []


def test_network_option_is_checked(pytester: pytest.Pytester):
    pytester.makepyfile(NEEDS)
    result = pytester.runpytest_subprocess("--kafka-target", "tansu", "--kafka-network", "kernel")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kafka-network kernel is for the targets the harness runs as a "
                                 "cluster (reference, apache-kafka), not *tansu*"])


def test_apache_kafka_target_through_the_plugin(pytester: pytest.Pytester):
    """``--target apache-kafka``: the header names Kafka's version, every capability marker
    runs (none skips), and a partition cut through the ``faults`` fixture reaches Kafka."""
    pytester.makepyfile(NEEDS + '''
@pytest.mark.requires_process_faults
@pytest.mark.requires_controller
@pytest.mark.requires_multi_broker
def test_isolate_a_broker(kafka_target, kafka_faults):
    assert kafka_target.kind == "apache-kafka" and kafka_target.version.startswith("3.9.")
    cut = kafka_faults.isolate("broker-2")
    assert ("broker-2", "zk") in cut and ("broker-1", "broker-2") in cut
    assert kafka_target.nodes.controller_id() in (1, 2, 3)
''')
    result = pytester.runpytest_subprocess("--kafka-target", "apache-kafka", "-rs")
    result.stdout.fnmatch_lines(["kafka-harness target: apache-kafka 3.9.* (network proxy, "
                                 "backend local); names under 'kh-*-'"])
    result.assert_outcomes(passed=4)
