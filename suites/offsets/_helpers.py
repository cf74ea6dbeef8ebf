"""OffsetCommit / OffsetFetch through raw requests, on top of the groups suite's flows."""

from __future__ import annotations

from typing import Any

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from ..groups._helpers import (
    METADATA,
    OFFSET_COMMIT,
    WAIT_S,
    RawFactory,
    V,
    coordinator_client,
    err,
    fetch_offsets,
)


def wait_topic_known(client: RawClient, topic: str) -> None:
    """Wait until the broker behind `client` has `topic`, with a leader per partition, in its
    own metadata: a new topic reaches each broker's metadata cache on its own time, and until
    then an OffsetCommit there answers UNKNOWN_TOPIC_OR_PARTITION, as on Kafka."""
    def known() -> bool:
        answer: Any = client.request(METADATA, V[METADATA], {"topics": [{"name": topic}]})
        return any(t.name == topic and err(t) == ErrorCode.none and t.partitions
                   and all(p.leader_id >= 0 for p in t.partitions) for t in answer.topics)

    wait_for(known, WAIT_S, f"the broker to know topic {topic}", retry_on=())


def offsets_client(raw_client: RawFactory, group: str, topics: list[str], *apis: int
                   ) -> RawClient:
    """A raw client on `group`'s coordinator (see coordinator_client) that knows `topics`."""
    client = coordinator_client(raw_client, group, *apis)
    for topic in topics:
        wait_topic_known(client, topic)
    return client


def commit(client: RawClient, group: str, topic: str, offsets: dict[int, int], *,
           generation: int = -1, member_id: str = "", metadata: str | None = None,
           instance: str | None = None) -> list[ErrorCode]:
    """OffsetCommit v7 of {partition: offset}; each partition's error code, in order.

    generation -1 and an empty member id is a simple consumer's commit (no group membership)."""
    answer = client.request(OFFSET_COMMIT, V[OFFSET_COMMIT], {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": instance,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": metadata} for p, o in offsets.items()]}]})
    return [err(p) for t in answer.topics for p in t.partitions]


def committed(client: RawClient, group: str, topic: str, partitions: list[int]
              ) -> dict[int, tuple[int, str | None, ErrorCode]]:
    """OffsetFetch: {partition: (offset, metadata, error code)}; asserts no group-level error."""
    answer = fetch_offsets(client, group, topic, partitions)
    assert err(answer) == ErrorCode.none, f"OffsetFetch({group}) answered {err(answer)!r}"
    return {p.partition_index: (p.committed_offset, p.metadata, err(p))
            for t in answer.topics if t.name == topic for p in t.partitions}


def broker_addresses(client: RawClient) -> dict[int, str]:
    """{node id: host:port} of every broker the target's Metadata lists."""
    answer: Any = client.request(METADATA, V[METADATA], {"topics": []})
    return {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
