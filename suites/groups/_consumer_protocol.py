"""Raw KIP-848 consumer-group flows (ConsumerGroupHeartbeat, ConsumerGroupDescribe) for the
consumer-protocol suite, on :class:`~harness.raw_client.RawClient`.

In the consumer group protocol (KIP-848) the coordinator computes every assignment itself and
hands it to each member in its heartbeat answers; a member reconciles (revokes what it lost,
takes what it gained) and reports what it owns in its next heartbeat. :class:`Member` plays such
a member one request at a time, so a test decides when a revocation is acknowledged.

The suite speaks version 1 of both APIs, what Kafka 4 clients send: ConsumerGroupHeartbeat v1
has ``subscribed_topic_regex`` and needs a member id the client generated (KIP-1082);
ConsumerGroupDescribe v1 says whether a member speaks the consumer or the classic protocol
(``member_type``, KIP-1099). A target without them skips with the versions it offers.

Kafka 4.4 computes target assignments off the coordinator's thread and at most once per
``group.consumer.assignment.interval.ms`` (1 s by default), so a new assignment appears in some
later heartbeat, not in the one that caused it: tests heartbeat until it does
(:func:`harness.waiting.wait_for`), as a real member does every heartbeat interval.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from ._helpers import WAIT_S, RawFactory, coordinator_client, err

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
HEARTBEAT_V = DESCRIBE_V = 1
METADATA, METADATA_V = 3, 12  # the first Metadata version that names topics by id too
LEAVE_EPOCH, TEMPORARY_LEAVE_EPOCH = -1, -2  # [KIP-848, ConsumerGroupHeartbeat request]
REBALANCE_TIMEOUT_MS = 30_000
CONSUMER_MEMBER, CLASSIC_MEMBER = 1, 0  # ConsumerGroupDescribe v1 ``member_type``

TopicPartition = tuple[uuid.UUID, int]
Assignment = frozenset[TopicPartition]


def require_consumer_protocol(client: RawClient) -> None:
    """Skip the test unless the target serves both KIP-848 APIs at the suite's versions."""
    offered = client.advertised()
    for key, name, version in ((CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", HEARTBEAT_V),
                               (CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", DESCRIBE_V)):
        low, high = offered.get(key, (0, -1))
        if not low <= version <= high:
            pytest.skip(f"needs the KIP-848 consumer group protocol: {name} (API key {key}) "
                        f"v{version}; the target offers "
                        f"{'none' if high < 0 else f'versions {low}-{high}'}")


def consumer_group_client(raw_client: RawFactory, group: str) -> RawClient:
    """A raw client on `group`'s coordinator, once the target is known to speak KIP-848."""
    require_consumer_protocol(raw_client())
    return coordinator_client(raw_client, group)


def topic_ids(client: RawClient, *topics: str) -> dict[str, uuid.UUID]:
    """{topic name: topic id} (heartbeats name topics by id only), from the Metadata of the
    broker behind `client`, once it knows every topic: a new topic reaches each broker on its
    own time, and the coordinator's broker may not know one that another broker showed."""
    def known() -> dict[str, uuid.UUID] | None:
        answer: Any = client.request(METADATA, METADATA_V, {
            "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in answer.topics
               if err(t) == ErrorCode.none and t.partitions}
        return ids if set(ids) == set(topics) else None

    return wait_for(known, WAIT_S, f"the coordinator's broker to know {sorted(topics)}",
                    retry_on=())


def partitions_of(ids: dict[str, uuid.UUID], counts: dict[str, int]) -> Assignment:
    """Every partition of the topics named in `counts` ({name: partition count})."""
    return frozenset((ids[t], p) for t, n in counts.items() for p in range(n))


def flatten(topic_partitions: Iterable[Any] | None) -> Assignment:
    """An answer's ``[{topic_id, partitions}]`` as a set of (topic id, partition)."""
    return frozenset((tp.topic_id, int(p)) for tp in topic_partitions or () for p in tp.partitions)


def as_request(assignment: Assignment) -> list[dict[str, Any]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic, partition in sorted(assignment):
        by_topic.setdefault(topic, []).append(partition)
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


def heartbeat_body(group: str, member_id: str, epoch: int, **fields: Any) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat; fields left out are null ("unchanged" after the join)."""
    body: dict[str, Any] = {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
        "rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None,
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None}
    body.update(fields)
    return body


class Member:
    """One consumer-protocol member, driven a heartbeat at a time.

    ``assigned`` is the last assignment the coordinator sent (an answer without one means
    unchanged [KIP-848]); ``owned`` is what the member reports owning, the assignment once it
    reconciled. A heartbeat with ``ack=False`` keeps reporting the old ``owned``: a member that
    has not revoked yet."""

    def __init__(self, client: RawClient, group: str, *, topics: list[str] | None = None,
                 regex: str | None = None, instance: str | None = None,
                 assignor: str | None = None, member_id: str | None = None) -> None:
        self.client, self.group = client, group
        self.topics, self.regex, self.instance, self.assignor = topics, regex, instance, assignor
        # KIP-1082: the client generates its member id, once, and keeps it across rejoins.
        self.member_id = member_id or str(uuid.uuid4())
        self.epoch = 0
        self.assigned: Assignment = frozenset()
        self.owned: Assignment = frozenset()
        self.joined = False

    def send(self, epoch: int | None = None, **fields: Any) -> Any:
        """One heartbeat at `epoch` (default: the member's) with `fields`; the raw answer."""
        fields.setdefault("instance_id", self.instance)
        member_id = fields.pop("member_id", self.member_id)
        return self.client.request(CONSUMER_GROUP_HEARTBEAT, HEARTBEAT_V, heartbeat_body(
            self.group, member_id, self.epoch if epoch is None else epoch, **fields))

    def join(self) -> Any:
        """The first heartbeat (epoch 0): subscription, rebalance timeout, no partitions."""
        self.epoch, self.assigned, self.owned = 0, frozenset(), frozenset()
        answer = self.send(0, subscribed_topic_names=self.topics,
                           subscribed_topic_regex=self.regex, server_assignor=self.assignor,
                           rebalance_timeout=REBALANCE_TIMEOUT_MS, topic_partitions=[])
        self._accept(answer, ack=True)
        self.joined = True
        return answer

    def heartbeat(self, *, ack: bool = True, **fields: Any) -> Any:
        """A heartbeat reporting ``owned``; with `ack` the member then reconciles: it owns what
        it was given, and says so in its next heartbeat."""
        answer = self.send(topic_partitions=as_request(self.owned), **fields)
        self._accept(answer, ack=ack)
        return answer

    def reconcile(self) -> None:
        """Finish reconciling (revoke what was taken, take what was given): the next heartbeat
        reports the assignment as owned."""
        self.owned = self.assigned

    def leave(self, epoch: int = LEAVE_EPOCH) -> Any:
        """Leave the group (epoch -1), or leave for now as a static member (-2) [KIP-848]."""
        answer = self.send(epoch)
        assert (err(answer), answer.member_epoch) == (ErrorCode.none, epoch), \
            f"leaving with epoch {epoch} answered {_explain(answer)}"
        self.joined = False
        self.epoch, self.assigned, self.owned = epoch, frozenset(), frozenset()
        return answer

    def _accept(self, answer: Any, *, ack: bool) -> None:
        assert err(answer) == ErrorCode.none, \
            f"member {self.member_id} at epoch {self.epoch}: {_explain(answer)}"
        assert answer.member_id == self.member_id, \
            f"answered member id {answer.member_id!r}, the member chose {self.member_id!r}"
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.assigned = flatten(answer.assignment.topic_partitions)
        if ack:
            self.owned = self.assigned


def _explain(answer: Any) -> str:
    return f"{err(answer)!r} ({answer.error_message})"


def describe(client: RawClient, group: str) -> Any:
    """The group as ConsumerGroupDescribe shows it (an error code other than NONE fails)."""
    answer: Any = client.request(CONSUMER_GROUP_DESCRIBE, DESCRIBE_V, {
        "group_ids": [group], "include_authorized_operations": False})
    (described,) = answer.groups
    assert err(described) == ErrorCode.none, \
        f"ConsumerGroupDescribe({group}) answered {err(described)!r}"
    return described


def described_members(described: Any) -> dict[str, Any]:
    return {m.member_id: m for m in described.members}


def assert_disjoint(members: Iterable[Member]) -> None:
    """No partition is held by two members: the safety rule of the protocol [KIP-848,
    "a partition is never assigned to two members at once"]."""
    seen: dict[TopicPartition, str] = {}
    for member in members:
        for tp in member.assigned | member.owned:
            other = seen.setdefault(tp, member.member_id)
            assert other == member.member_id, \
                f"partition {tp} is held by {other} and {member.member_id} at once"


def settle(members: list[Member], partitions: Assignment, what: str,
           timeout: float = WAIT_S) -> Any:
    """Heartbeat every member (acknowledging what it is given) until the group is Stable: its
    assignment epoch caught up with the group epoch, every member at that epoch, owning what
    it was given, and the members' shares disjoint and covering `partitions`. Disjointness is
    checked after every heartbeat, not only at the end. The last ConsumerGroupDescribe."""
    client, group = members[0].client, members[0].group

    def stable() -> Any:
        for member in members:
            member.heartbeat()
            assert_disjoint(members)
        described = describe(client, group)
        held = frozenset().union(*(m.assigned for m in members))
        done = (described.group_state == "Stable"
                and described.assignment_epoch == described.group_epoch
                and all(m.epoch == described.group_epoch and m.owned == m.assigned
                        for m in members)
                and held == partitions)
        return described if done else None

    return wait_for(stable, timeout, what, interval=0.2, retry_on=())


def heartbeat_until(member: Member, condition: Callable[[Member], bool], what: str, *,
                    ack: bool = True, others: Iterable[Member] = (), timeout: float = WAIT_S,
                    **fields: Any) -> None:
    """Heartbeat `member` (with `fields`; `others` too, acknowledging) until
    ``condition(member)``; each round checks that no partition is held twice."""
    everyone = [member, *others]

    def reached() -> bool:
        member.heartbeat(ack=ack, **fields)
        for other in everyone[1:]:
            other.heartbeat()
        assert_disjoint(everyone)
        return bool(condition(member))

    wait_for(reached, timeout, what, interval=0.2, retry_on=())


def leave_all(members: Iterable[Member]) -> Iterator[str]:
    """Make every member still in its group leave (test teardown, so a shared broker's group
    is empty and deletable); the members that could not, with the coordinator's answer."""
    for member in members:
        if not member.joined:
            continue
        try:
            answer = member.send(LEAVE_EPOCH)
        except OSError as exc:
            yield f"{member.member_id}: {exc}"
            continue
        member.joined = False
        if err(answer) not in (ErrorCode.none, ErrorCode.unknown_member_id,
                               ErrorCode.fenced_instance_id):
            yield f"{member.member_id}: {_explain(answer)}"
