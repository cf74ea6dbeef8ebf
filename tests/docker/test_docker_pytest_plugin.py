"""``pytest --backend docker``: the plugin's fixtures on a containerised reference target, the
same tests as on the local backend, and the option combinations that make no sense refused."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

DOCKER_TESTS = '''
import pytest
from confluent_kafka.admin import NewTopic

from harness.cluster.local import metadata_broker_ids


@pytest.mark.requires_faults
@pytest.mark.requires_process_faults
@pytest.mark.requires_zookeeper
@pytest.mark.requires_multi_broker
def test_a_faults_and_process_faults(kafka_target, kafka_faults, kafka_admin, kafka_producer):
    nodes = kafka_target.nodes
    assert type(nodes).__name__ == "DockerCluster"
    assert kafka_faults.mechanism == "kernel"
    kafka_admin.create_topics([NewTopic("plug", 1, 3)])["plug"].result(30)
    p = kafka_producer(acks="all")
    p.produce("plug", b"x")
    assert p.flush(30) == 0
    assert nodes.controller_id() in (1, 2, 3) and nodes.controller_epoch() >= 1
    assert nodes.registered_broker_ids() == [1, 2, 3]
    kafka_faults.isolate("broker-2")
    assert kafka_faults.active()["partition"]
    # An observer reaches a broker's own listener whatever the fault.
    broker = nodes.broker(2)
    assert metadata_broker_ids(broker.host, broker.port) >= {2}
    nodes.pause(1)
    assert nodes.kill(3) == 137
    assert nodes.running_broker_ids() == [1, 2]


def test_b_reset_healed_resumed_and_restarted(kafka_target, kafka_faults):
    nodes = kafka_target.nodes
    assert kafka_faults.active() == {"partition": [], "toxics": {}}
    assert nodes.paused == frozenset()
    assert nodes.running_broker_ids() == [1, 2, 3]
    assert all(nodes.broker(b).pid for b in (1, 2, 3))
'''


def test_the_fixtures_run_against_containers(pytester: pytest.Pytester):
    pytester.makepyfile(DOCKER_TESTS)
    result = pytester.runpytest_subprocess("--kafka-backend", "docker", "--kafka-brokers", "3",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize(("options", "message"), [
    (["--kafka-network", "kernel"], "--kafka-network kernel is for the local backend"),
    (["--kafka-target", "tansu"],
     "--kafka-backend docker runs the targets apache-kafka, apache-kafka-kraft, reference"),
])
def test_docker_with_options_it_cannot_honour_is_a_usage_error(
        pytester: pytest.Pytester, options: list[str], message: str):
    pytester.makepyfile("def test_nothing(cluster):\n    pass\n")
    result = pytester.runpytest_subprocess("--kafka-backend", "docker", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
