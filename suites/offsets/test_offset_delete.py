"""OffsetDelete (KIP-496): removing a group's committed offsets, never those it consumes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode
from harness.wire.group_records import encode_subscription

from ..groups._helpers import (
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    SYNC_GROUP,
    RawFactory,
    V,
    coordinator_client,
    err,
    leave,
    stable_member,
)
from ..support import unique_name
from ._helpers import commit, committed, offsets_client


def test_offset_delete_refuses_subscribed_topics_and_deletes_the_rest(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC for partitions of a topic an active
    member subscribes to, deletes offsets of other topics at once, and deletes any once the
    group is Empty; an unknown group gets GROUP_ID_NOT_FOUND [KIP-496; protocol guide,
    OffsetDelete]."""
    subscribed, other = make_topic(partitions=2), make_topic(partitions=1)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [subscribed, other], OFFSET_DELETE,
                            OFFSET_COMMIT, JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP)
    member = stable_member(client, group,
                           protocols=[("range", encode_subscription([subscribed]))])
    as_member = {"generation": member.generation_id, "member_id": member.member_id}
    assert commit(client, group, subscribed, {0: 1, 1: 2}, **as_member) \
        == [ErrorCode.none, ErrorCode.none]
    assert commit(client, group, other, {0: 3}, **as_member) == [ErrorCode.none]

    refused = _delete(client, group, subscribed, [0])
    assert err(refused) == ErrorCode.none
    assert _partition_errors(refused) == [ErrorCode.group_subscribed_to_topic]
    assert committed(client, group, subscribed, [0])[0][0] == 1
    assert _partition_errors(_delete(client, group, other, [0])) == [ErrorCode.none]
    assert committed(client, group, other, [0]) == {0: (-1, "", ErrorCode.none)}

    assert err(leave(client, group, (member.member_id, None))) == ErrorCode.none
    assert _partition_errors(_delete(client, group, subscribed, [0])) == [ErrorCode.none]
    assert [v[0] for v in committed(client, group, subscribed, [0, 1]).values()] == [-1, 2]

    absent = unique_name(request, "absent-")
    assert err(_delete(coordinator_client(kafka_raw_client, absent), absent, subscribed, [0])) \
        == ErrorCode.group_id_not_found


def _delete(client: RawClient, group: str, topic: str, partitions: list[int]) -> Any:
    return client.request(OFFSET_DELETE, V[OFFSET_DELETE], {
        "group_id": group,
        "topics": [{"name": topic, "partitions": [{"partition_index": p} for p in partitions]}]})


def _partition_errors(answer: Any) -> list[ErrorCode]:
    return [err(p) for t in answer.topics for p in t.partitions]
