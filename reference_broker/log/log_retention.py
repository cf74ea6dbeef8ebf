"""Which segments retention may delete (Kafka's deleteRetentionMsBreachedSegments & co.).

A pure decision over the segment list, so UnifiedLog only has to carry it out. Segments go
oldest first and never the active one, as a whole prefix: deleting from the middle would leave
a hole that reads and the log start offset could not describe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from reference_broker.log.log_config import LogConfig
from reference_broker.log.segment import LogSegment

_T = TypeVar("_T")


def deletable_prefix(
    segments: Sequence[LogSegment], config: LogConfig, log_start_offset: int, now_ms: int
) -> int:
    """How many leading segments retention.ms (largest timestamp too old), retention.bytes
    (the log is too big even without them) or the log start offset (wholly below it) remove."""
    candidates = list(segments[:-1])
    count = 0
    if config.retention_enabled and config.retention_ms >= 0:
        count = _prefix_length(
            candidates, lambda s: now_ms - s.largest_timestamp > config.retention_ms
        )
    if config.retention_enabled and config.retention_bytes >= 0:
        excess = sum(segment.size for segment in segments) - config.retention_bytes
        by_size = 0
        for segment in candidates:
            if excess - segment.size < 0:
                break
            excess -= segment.size
            by_size += 1
        count = max(count, by_size)
    below_start = _prefix_length(
        list(zip(candidates, segments[1:], strict=False)),
        lambda pair: pair[1].base_offset <= log_start_offset,
    )
    return max(count, below_start)


def _prefix_length(items: list[_T], predicate: Callable[[_T], bool]) -> int:
    count = 0
    for item in items:
        if not predicate(item):
            break
        count += 1
    return count
