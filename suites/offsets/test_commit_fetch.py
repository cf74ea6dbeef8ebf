"""OffsetCommit / OffsetFetch: the round trip, unknown groups, and who may commit when."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.cluster.targets import Target
from harness.wire.errors import ErrorCode

from ..groups._helpers import (
    JOIN_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
    RawFactory,
    err,
    fetch_offsets,
    join,
    stable_member,
    sync,
)
from ..support import unique_name
from ._helpers import commit, committed, offsets_client


def test_committed_offsets_and_metadata_are_fetched_back(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """OffsetFetch returns the offset and metadata string last committed per partition, and a
    later commit replaces them; a simple consumer (generation -1, no member id) may commit to a
    group without members [protocol guide, OffsetCommit/OffsetFetch; KIP-98 metadata]."""
    topic = make_topic(partitions=2)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT)
    assert commit(client, group, topic, {0: 5, 1: 7}, metadata="checkpoint-1") \
        == [ErrorCode.none, ErrorCode.none]
    assert committed(client, group, topic, [0, 1]) \
        == {0: (5, "checkpoint-1", ErrorCode.none), 1: (7, "checkpoint-1", ErrorCode.none)}
    assert commit(client, group, topic, {1: 11}, metadata="checkpoint-2") == [ErrorCode.none]
    assert committed(client, group, topic, [0, 1]) \
        == {0: (5, "checkpoint-1", ErrorCode.none), 1: (11, "checkpoint-2", ErrorCode.none)}
    everything = fetch_offsets(client, group)
    assert err(everything) == ErrorCode.none
    assert sorted((t.name, p.partition_index, p.committed_offset)
                  for t in everything.topics for p in t.partitions) \
        == [(topic, 0, 5), (topic, 1, 11)]


def test_fetching_offsets_of_an_unknown_group_answers_minus_one_without_error(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """OffsetFetch for a group (or partition) with no committed offset answers offset -1 and
    no metadata with error NONE — not an error — at v1 and later, and fetching all of an
    unknown group's offsets answers none [protocol guide, OffsetFetch; Kafka
    OffsetFetchResponse.INVALID_OFFSET].

    "No metadata" is Kafka's empty string or the schema's null: clients treat both alike."""
    topic = make_topic(partitions=1, exact=False)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic])
    assert _without_metadata(committed(client, group, topic, [0])) == {0: (-1, ErrorCode.none)}
    legacy = client.request(OFFSET_FETCH, 1, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]})
    assert {p.partition_index: (p.committed_offset, p.metadata or "", err(p))
            for t in legacy.topics for p in t.partitions} == {0: (-1, "", ErrorCode.none)}
    everything = fetch_offsets(client, group)
    assert err(everything) == ErrorCode.none and not everything.topics


def test_member_commits_are_checked_against_the_generation_and_member_id(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """An OffsetCommit to a group with members is accepted only from a current member at the
    current generation: an unknown member id (or none) gets UNKNOWN_MEMBER_ID, a known member
    at another generation ILLEGAL_GENERATION, a generation on a group that does not exist
    ILLEGAL_GENERATION, while generation -1 on an empty group is a simple commit, accepted
    whatever member id it names [protocol guide, OffsetCommit errors; Kafka GroupCoordinator
    handleCommitOffsets]."""
    topic = make_topic(partitions=1, exact=False)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT, JOIN_GROUP,
                            SYNC_GROUP)
    member = stable_member(client, group)
    generation, member_id = member.generation_id, member.member_id
    assert commit(client, group, topic, {0: 1}) == [ErrorCode.unknown_member_id]
    assert commit(client, group, topic, {0: 1}, generation=generation, member_id="ghost") \
        == [ErrorCode.unknown_member_id]
    assert commit(client, group, topic, {0: 1}, generation=generation + 1,
                  member_id=member_id) == [ErrorCode.illegal_generation]
    assert commit(client, group, topic, {0: 3}, generation=generation, member_id=member_id) \
        == [ErrorCode.none]
    assert committed(client, group, topic, [0])[0][0] == 3
    absent = unique_name(request, "absent-")
    assert commit(offsets_client(kafka_raw_client, absent, [topic]), absent, topic, {0: 1},
                  generation=4, member_id="m") == [ErrorCode.illegal_generation]
    # Generation -1 on an Empty group is a simple commit, whatever member id it names.
    empty = unique_name(request, "empty-")
    assert commit(offsets_client(kafka_raw_client, empty, [topic]), empty, topic, {0: 1},
                  member_id="m") == [ErrorCode.none]


def test_commits_are_refused_with_rebalance_in_progress_while_completing_rebalance(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """While a group is CompletingRebalance (joined, assignment not yet synced) an OffsetCommit
    from its member is refused with REBALANCE_IN_PROGRESS; once SyncGroup completes the same
    commit is accepted [protocol guide, OffsetCommit errors; Kafka GroupCoordinator
    handleCommitOffsets]. The member and generation are validated first (Kafka's
    validateOffsetCommit runs before it looks at the state): a wrong generation is
    ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, and a "simple" commit (generation
    -1, no member id) to the non-empty group UNKNOWN_MEMBER_ID — answers after which a client
    resets its membership, where REBALANCE_IN_PROGRESS would only make it rejoin."""
    topic = make_topic(partitions=1, exact=False)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT, JOIN_GROUP,
                            SYNC_GROUP)
    joined = join(client, group)
    assert err(joined) == ErrorCode.none
    as_member = {"generation": joined.generation_id, "member_id": joined.member_id}
    assert commit(client, group, topic, {0: 2}, **as_member) == [ErrorCode.rebalance_in_progress]
    assert commit(client, group, topic, {0: 2}, generation=joined.generation_id + 1,
                  member_id=joined.member_id) == [ErrorCode.illegal_generation]
    assert commit(client, group, topic, {0: 2}, generation=joined.generation_id,
                  member_id="ghost") == [ErrorCode.unknown_member_id]
    assert commit(client, group, topic, {0: 2}) == [ErrorCode.unknown_member_id]
    assert _without_metadata(committed(client, group, topic, [0])) == {0: (-1, ErrorCode.none)}
    assert err(sync(client, group, joined, {joined.member_id: b"A"})) == ErrorCode.none
    assert commit(client, group, topic, {0: 2}, **as_member) == [ErrorCode.none]
    assert committed(client, group, topic, [0])[0][0] == 2


def _without_metadata(fetched: dict[int, tuple[int, str | None, ErrorCode]]
                      ) -> dict[int, tuple[int, ErrorCode]]:
    """{partition: (offset, error)} of a fetch of partitions nothing was committed for, after
    checking their metadata is absent (empty or null)."""
    assert all(not metadata for _, metadata, _ in fetched.values()), fetched
    return {p: (offset, error) for p, (offset, _, error) in fetched.items()}
