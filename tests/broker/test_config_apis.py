"""DescribeConfigs and IncrementalAlterConfigs, answered exactly (raw protocol)."""

import pytest

from harness.raw_client import RawClient

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def client(broker):
    with RawClient(broker.host, broker.port) as raw:
        yield raw


def describe(client, resource_type, name, keys=None):
    body = client.request(DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": False})
    (result,) = body.results
    return result.error_code.value, {c.name: c for c in result.configs}


def alter(client, topic, *ops, validate_only=False):
    body = client.request(INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC, "resource_name": topic, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only})
    (response,) = body.responses
    return response.error_code.value, response.error_message


def test_broker_resource_reports_static_and_default_sources(client, broker):
    error, configs = describe(client, BROKER, "0", ["log.dirs", "message.max.bytes"])
    assert error == 0 and set(configs) == {"log.dirs", "message.max.bytes"}
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["log.dirs"].config_source == 4  # STATIC_BROKER_CONFIG
    assert configs["message.max.bytes"].config_source == 5  # DEFAULT_CONFIG
    assert describe(client, BROKER, "7")[0] == 42  # INVALID_REQUEST: not this broker


def test_set_delete_append_subtract_and_synonyms(client, topic):
    assert alter(client, topic, ("retention.ms", SET, "1000"),
                 ("cleanup.policy", APPEND, "compact")) == (0, None)
    _, configs = describe(client, TOPIC, topic)
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
    assert [s.name for s in configs["retention.ms"].synonyms] == ["retention.ms",
                                                                  "log.retention.ms"]
    assert configs["cleanup.policy"].value == "compact"
    assert alter(client, topic, ("cleanup.policy", APPEND, "delete"))[0] == 0
    assert describe(client, TOPIC, topic)[1]["cleanup.policy"].value == "compact,delete"
    assert alter(client, topic, ("cleanup.policy", SUBTRACT, "compact"),
                 ("retention.ms", DELETE, None))[0] == 0
    _, configs = describe(client, TOPIC, topic)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["retention.ms"].config_source == 5  # back to the broker default


@pytest.mark.parametrize("ops,error", [
    ((("no.such.config", SET, "1"),), 40),  # INVALID_CONFIG
    ((("retention.ms", SET, "soon"),), 40),
    ((("retention.ms", APPEND, "1"),), 40),  # append is for list configs only
    ((("retention.ms", SET, "1"), ("retention.ms", SET, "2")), 42),  # duplicate keys
])
def test_invalid_alterations_change_nothing(client, topic, ops, error):
    assert alter(client, topic, *ops)[0] == error
    assert describe(client, TOPIC, topic)[1]["retention.ms"].config_source == 5


def test_validate_only_changes_nothing(client, topic):
    assert alter(client, topic, ("retention.ms", SET, "5"), validate_only=True)[0] == 0
    assert describe(client, TOPIC, topic)[1]["retention.ms"].config_source == 5


def test_unknown_topic(client):
    assert describe(client, TOPIC, "no-such-topic-for-configs")[0] == 3
    assert alter(client, "no-such-topic-for-configs", ("retention.ms", SET, "1"))[0] == 3
