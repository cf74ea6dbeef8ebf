"""Every classic-group API in every group state, the reference broker against Apache Kafka 3.9.

One well-formed request per API (test_reference_vs_kafka.py) meets a group in whatever state the
sample left it; a coordinator's rules are mostly about state — who may commit while the group
is CompletingRebalance, what a heartbeat hears during a rebalance, what a stale member is told
once the group is Empty or deleted — and that is where the reference broker once answered
REBALANCE_IN_PROGRESS where Kafka answers ILLEGAL_GENERATION (issue 30). So each API is sent to
a group in each state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead), as the
group's member at its generation, at a wrong generation, as an unknown member, as a static
member (group.instance.id), and as a "simple" client (no member id, generation -1); the two
brokers' answers must agree field by field, member ids aside (both are random: each broker's
own are replaced by the role they play before comparing). Each probe gets a group of its own,
brought to its state by the same requests on both brokers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pytest

from harness.raw_client import RawClient, RawClients
from harness.waiting import wait_for
from harness.wire import protocol
from harness.wire.errors import ErrorCode
from suites.groups._helpers import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
    WAIT_S,
    BackgroundJoin,
    V,
    coordinator_client,
    err,
    heartbeat,
    join,
    join_body,
    leave,
    stable_member,
)

from .sides import SAME_NAMES, Side, comparable, differences

INSTANCE = "static-instance"
STATES_RUN = f"group-states-{uuid.uuid4().hex[:8]}"  # not SAME_NAMES: its ListGroups is not ours


class State(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Identity(StrEnum):
    """Who a probe claims to be, of the group's one member A."""

    MEMBER = "member"                      # A, at the group's generation
    WRONG_GENERATION = "wrong-generation"  # A, one generation ahead
    UNKNOWN_MEMBER = "unknown-member"      # a member id the group never gave out
    STATIC = "static"                      # A joined with group.instance.id; the probe names it
    SIMPLE = "simple"                      # no member id, generation -1: a group-less client


@dataclass
class Group:
    """A group brought to a state on one broker: its coordinator connection, the JoinGroup
    answer of its member A (its id and generation), and what undoes the state's set-up."""

    name: str
    client: RawClient
    member: Any
    instance: str | None
    members: dict[str, str] = field(default_factory=dict)  # a member id -> its role's name
    undo: list[Callable[[], object]] = field(default_factory=list)


def _commit_as(group: Group) -> None:
    answer = group.client.request(OFFSET_COMMIT, V[OFFSET_COMMIT], _commit_body(
        group.name, group.member.generation_id, group.member.member_id, group.instance))
    assert [err(p) for t in answer.topics for p in t.partitions] == [ErrorCode.none]


