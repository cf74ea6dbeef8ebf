"""One consumer group's state, as Kafka's GroupMetadata: members, generation, protocol, offsets.

Sans-IO on purpose (h11's rule): nothing here waits, sleeps or writes. The coordinator decides
*when* things happen (timers, futures, appends to `__consumer_offsets`) and asks this object
*what* the group looks like and whether a change is legal, so the whole state machine is tested
without a socket or an event loop.

The states, what each does and where it may go next:

- **Empty** — no members, but the group may still hold committed offsets (a simple consumer's
  commits, or a consumer group whose members all left). It ends when offsets expire or the
  group is deleted (→ Dead), or when a member joins (→ PreparingRebalance).
- **PreparingRebalance** — collecting JoinGroups for the next generation. Heartbeats answer
  REBALANCE_IN_PROGRESS so every member rejoins; commits are still accepted from the current
  generation. Goes to CompletingRebalance when every member rejoined or the rebalance timeout
  passed with at least one member, to Empty when nobody is left, to Dead if deleted/unloaded.
- **CompletingRebalance** — the generation is chosen and JoinGroup answered; waiting for the
  leader's SyncGroup with the assignment. Its members' commits at its generation get
  REBALANCE_IN_PROGRESS. Goes to Stable on the leader's SyncGroup, back to PreparingRebalance
  if a member joins, leaves or expires, to Dead if unloaded.
- **Stable** — the assignment is handed out; heartbeats keep members alive and commits are
  accepted from the current generation. Goes to PreparingRebalance on any membership or
  metadata change, to Dead if unloaded.
- **Dead** — the group is gone (deleted, expired, or its offsets partition moved away); every
  request about it is refused. It never leaves this state.

Any other change is a bug in the coordinator, so `transition_to` raises instead of obeying.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# For each state, the states it may be entered from (Kafka spells the rule the same way round).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.EMPTY, GroupState.STABLE,
                                               GroupState.COMPLETING_REBALANCE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class InvalidStateTransition(RuntimeError):
    """The coordinator asked for a change the state machine forbids: a bug, never input."""


@dataclass
class MemberMetadata:
    """One member. `awaiting_join` mirrors whether the coordinator holds an unanswered
    JoinGroup of this member: the state machine needs to know that, not how it is held."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


TopicPartition = tuple[str, int]


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    # KIP-98: offsets committed in a transaction, per producer id, invisible until its marker.
    pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(
        default_factory=dict)
    new_member_added: bool = False

    # --- states ------------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise InvalidStateTransition(
                f"group {self.group_id!r} cannot go from {self.state.value} to {target.value}")
        self.state = target
        self.current_state_timestamp = now_ms

    # --- members -----------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: MemberMetadata) -> None:
        """A new member; the first one fixes the protocol type and becomes leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        self.new_member_added = True

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> MemberMetadata:
        """A static member rejoined without its member id: it keeps its place (and assignment,
        and leadership) under a new id, and the old id is fenced."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A request naming a static instance whose current member id is another one."""
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> None:
        """If the leader did not rejoin, lead with one that did (Kafka's choice too)."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return
        self.leader_id = next((m.member_id for m in self.members.values() if m.awaiting_join),
                              self.leader_id)

    # --- protocols ---------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """May a member with this protocol type and these protocols join?"""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols()
                                                            & set(names))

    def select_protocol(self) -> str:
        """Each member votes for the first protocol it lists that every member supports; the
        most votes win, ties going to the leader's preference order."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise InvalidStateTransition(f"group {self.group_id!r} has no common protocol")
        votes = Counter(next(p for p in m.protocol_names if p in candidates)
                        for m in self.members.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = [p for p in leader.protocol_names if p in candidates]
        return max(order, key=lambda p: (votes[p], -order.index(p)))

    def init_next_generation(self, now_ms: int) -> None:
        """Close the join phase: a new generation in CompletingRebalance, or Empty if nobody
        is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.new_member_added = False

    def member_list(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata) for the leader's JoinGroup response."""
        protocol = self.protocol_name or ""
        return [(m.member_id, m.group_instance_id, m.metadata_for(protocol))
                for m in self.members.values()]

    def set_assignments(self, assignments: dict[str, bytes]) -> None:
        for member_id, member in self.members.items():
            member.assignment = assignments.get(member_id, b"")

    def reset_assignments(self) -> None:
        for member in self.members.values():
            member.assignment = b""

    # --- offsets -----------------------------------------------------------------------------

    def commit(self, tp: TopicPartition, offset: CommittedOffset) -> None:
        self.offsets[tp] = offset

    def add_pending_txn_offsets(self, producer_id: int,
                                offsets: dict[TopicPartition, CommittedOffset]) -> None:
        """TxnOffsetCommit: held apart until the transaction's marker (a later commit of the
        same partition in the same transaction replaces an earlier one)."""
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> bool:
        """The marker of `producer_id`'s transaction: a commit makes its offsets the group's,
        an abort drops them. False if the producer had none pending here."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None:
            return False
        if commit:
            self.offsets.update(pending)
        return True

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for such a partition
        (KIP-447): its offset may change when the transaction ends."""
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def remove_offsets(self, partitions: list[TopicPartition]) -> None:
        """Forget the partitions' committed offsets and any a pending transaction holds for
        them (Kafka's GroupMetadata.removeOffsets: OffsetDelete, expiry, a deleted topic)."""
        for tp in partitions:
            self.offsets.pop(tp, None)
            for pending in self.pending_txn_offsets.values():
                pending.pop(tp, None)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """KIP-211: only an Empty group loses offsets; a consumer group's clock starts when it
        became empty, a simple consumer's (no protocol type) at each commit. An explicit expire
        timestamp (OffsetCommit v2-v4's retention time) wins."""
        if not self.is_state(GroupState.EMPTY):
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if committed.expire_timestamp >= 0:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
                continue
            since = committed.commit_timestamp
            if self.protocol_type and self.current_state_timestamp >= 0:
                since = max(since, self.current_state_timestamp)
            if now_ms - since >= retention_ms:
                expired.append(tp)
        return expired
