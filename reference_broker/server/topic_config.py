"""Topic-level configs: names, validation, broker defaults (synonyms) and the LogConfig they make.

A topic config overrides the broker config it is a synonym of (retention.ms ← log.retention.ms),
exactly the precedence DescribeConfigs reports. Validation errors carry Kafka's INVALID_CONFIG
wording: the key, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reference_broker.config import MAX_INT, MAX_LONG, KafkaConfig
from reference_broker.log.log_config import LogConfig


class InvalidConfig(ValueError):
    pass


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    broker_synonym: str | None
    parse: Callable[[str], Any]
    allowed: str
    config_type: int  # DescribeConfigs v3+ config_type: 1 BOOLEAN, 3 INT, 5 LONG, 2 STRING, 7 LIST
    log_field: str | None


def _long(low: int, high: int = MAX_LONG) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError
        return value

    return parse


def _bool(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError
    return raw.lower() == "true"


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        normalized = ",".join(sorted(p.strip() for p in raw.split(",")))
        if normalized not in options:
            raise ValueError
        return normalized

    return parse


DEFS: dict[str, TopicConfigDef] = {d.name: d for d in (
    TopicConfigDef("cleanup.policy", "log.cleanup.policy",
                   _choice("delete", "compact", "compact,delete"),
                   "delete, compact or compact,delete", 7, "cleanup_policy"),
    TopicConfigDef("retention.ms", "log.retention.ms", _long(-1), "-1 or an integer >= 0", 5,
                   "retention_ms"),
    TopicConfigDef("retention.bytes", "log.retention.bytes", _long(-1),
                   "-1 or an integer >= 0", 5, "retention_bytes"),
    TopicConfigDef("segment.bytes", "log.segment.bytes", _long(14, MAX_INT),
                   "an integer in [14, 2147483647]", 3, "segment_bytes"),
    TopicConfigDef("segment.ms", "log.roll.ms", _long(1), "an integer >= 1", 5, "segment_ms"),
    TopicConfigDef("max.message.bytes", "message.max.bytes", _long(0, MAX_INT),
                   "an integer in [0, 2147483647]", 3, "max_message_bytes"),
    TopicConfigDef("min.insync.replicas", "min.insync.replicas", _long(1, MAX_INT),
                   "an integer >= 1", 3, None),
    TopicConfigDef("unclean.leader.election.enable", "unclean.leader.election.enable", _bool,
                   "true or false", 1, None),
    TopicConfigDef("message.timestamp.type", "log.message.timestamp.type",
                   _choice("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime", 2,
                   "message_timestamp_type"),
    TopicConfigDef("flush.messages", "log.flush.interval.messages", _long(1),
                   "an integer >= 1", 5, "flush_interval_messages"),
    TopicConfigDef("flush.ms", "log.flush.interval.ms", _long(0), "an integer >= 0", 5,
                   "flush_interval_ms"),
    TopicConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms", _long(0),
                   "an integer >= 0", 5, "delete_retention_ms"),
    TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", _long(0, MAX_INT),
                   "an integer >= 0", 3, "index_interval_bytes"),
)}


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides; returns them normalized. Raises InvalidConfig naming the key."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        definition = DEFS.get(key)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        if raw is None:
            raise InvalidConfig(f"Null value not supported for topic config {key}")
        try:
            value = definition.parse(raw.strip())
        except ValueError:
            raise InvalidConfig(
                f"Invalid value {raw} for configuration {key}: {definition.allowed}"
            ) from None
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def broker_default(broker: KafkaConfig, key: str) -> str | None:
    synonym = DEFS[key].broker_synonym
    if synonym == "log.retention.ms":
        return str(broker.retention_ms)
    if synonym == "log.roll.ms":
        return str(broker.roll_ms)
    value = broker[synonym] if synonym else None
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def effective(broker: KafkaConfig, overrides: Mapping[str, str], key: str) -> Any:
    raw = overrides.get(key)
    if raw is None:
        raw = broker_default(broker, key)
    return None if raw is None else DEFS[key].parse(raw)


def log_config(broker: KafkaConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The LogConfig of a topic: broker defaults with the topic's overrides applied."""
    values: dict[str, Any] = {}
    for key, definition in DEFS.items():
        if definition.log_field is None:
            continue
        value = effective(broker, overrides, key)
        if value is not None:
            values[definition.log_field] = value
    return LogConfig(**values)
