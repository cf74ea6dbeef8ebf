"""Per-topic log settings, with Kafka's defaults and Kafka's topic-level config names.

The dataclass is frozen so a UnifiedLog can hold one safely while the server swaps in a new one
after AlterConfigs; every value is validated once, here, so the log never meets a nonsense
setting (a zero segment size would roll on every append, a tiny index could never hold an entry).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")

# Kafka's topic-level key for each field, so errors and the server speak Kafka's vocabulary.
TOPIC_CONFIG_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "max_index_size",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "cleanup.policy": "cleanup_policy",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}
_KEY_OF_FIELD = {field: key for key, field in TOPIC_CONFIG_KEYS.items()}

_SEVEN_DAYS_MS = 7 * 24 * 60 * 60 * 1000
_MIN_SEGMENT_BYTES = 14  # Kafka's lower bound for segment.bytes
_TIME_INDEX_ENTRY_SIZE = 12  # an index must hold at least one entry


Clock = Callable[[], int]


class InvalidConfig(ValueError):
    """A log setting out of range; the message names the Kafka key and what is allowed."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = _SEVEN_DAYS_MS
    retention_ms: int = _SEVEN_DAYS_MS
    retention_bytes: int = -1
    flush_interval_messages: int = sys.maxsize
    flush_interval_ms: int | None = None
    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"
    # Kept for config compatibility: segments are unlinked at once because open descriptors keep
    # their bytes readable for in-flight fetches, which is what Kafka's delay protects.
    file_delete_delay_ms: int = 60000
    # How long the cleaner keeps a tombstone (measured from its timestamp), so a consumer
    # reading a compacted topic from the start has that long to see the delete.
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    # The cleaner compacts a log only once more than this share of its cleanable bytes (all
    # segments but the active one) has not been cleaned yet, as Kafka's LogCleaner does.
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        _at_least(self, "segment_bytes", _MIN_SEGMENT_BYTES)
        _at_least(self, "segment_ms", 1)
        _at_least(self, "retention_ms", -1)
        _at_least(self, "retention_bytes", -1)
        _at_least(self, "flush_interval_messages", 1)
        if self.flush_interval_ms is not None:
            _at_least(self, "flush_interval_ms", 0)
        _at_least(self, "index_interval_bytes", 0)
        _at_least(self, "max_index_size", _TIME_INDEX_ENTRY_SIZE)
        _at_least(self, "max_message_bytes", 0)
        _at_least(self, "file_delete_delay_ms", 0)
        _at_least(self, "delete_retention_ms", 0)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfig(f"min.cleanable.dirty.ratio (min_cleanable_dirty_ratio) must be "
                                f"in [0, 1], got {self.min_cleanable_dirty_ratio}")
        _one_of(self, "message_timestamp_type", TIMESTAMP_TYPES)
        _one_of(self, "cleanup_policy", CLEANUP_POLICIES)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def retention_enabled(self) -> bool:
        """Compact-only topics are never trimmed by time or size, as in Kafka."""
        return "delete" in self.cleanup_policy

    def with_overrides(self, **overrides: object) -> LogConfig:
        """A copy with some fields replaced (python field names), validated like the original."""
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InvalidConfig(f"unknown log config field(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **overrides)  # type: ignore[arg-type]

    def with_topic_overrides(self, properties: Mapping[str, str]) -> LogConfig:
        """A copy with Kafka topic-level keys applied (CreateTopics/AlterConfigs string values)."""
        overrides: dict[str, object] = {}
        for key, raw in properties.items():
            field = TOPIC_CONFIG_KEYS.get(key)
            if field is None:
                allowed = ", ".join(sorted(TOPIC_CONFIG_KEYS))
                raise InvalidConfig(f"unknown topic config {key!r}; known keys: {allowed}")
            overrides[field] = _parse_value(key, field, raw)
        return self.with_overrides(**overrides)


def _parse_value(key: str, field: str, raw: str) -> object:
    if field in ("message_timestamp_type", "cleanup_policy"):
        return raw.strip()
    if field == "flush_interval_ms" and raw.strip() == str(2**63 - 1):
        return None  # Kafka spells "never" as Long.MAX_VALUE
    try:
        return int(raw.strip())
    except ValueError:
        raise InvalidConfig(f"{key} must be an integer, got {raw!r}") from None


def _at_least(config: LogConfig, field: str, minimum: int) -> None:
    value = getattr(config, field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(f"{_KEY_OF_FIELD[field]} ({field}) must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidConfig(
            f"{_KEY_OF_FIELD[field]} ({field}) must be at least {minimum}, got {value}"
        )


def _one_of(config: LogConfig, field: str, allowed: tuple[str, ...]) -> None:
    value = getattr(config, field)
    if value not in allowed:
        raise InvalidConfig(
            f"{_KEY_OF_FIELD[field]} ({field}) must be one of {', '.join(allowed)}; got {value!r}"
        )


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default clock, replaced by a fake one in tests."""
    return time.time_ns() // 1_000_000
