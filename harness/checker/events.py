"""What the pure-Python rules (rules.py and rules_txn.py) read off a validated history's rows.

The rules take a validated history (harness.history.read_history), in which the rows they look
at carry the columns they need; a row without one is a caller's bug, reported by name instead of
a TypeError. Kept apart from both rule modules so that neither has to import the other for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.history import Event

TPO = tuple[str, int, int]
Instance = tuple[dict[str, Any], Sequence[Event]]  # example fields, context rows


def has_position(event: Event) -> bool:
    """An ok send states where its value is only when both partition and offset are known."""
    return event.partition >= 0 and event.offset is not None and event.offset >= 0


def is_read(event: Event) -> bool:
    return event.f == "poll" and event.type == "ok"


def _unvalidated(event: Event, column: str) -> ValueError:
    return ValueError(f"{column} is null in a row of a validated history: {event}")


def topic_of(event: Event) -> str:
    if event.topic is None:
        raise _unvalidated(event, "topic")
    return event.topic


def offset_of(event: Event) -> int:
    if event.offset is None:
        raise _unvalidated(event, "offset")
    return event.offset


def value_of(event: Event) -> str:
    if event.value is None:
        raise _unvalidated(event, "value")
    return event.value


def tpo_of(event: Event) -> TPO:
    return topic_of(event), event.partition, offset_of(event)
