import sys

import pytest

from reference_broker.log.log_config import InvalidConfig, LogConfig


def test_defaults_match_kafka():
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.flush_interval_messages == sys.maxsize
    assert config.flush_interval_ms is None
    assert config.index_interval_bytes == 4096
    assert config.max_index_size == 10 * 1024 * 1024
    assert config.max_message_bytes == 1048588
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == "delete"
    assert config.file_delete_delay_ms == 60000


def test_with_overrides_validates():
    config = LogConfig().with_overrides(segment_bytes=1000, message_timestamp_type="LogAppendTime")
    assert config.segment_bytes == 1000 and config.log_append_time
    with pytest.raises(InvalidConfig, match="unknown log config field"):
        LogConfig().with_overrides(segment_size=5)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("segment_bytes", 5, "segment.bytes"),
        ("retention_ms", -2, "retention.ms"),
        ("flush_interval_messages", 0, "flush.messages"),
        ("max_index_size", 4, "segment.index.bytes"),
        ("message_timestamp_type", "Whenever", "CreateTime, LogAppendTime"),
        ("cleanup_policy", "shred", "delete, compact"),
        ("segment_ms", "1", "must be an integer"),
    ],
)
def test_bad_values_name_the_kafka_key_and_what_is_allowed(field, value, message):
    with pytest.raises(InvalidConfig, match=message):
        LogConfig(**{field: value})


def test_topic_overrides_use_kafka_key_names():
    config = LogConfig().with_topic_overrides(
        {
            "retention.ms": "-1",
            "segment.bytes": "2048",
            "cleanup.policy": "compact",
            "flush.ms": "9223372036854775807",
        }
    )
    assert (config.retention_ms, config.segment_bytes) == (-1, 2048)
    assert not config.retention_enabled
    assert config.flush_interval_ms is None
    with pytest.raises(InvalidConfig, match="retention.bytes must be an integer"):
        LogConfig().with_topic_overrides({"retention.bytes": "lots"})
    with pytest.raises(InvalidConfig, match="unknown topic config 'colour'"):
        LogConfig().with_topic_overrides({"colour": "red"})
