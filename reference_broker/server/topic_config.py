"""Topic-level configs: names, validation, broker defaults (synonyms) and the LogConfig they make.

A topic config overrides the broker config it is a synonym of (retention.ms ← log.retention.ms),
exactly the precedence DescribeConfigs reports. Validation errors carry Kafka's INVALID_CONFIG
wording: the key, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reference_broker.config import MAX_INT, MAX_LONG, KafkaConfig, parse_ratio
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
    default: str | None = None  # Kafka's default where no broker config (synonym) gives one


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


def _only(value: str) -> Callable[[str], str]:
    """A config this broker honours at Kafka's default value only: any other is refused
    (INVALID_CONFIG) rather than accepted and ignored."""
    return _choice(value)


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        normalized = ",".join(sorted(p.strip() for p in raw.split(",")))
        if normalized not in options:
            raise ValueError
        return normalized

    return parse


def _gzip_level(raw: str) -> int:
    value = int(raw)
    if value != -1 and not 1 <= value <= 9:
        raise ValueError
    return value


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
    # Unset, Kafka's topics never flush on time: flush.ms is Long.MAX_VALUE.
    TopicConfigDef("flush.ms", "log.flush.interval.ms", _long(0), "an integer >= 0", 5,
                   "flush_interval_ms", str(MAX_LONG)),
    TopicConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms", _long(0),
                   "an integer >= 0", 5, "delete_retention_ms"),
    TopicConfigDef("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", parse_ratio,
                   "a number in [0, 1]", 6, "min_cleanable_dirty_ratio"),
    # Any delay is accepted though segments are unlinked at once: the descriptors fetches hold
    # keep the bytes readable, which is what Kafka's delay before deleting the files protects.
    TopicConfigDef("file.delete.delay.ms", "log.segment.delete.delay.ms", _long(0),
                   "an integer >= 0", 5, "file_delete_delay_ms"),
    TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", _long(0, MAX_INT),
                   "an integer >= 0", 3, "index_interval_bytes"),
    TopicConfigDef("segment.index.bytes", None, _long(4, MAX_INT),
                   "an integer in [4, 2147483647]", 3, "max_index_size", "10485760"),
    # Kafka's topic configs whose default is what this broker does, and nothing else: it keeps
    # batches as producers compressed them, never throttles, tiers, preallocates or jitters,
    # validates no timestamp bound, serves only Fetch v4+ (nothing to down-convert), writes
    # only record batch v2, and compacts every segment but the active one at each pass.
    TopicConfigDef("compression.type", None, _only("producer"),
                   "producer (batches are kept as the producer compressed them)", 2, None,
                   "producer"),
    TopicConfigDef("compression.gzip.level", None, _gzip_level,
                   "-1 or an integer in [1, 9] (used only when the broker recompresses)", 3,
                   None, "-1"),
    TopicConfigDef("compression.lz4.level", None, _long(1, 17),
                   "an integer in [1, 17] (used only when the broker recompresses)", 3, None,
                   "9"),
    TopicConfigDef("compression.zstd.level", None, _long(-131072, 22),
                   "an integer in [-131072, 22] (used only when the broker recompresses)", 3,
                   None, "3"),
    *(TopicConfigDef(name, None, _only(""), "empty (replication is never throttled)", 7, None,
                     "") for name in ("leader.replication.throttled.replicas",
                                      "follower.replication.throttled.replicas")),
    *(TopicConfigDef(name, None, _only("-2"), "-2 (no tiered storage: the local log is the "
                     "whole log)", 5, None, "-2")
      for name in ("local.retention.ms", "local.retention.bytes")),
    *(TopicConfigDef(name, None, _only("false"), "false (no tiered storage)", 1, None, "false")
      for name in ("remote.storage.enable", "remote.log.copy.disable",
                   "remote.log.delete.on.disable")),
    TopicConfigDef("preallocate", None, _only("false"), "false (segments grow as written)", 1,
                   None, "false"),
    TopicConfigDef("segment.jitter.ms", None, _only("0"), "0 (segments roll without jitter)", 5,
                   None, "0"),
    *(TopicConfigDef(name, None, _only(str(MAX_LONG)),
                     f"{MAX_LONG} (record timestamps are not bounded)", 5, None, str(MAX_LONG))
      for name in ("message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
                   "message.timestamp.difference.max.ms")),
    TopicConfigDef("message.downconversion.enable", None, _bool,
                   "true or false (Fetch v4+ never needs down-conversion)", 1, None, "true"),
    TopicConfigDef("message.format.version", None, _only("3.0-IV1"),
                   "3.0-IV1 (record batch v2 only)", 2, None, "3.0-IV1"),
    TopicConfigDef("min.compaction.lag.ms", None, _only("0"),
                   "0 (every segment but the active one is compacted at each pass)", 5, None,
                   "0"),
    TopicConfigDef("max.compaction.lag.ms", None, _only(str(MAX_LONG)),
                   f"{MAX_LONG} (compaction is not forced by age)", 5, None, str(MAX_LONG)),
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
    if synonym is None:
        return DEFS[key].default
    if synonym == "log.retention.ms":
        return str(broker.retention_ms)
    if synonym == "log.roll.ms":
        return str(broker.roll_ms)
    value = broker[synonym]
    if value is None:
        return DEFS[key].default
    return str(value).lower() if isinstance(value, bool) else str(value)


# DescribeConfigs' ConfigSource values.
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@dataclass(frozen=True)
class ConfigValue:
    """One topic config as DescribeConfigs and CreateTopics report it: its value and where
    that value comes from (the topic, the broker's server.properties, or Kafka's default)."""

    definition: TopicConfigDef
    value: str | None
    source: int


def default_source(broker: KafkaConfig, key: str) -> int:
    """STATIC_BROKER_CONFIG when server.properties sets the config's broker synonym."""
    synonym = DEFS[key].broker_synonym
    return STATIC_BROKER_CONFIG if synonym and broker.is_set(synonym) else DEFAULT_CONFIG


def described(broker: KafkaConfig, overrides: Mapping[str, str]) -> list[ConfigValue]:
    """Every topic config of a topic with ``overrides``, by name."""
    values = []
    for key, definition in sorted(DEFS.items()):
        if key in overrides:
            values.append(ConfigValue(definition, overrides[key], DYNAMIC_TOPIC_CONFIG))
        else:
            values.append(ConfigValue(definition, broker_default(broker, key),
                                      default_source(broker, key)))
    return values


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
