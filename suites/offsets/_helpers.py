"""OffsetCommit / OffsetFetch through raw requests, on top of the groups suite's flows."""

from __future__ import annotations

from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode

from ..groups._helpers import (
    OFFSET_COMMIT,
    RawFactory,
    V,
    broker_addresses,
    coordinator_client,
    err,
    fetch_offsets,
    wait_topic_known,
)

__all__ = ["broker_addresses", "commit", "committed", "offsets_client", "wait_topic_known"]


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
