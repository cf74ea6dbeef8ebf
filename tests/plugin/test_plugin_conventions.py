"""The plugin's conventions for people who run it next to their own tests and brokers: prefixed
options and fixtures (the first release's names still work, with a deprecation warning), a
bootstrap server alone meaning "test that broker", a report header naming the target, names
under one prefix that are deleted from a shared broker afterwards, and the suites safe under
pytest-xdist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from harness.cluster.targets import Target
from harness.conformance.suites import suites_dir

ONE_TEST = '''
def test_target(kafka_target):
    assert kafka_target.kind == "external"
    assert kafka_target.bootstrap == "127.0.0.1:9"
'''

OLD_FIXTURE = '''
def test_old_fixture(cluster):
    assert cluster.kind == "external"
'''

LEAVES_THINGS = '''
from confluent_kafka.admin import NewTopic


def test_makes_a_topic_and_a_group(kafka_target, kafka_admin, kafka_names, kafka_producer,
                                   kafka_consumer):
    topic = kafka_names("topic")
    kafka_admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = kafka_producer()
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    consumer = kafka_consumer(**{"auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            consumer.commit(message, asynchronous=False)
            return
    raise AssertionError("nothing consumed")
'''


def test_prefixed_options_and_fixtures(pytester: pytest.Pytester):
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_subprocess("--kafka-target", "external",
                                           "--kafka-bootstrap-server", "127.0.0.1:9")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kafka-harness target: external (bootstrap server "
                                 "127.0.0.1:9); names under 'kh-*-'"])


def test_a_bootstrap_server_alone_means_test_that_broker(pytester: pytest.Pytester):
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_subprocess("--kafka-bootstrap-server", "127.0.0.1:9")
    result.assert_outcomes(passed=1)


def test_the_first_release_names_still_work_and_warn(pytester: pytest.Pytester):
    pytester.makepyfile(OLD_FIXTURE)
    result = pytester.runpytest_subprocess("--target", "external", "--bootstrap", "127.0.0.1:9")
    result.assert_outcomes(passed=1, warnings=3)
    result.stdout.fnmatch_lines([
        "*--target is deprecated and will be removed in the next release; use --kafka-target*",
        "*--bootstrap is deprecated*use --kafka-bootstrap-server*",
        "*the fixture 'cluster' is deprecated*use 'kafka_target'*",
    ])


def test_both_spellings_of_one_option_are_a_usage_error(pytester: pytest.Pytester):
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest_subprocess("--kafka-target", "external", "--target", "tansu",
                                           "--kafka-bootstrap-server", "127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--target and --kafka-target given together*"])


def _names_on(bootstrap: str) -> tuple[set[str], set[str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")}
    groups = {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result(15).valid}
    return topics, groups


def _prefix(output: str) -> str:
    found = re.search(r"names under '(kh-[0-9a-f]{8}-)'", output)
    assert found, "the report header names no prefix"
    return found.group(1)


def test_a_users_broker_is_left_as_the_session_found_it(pytester: pytest.Pytester,
                                                         users_broker: Target):
    before = _names_on(users_broker.bootstrap)
    pytester.makepyfile(LEAVES_THINGS)
    result = pytester.runpytest_subprocess("--kafka-bootstrap-server", users_broker.bootstrap)
    result.assert_outcomes(passed=1)
    prefix = _prefix(result.stdout.str())
    result.stdout.fnmatch_lines([f"kafka-harness cleanup of '{prefix}': deleted 1 topic(s), "
                                 "1 group(s)"])
    assert _names_on(users_broker.bootstrap) == before


def test_the_suites_run_under_xdist_on_one_users_broker(users_broker: Target, tmp_path: Path):
    """Two workers, two sessions, one broker: no test sees another's names, and the broker is
    left clean by both."""
    before = _names_on(users_broker.bootstrap)
    where = suites_dir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(where / "protocol"), str(where / "offsets"),
         "-n", "2", "-q", "-p", "no:cacheprovider", "--kafka-bootstrap-server",
         users_broker.bootstrap, "-m", "not slow"],
        cwd=where.parent, capture_output=True, text=True, timeout=900)
    tail = run.stdout[-3000:]
    assert run.returncode == 0, tail
    assert re.search(r"\d+ passed", tail) and "failed" not in tail, tail
    assert _names_on(users_broker.bootstrap) == before
