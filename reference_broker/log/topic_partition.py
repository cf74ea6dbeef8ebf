"""Partition directory names: `<topic>-<partition>`, as Kafka lays out a log dir."""

from __future__ import annotations

import re
from typing import NamedTuple

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"


def validate_topic(topic: str) -> None:
    """Kafka's rule: 1-249 of [a-zA-Z0-9._-], and not '.' or '..' (they are directory names)."""
    if topic in (".", "..") or not _LEGAL_TOPIC.fullmatch(topic) or len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(
            f"illegal topic name {topic!r}: use 1-{MAX_TOPIC_LENGTH} characters from "
            "[a-zA-Z0-9._-], not '.' or '..'"
        )


def parse_topic_partition(dir_name: str) -> TopicPartition:
    """Split at the last '-': topics may contain '-' and '.', partitions are plain integers."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not partition.isdigit() or not partition.isascii():
        raise ValueError(f"{dir_name!r} is not a partition directory name (<topic>-<partition>)")
    validate_topic(topic)
    return TopicPartition(topic, int(partition))
