"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and session expiry.

Kafka's GroupCoordinator parks joins and syncs in a purgatory of delayed operations; here an
unanswered JoinGroup or SyncGroup is an asyncio future, and the rebalance timeout, the initial
rebalance delay and each member's session timeout are event-loop timers. The group's state and
its legal changes live in `group_metadata` (sans-IO); persistence in `group_metadata_manager`.

Every answer is Kafka's: MEMBER_ID_REQUIRED for a v4+ first join, INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID for a superseded static
member, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS on SyncGroup and
Heartbeat, and COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR from ownership.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field

from harness.wire.errors import ErrorCode, error_name
from reference_broker.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    TopicPartition,
)
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager

log = logging.getLogger("reference_broker.coordinator.group")

MemberInfo = tuple[str, str | None, bytes]


@dataclass(frozen=True)
class GroupConfig:
    """The broker's group.* and offsets.* settings the coordinator obeys."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(frozen=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[MemberInfo] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class GroupCoordinator:
    def __init__(self, manager: GroupMetadataManager, config: GroupConfig) -> None:
        self.manager = manager
        self.config = config
        self._joins: dict[str, asyncio.Future[JoinResult]] = {}
        self._syncs: dict[str, asyncio.Future[SyncResult]] = {}
        self._session_timers: dict[str, asyncio.TimerHandle] = {}
        self._join_timers: dict[str, asyncio.TimerHandle] = {}
        self._initial_delay: set[str] = set()

    # --- ownership ---------------------------------------------------------------------------

    async def on_elected(self, partition: int) -> None:
        """This broker leads an offsets partition: load it, then keep its members alive."""
        await self.manager.load_partition(partition, self._on_group_loaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            self._schedule_session_expiry(group, member.member_id, member.session_timeout_ms)

    def on_resigned(self, partition: int) -> None:
        """Leadership of an offsets partition moved away: its groups' clients must look again."""
        for group in self.manager.unload_partition(partition):
            self._cancel_join_timer(group)
            for member_id in [*group.members, *group.pending_members]:
                self._cancel_session_timer(member_id)
                self._answer_join(member_id, JoinResult(ErrorCode.not_coordinator, member_id))
                self._answer_sync(member_id, SyncResult(ErrorCode.not_coordinator))

    def complete_transactional_offsets(self, offsets_partition: int, producer_id: int,
                                       commit: bool) -> int:
        """A transaction marker was written to `__consumer_offsets-<offsets_partition>` (the
        WriteTxnMarkers handler calls this): the producer's pending TxnOffsetCommits in that
        partition's groups become their offsets, or are dropped. The groups it touched."""
        return self.manager.complete_txn_offsets(offsets_partition, producer_id, commit)

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> None:
        """The partitions' topic was deleted (UpdateMetadata named them, or, on a single
        broker, DeleteTopics removed them): no group keeps an offset of them."""
        removed = self.manager.delete_partitions(partitions)
        if removed:
            log.info("Removed %d offset(s) of deleted partitions %s", removed,
                     ", ".join(f"{t}-{p}" for t, p in sorted(set(partitions))))

    def _group_error(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        return self.manager.ownership_error(group_id)

    def _now(self) -> int:
        return self.manager.now_ms()

    # --- JoinGroup ---------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        error = self._group_error(req.group_id)
        if error is not ErrorCode.none:
            return JoinResult(error, req.member_id)
        config = self.config
        if not config.min_session_timeout_ms <= req.session_timeout_ms \
                <= config.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, req.member_id)
        group = self.manager.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(ErrorCode.unknown_member_id, req.member_id)
            group = GroupMetadata(req.group_id, current_state_timestamp=self._now())
            self.manager.groups[req.group_id] = group
        if group.is_state(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, req.member_id)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id)
        if not req.member_id:
            return await self._join_unknown_member(group, req)
        return await self._join_known_member(group, req)

    async def _join_unknown_member(self, group: GroupMetadata, req: JoinRequest) -> JoinResult:
        # Members only handed an id by MEMBER_ID_REQUIRED do not count, as in Apache Kafka.
        if len(group.members) >= self.config.max_size:
            return JoinResult(ErrorCode.group_max_size_reached)
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            if group.static_member_id(req.group_instance_id) is not None:
                return await self._rejoin_static_member(group, req, new_id)
            return await self._add_and_join(group, req, new_id)
        if req.require_known_member_id:
            # KIP-394: the member must come back with this id, so a client that times out and
            # retries does not leave a phantom member behind.
            group.pending_members.add(new_id)
            self._schedule_session_expiry(group, new_id, req.session_timeout_ms)
            return JoinResult(ErrorCode.member_id_required, new_id)
        return await self._add_and_join(group, req, new_id)

    async def _rejoin_static_member(self, group: GroupMetadata, req: JoinRequest,
                                    new_id: str) -> JoinResult:
        """KIP-345: a restarted static member takes its old place; the old id is fenced. With
        unchanged metadata in a Stable group nothing is rebalanced."""
        old_id = group.static_members[req.group_instance_id or ""]
        self._cancel_session_timer(old_id)
        self._answer_join(old_id, JoinResult(ErrorCode.fenced_instance_id, old_id))
        self._answer_sync(old_id, SyncResult(ErrorCode.fenced_instance_id))
        member = group.replace_static_member(req.group_instance_id or "", new_id)
        unchanged = member.matches(req.protocols)
        _update(member, req)
        self._schedule_session_expiry(group, new_id, member.session_timeout_ms)
        if group.is_state(GroupState.STABLE) and unchanged:
            error = self.manager.store_group(group)
            if error is not ErrorCode.none:
                return JoinResult(error, new_id)
            return self._current_generation(group, member, skip_assignment=True)
        return await self._wait_for_join(group, member)

    async def _join_known_member(self, group: GroupMetadata, req: JoinRequest) -> JoinResult:
        member_id = req.member_id
        if member_id in group.pending_members:
            if len(group.members) >= self.config.max_size:
                group.pending_members.discard(member_id)
                self._cancel_session_timer(member_id)
                return JoinResult(ErrorCode.group_max_size_reached, member_id)
            self._cancel_session_timer(member_id)
            return await self._add_and_join(group, req, member_id)
        if req.group_instance_id is not None:
            current = group.static_member_id(req.group_instance_id)
            if current is None:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            if current != member_id:
                return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            _update(member, req)
            return await self._wait_for_join(group, member)
        unchanged = member.matches(req.protocols)
        if group.is_state(GroupState.COMPLETING_REBALANCE) and unchanged:
            return self._current_generation(group, member)
        if group.is_state(GroupState.STABLE) and unchanged and member_id != group.leader_id:
            return self._current_generation(group, member)
        _update(member, req)
        return await self._wait_for_join(group, member)

    async def _add_and_join(self, group: GroupMetadata, req: JoinRequest,
                            member_id: str) -> JoinResult:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms,
                                req.protocol_type, list(req.protocols))
        group.add(member)
        self._schedule_session_expiry(group, member_id, member.session_timeout_ms)
        return await self._wait_for_join(group, member)

    def _wait_for_join(self, group: GroupMetadata, member: MemberMetadata
                       ) -> asyncio.Future[JoinResult]:
        previous = self._joins.pop(member.member_id, None)
        if previous is not None and not previous.done():
            previous.set_result(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        self._joins[member.member_id] = future
        member.awaiting_join = True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        return future

    def _current_generation(self, group: GroupMetadata, member: MemberMetadata,
                            skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(ErrorCode.none, member.member_id, group.generation_id,
                          group.protocol_type, group.protocol_name, group.leader_id or "",
                          group.member_list() if is_leader else [],
                          skip_assignment and is_leader)

    # --- rebalancing -------------------------------------------------------------------------

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            group.reset_assignments()
            for member_id in group.members:
                self._answer_sync(member_id, SyncResult(ErrorCode.rebalance_in_progress))
        initial = group.is_state(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now())
        log.info("Preparing to rebalance group %s in generation %d (%s)", group.group_id,
                 group.generation_id, reason)
        self._cancel_join_timer(group)
        loop = asyncio.get_running_loop()
        delay = self.config.initial_rebalance_delay_ms
        if initial and delay > 0:
            # group.initial.rebalance.delay.ms: let a starting fleet join one generation
            # instead of rebalancing once per arrival; each arrival extends the wait.
            group.new_member_added = False
            self._initial_delay.add(group.group_id)
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            self._join_timers[group.group_id] = loop.call_later(
                delay / 1000, self._initial_delay_expired, group, remaining)
            return
        self._join_timers[group.group_id] = loop.call_later(
            group.max_rebalance_timeout_ms() / 1000, self._complete_join, group)
        self._maybe_complete_join(group)

    def _initial_delay_expired(self, group: GroupMetadata, remaining_ms: int) -> None:
        delay = self.config.initial_rebalance_delay_ms
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            step = min(delay, remaining_ms)
            self._join_timers[group.group_id] = asyncio.get_running_loop().call_later(
                step / 1000, self._initial_delay_expired, group, remaining_ms - step)
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        if group.is_state(GroupState.PREPARING_REBALANCE) \
                and group.group_id not in self._initial_delay and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        self._cancel_join_timer(group)
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:  # static members keep their place (KIP-345)
                self._remove_member(group, member.member_id, ErrorCode.unknown_member_id)
        group.elect_joined_leader()
        group.init_next_generation(self._now())
        if group.is_state(GroupState.EMPTY):
            error = self.manager.store_group(group)
            if error is not ErrorCode.none:
                log.warning("Could not store empty group %s: %s", group.group_id,
                            error_name(error))
            return
        log.info("Group %s stabilizing generation %d with %d member(s), protocol %s",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name)
        for member in group.members.values():
            if member.awaiting_join:
                member.awaiting_join = False
                self._answer_join(member.member_id, self._current_generation(group, member))
                self._schedule_session_expiry(group, member.member_id,
                                              member.session_timeout_ms)

    def _cancel_join_timer(self, group: GroupMetadata) -> None:
        self._initial_delay.discard(group.group_id)
        timer = self._join_timers.pop(group.group_id, None)
        if timer is not None:
            timer.cancel()

    # --- SyncGroup ---------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None, assignments: dict[str, bytes]
                         ) -> SyncResult:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return SyncResult(error)
        group = self.manager.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_state(GroupState.DEAD):
            return SyncResult(ErrorCode.coordinator_not_available)
        # As Kafka's doSyncGroup: a static member's fencing is checked before its membership,
        # so another process using the same group.instance.id learns it must stop.
        if group.is_fenced(instance_id, member_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        if not group.has_member(member_id):
            return SyncResult(ErrorCode.unknown_member_id)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = group.members[member_id]
        self._schedule_session_expiry(group, member_id, member.session_timeout_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.is_state(GroupState.STABLE):
            return self._assignment_of(group, member)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        self._answer_sync(member_id, SyncResult(ErrorCode.rebalance_in_progress))
        self._syncs[member_id] = future
        if member_id == group.leader_id:
            self._complete_sync(group, assignments)
        return await future

    def _complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        group.set_assignments(assignments)
        error = self.manager.store_group(group)
        if error is not ErrorCode.none:
            group.reset_assignments()
            for member_id in group.members:
                self._answer_sync(member_id, SyncResult(error))
            self._prepare_rebalance(group,
                                    f"storing the assignment failed: {error_name(error)}")
            return
        group.transition_to(GroupState.STABLE, self._now())
        log.info("Group %s is Stable in generation %d", group.group_id, group.generation_id)
        for member in group.members.values():
            self._answer_sync(member.member_id, self._assignment_of(group, member))

    @staticmethod
    def _assignment_of(group: GroupMetadata, member: MemberMetadata) -> SyncResult:
        return SyncResult(ErrorCode.none, member.assignment, group.protocol_type,
                          group.protocol_name)

    # --- Heartbeat, LeaveGroup, session expiry -----------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error
        group = self.manager.groups.get(group_id)
        if group is None or group.is_state(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_state(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if group.is_fenced(instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        # The generation before the state, as Kafka: a member a generation behind is told so
        # even while a rebalance is being prepared, and rejoins without its old assignment.
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        self._schedule_session_expiry(group, member_id, member.session_timeout_ms)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(self, group_id: str,
                    leaving: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per leaving (member id, instance id)) — v3+ leaves in batches
        and a static member may leave by instance id alone."""
        error = self._group_error(group_id)
        if error is not ErrorCode.none:
            return error, [error] * len(leaving)
        group = self.manager.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(leaving)
        if group.is_state(GroupState.DEAD):
            unavailable = ErrorCode.coordinator_not_available
            return unavailable, [unavailable] * len(leaving)
        return ErrorCode.none, [self._leave_one(group, m, i) for m, i in leaving]

    def _leave_one(self, group: GroupMetadata, member_id: str,
                   instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if member_id and member_id != current:
                return ErrorCode.fenced_instance_id
            member_id = current
        elif member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel_session_timer(member_id)
            self._maybe_complete_join(group)
            return ErrorCode.none
        if not group.has_member(member_id):
            return ErrorCode.unknown_member_id
        log.info("Member %s left group %s", member_id, group.group_id)
        self._remove_member_and_update_group(group, member_id)
        return ErrorCode.none

    def _schedule_session_expiry(self, group: GroupMetadata, member_id: str,
                                 session_timeout_ms: int) -> None:
        self._cancel_session_timer(member_id)
        self._session_timers[member_id] = asyncio.get_running_loop().call_later(
            session_timeout_ms / 1000, self._session_expired, group, member_id,
            session_timeout_ms)

    def _cancel_session_timer(self, member_id: str) -> None:
        timer = self._session_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def _session_expired(self, group: GroupMetadata, member_id: str,
                         session_timeout_ms: int) -> None:
        self._session_timers.pop(member_id, None)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or group.is_state(GroupState.DEAD):
            return
        if member.awaiting_join or member_id in self._syncs:
            # A member parked in JoinGroup/SyncGroup is alive by definition; the rebalance
            # timeout bounds how long that lasts.
            self._schedule_session_expiry(group, member_id, session_timeout_ms)
            return
        log.info("Member %s in group %s has failed (session timeout %d ms), removing it",
                 member_id, group.group_id, session_timeout_ms)
        self._remove_member_and_update_group(group, member_id)

    def _remove_member(self, group: GroupMetadata, member_id: str, answer: ErrorCode) -> None:
        group.remove(member_id)
        self._cancel_session_timer(member_id)
        self._answer_join(member_id, JoinResult(answer, member_id))
        self._answer_sync(member_id, SyncResult(answer))

    def _remove_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        self._remove_member(group, member_id, ErrorCode.unknown_member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member_id}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # --- answering parked requests -----------------------------------------------------------

    def _answer_join(self, member_id: str, result: JoinResult) -> None:
        future = self._joins.pop(member_id, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _answer_sync(self, member_id: str, result: SyncResult) -> None:
        future = self._syncs.pop(member_id, None)
        if future is not None and not future.done():
            future.set_result(result)


def _update(member: MemberMetadata, req: JoinRequest) -> None:
    member.protocols = list(req.protocols)
    member.session_timeout_ms = req.session_timeout_ms
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.client_id = req.client_id
    member.client_host = req.client_host