def _commit_body(name: str, generation: int, member_id: str, instance: str | None
                 ) -> dict[str, Any]:
    return {"group_id": name, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "group_instance_id": instance,
            "topics": [{"name": SAME_NAMES, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


@contextmanager
def prepared(side: Side, state: State, name: str, static: bool) -> Iterator[Group]:
    """A group named ``name`` on ``side`` in ``state``, with one member A (static when
    ``static``): Stable is A joined and synced; CompletingRebalance A joined, not synced;
    PreparingRebalance a Stable group that a second member B asks to join, held until A
    rejoins; Empty a Stable group A committed offsets in and left; Dead that group deleted."""
    instance = INSTANCE if static else None
    connections = RawClients(side.clients.bootstrap)  # closed with the group: 145 per broker
    try:
        with _prepared(connections, state, name, instance) as group:
            yield group
    finally:
        connections.close()


@contextmanager
def _prepared(connections: RawClients, state: State, name: str, instance: str | None
              ) -> Iterator[Group]:
    client = coordinator_client(connections, name)
    if state is State.COMPLETING_REBALANCE:
        joined = join(client, name, instance=instance)
        assert err(joined) == ErrorCode.none
    else:
        joined = stable_member(client, name, instance=instance)
    group = Group(name, client, joined, instance, {joined.member_id: "<member A>"})
    if state is State.PREPARING_REBALANCE:
        newcomer = BackgroundJoin(coordinator_client(connections, name), name)
        wait_for(lambda: heartbeat(client, name, joined.member_id, joined.generation_id,
                                   instance) == ErrorCode.rebalance_in_progress,
                 WAIT_S, f"{name} to prepare a rebalance", retry_on=())
        newcomer.assert_pending()

        def release() -> None:
            # A leaves (if a probe did not already), so the rebalance completes with B alone;
            # then B leaves too.
            leave(client, name, (joined.member_id, instance))
            leave(client, name, (newcomer.answer().member_id, None))

        group.undo.append(release)
    if state in (State.EMPTY, State.DEAD):
        _commit_as(group)  # offsets keep the Empty group known to its coordinator
        assert err(leave(client, name, (joined.member_id, instance)).members[0]) \
            == ErrorCode.none
    if state is State.DEAD:
        deleted = client.request(DELETE_GROUPS, V[DELETE_GROUPS], {"groups_names": [name]})
        assert [err(r) for r in deleted.results] == [ErrorCode.none]
    try:
        yield group
    finally:
        for action in group.undo:
            action()
        # Nothing left behind for the next test's ListGroups: whoever is still in the group
        # leaves and the group is deleted (either may have happened already, or be refused).
        leave(client, name, (joined.member_id, instance))
        client.request(DELETE_GROUPS, V[DELETE_GROUPS], {"groups_names": [name]})


def _claims(group: Group, identity: Identity) -> tuple[str, int, str | None]:
    """(member id, generation, group instance id) a probe as ``identity`` carries."""
    member, generation = group.member.member_id, group.member.generation_id
    return {
        Identity.MEMBER: (member, generation, None),
        Identity.WRONG_GENERATION: (member, generation + 1, None),
        Identity.UNKNOWN_MEMBER: ("unknown-member", generation, None),
        Identity.STATIC: (member, generation, INSTANCE),
        Identity.SIMPLE: ("", -1, None),
    }[identity]


def _probe(group: Group, api_key: int, identity: Identity) -> dict[str, Any]:
    """The request of ``api_key`` a client claiming ``identity`` sends to the group."""
    name = group.name
    member, generation, instance = _claims(group, identity)
    topic = [{"name": SAME_NAMES, "partition_indexes": [0]}]
    bodies: dict[int, Callable[[], dict[str, Any]]] = {
        JOIN_GROUP: lambda: join_body(name, member, instance=instance),
        SYNC_GROUP: lambda: {"group_id": name, "generation_id": generation, "member_id": member,
                             "group_instance_id": instance, "assignments": []},
        HEARTBEAT: lambda: {"group_id": name, "generation_id": generation, "member_id": member,
                            "group_instance_id": instance},
        LEAVE_GROUP: lambda: {"group_id": name, "members": [
            {"member_id": member, "group_instance_id": instance}]},
        OFFSET_COMMIT: lambda: _commit_body(name, generation, member, instance),
        OFFSET_FETCH: lambda: {"group_id": name, "topics": topic, "require_stable": False},
        OFFSET_DELETE: lambda: {"group_id": name, "topics": [
            {"name": SAME_NAMES, "partitions": [{"partition_index": 0}]}]},
        DESCRIBE_GROUPS: lambda: {"groups": [name], "include_authorized_operations": False},
        DELETE_GROUPS: lambda: {"groups_names": [name]},
    }
    return bodies[api_key]()


# APIs whose requests name no member: probed once per state.
ANONYMOUS = (OFFSET_FETCH, OFFSET_DELETE, DESCRIBE_GROUPS, DELETE_GROUPS)
GROUP_APIS = (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, *ANONYMOUS)


def _roles(answer: Any, members: dict[str, str]) -> Any:
    """The answer with each member id this test made replaced by the role it plays, and lists
    of members in the order of their roles: Kafka lists a group's members in the order of a
    hash map keyed by their random ids, which says nothing."""
    if isinstance(answer, dict):
        return {key: _roles(value, members) for key, value in answer.items()}
    if isinstance(answer, list):
        listed = [_roles(value, members) for value in answer]
        if listed and all(isinstance(x, dict) and "member_id" in x for x in listed):
            listed.sort(key=lambda x: str(x["member_id"]))
        return listed
    return members.get(answer, answer) if isinstance(answer, str) else answer


def _answer(side: Side, state: State, api_key: int, identity: Identity, name: str
            ) -> dict[str, Any]:
    """The probe's answer, and what DescribeGroups says of the group right after it (whether
    the probe moved the group, and where: Kafka 3.9 deletes an Empty group whose last offset
    OffsetDelete removes, for one)."""
    with prepared(side, state, name, static=identity is Identity.STATIC) as group:
        answer = group.client.request(api_key, V[api_key], _probe(group, api_key, identity))
        after = group.client.request(DESCRIBE_GROUPS, V[DESCRIBE_GROUPS], {
            "groups": [name], "include_authorized_operations": False})
        return {"answer": _roles(comparable(protocol.to_plain(answer)), group.members),
                "group after": _roles(comparable(protocol.to_plain(after)), group.members)}


@pytest.mark.parametrize("api_key", GROUP_APIS, ids=protocol.api_name)
@pytest.mark.parametrize("state", list(State), ids=str)
def test_each_group_api_in_each_state_is_answered_as_kafka_does(
        sides: dict[str, Side], state: State, api_key: int) -> None:
    """The reference broker's answer to the API, sent by each identity to a group in the
    state, and the group it leaves behind, equal Apache Kafka 3.9.2's field by field (member
    ids by their role)."""
    identities = [Identity.MEMBER] if api_key in ANONYMOUS else list(Identity)
    found = []
    for identity in identities:
        name = f"{STATES_RUN}-{state}-{protocol.api_name(api_key)}-{identity}"
        answers = {kind: _answer(side, state, api_key, identity, name)
                   for kind, side in sides.items()}
        found += [f"as {identity}{d}"
                  for d in differences(answers["reference"], answers["apache-kafka"])]
    assert not found, "the reference broker answered differently:\n" + "\n".join(found)
