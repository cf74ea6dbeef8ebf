"""MetadataCache's watchers: what wakes a request parked on the cache (CreateTopics waiting for
leaders, DeleteTopics waiting for the topic to go)."""

from __future__ import annotations

import uuid

from reference_broker.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo


def _topic(name: str, leader: int) -> TopicInfo:
    return TopicInfo(name, uuid.uuid4(), {0: PartitionInfo(0, leader, 0, (1,), (1,))})


def test_watchers_see_every_topic_change_until_unwatched() -> None:
    cache = MetadataCache("cluster", 1)
    seen: list[set[str]] = []
    unwatch = cache.watch(lambda: seen.append({t.name for t in cache.topics()}))
    cache.put_topic(_topic("a", -1))
    cache.put_topic(_topic("a", 1))           # a leader elected: a change too
    assert cache.remove_topic("missing") is None  # nothing removed: nothing to wake
    cache.remove_topic("a")
    unwatch()
    cache.put_topic(_topic("b", 1))
    assert seen == [{"a"}, {"a"}, set()]
