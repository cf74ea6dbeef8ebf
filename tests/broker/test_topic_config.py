"""Topic configs the cleaner and the log honour: validated with Kafka's wording, and the topic's
value (or the broker's synonym) is what its LogConfig holds."""

import pytest

from reference_broker.config import KafkaConfig
from reference_broker.server.topic_config import InvalidConfig, log_config, validate


def test_min_cleanable_dirty_ratio_is_validated_and_reaches_the_log_config():
    assert validate({"min.cleanable.dirty.ratio": "0.9"}) == {"min.cleanable.dirty.ratio": "0.9"}
    with pytest.raises(InvalidConfig, match="min.cleanable.dirty.ratio: a number in"):
        validate({"min.cleanable.dirty.ratio": "1.5"})
    broker = KafkaConfig({"log.cleaner.min.cleanable.ratio": "0.25"})
    assert log_config(broker, {}).min_cleanable_dirty_ratio == 0.25
    assert log_config(broker, {"min.cleanable.dirty.ratio": "0.9"}).min_cleanable_dirty_ratio \
        == 0.9
    assert log_config(KafkaConfig({}), {}).min_cleanable_dirty_ratio == 0.5  # Kafka's default


def test_file_delete_delay_ms_takes_any_delay_and_refuses_a_negative_one():
    assert validate({"file.delete.delay.ms": "0"}) == {"file.delete.delay.ms": "0"}
    with pytest.raises(InvalidConfig, match="file.delete.delay.ms"):
        validate({"file.delete.delay.ms": "-1"})
    assert log_config(KafkaConfig({}), {}).file_delete_delay_ms == 60000
