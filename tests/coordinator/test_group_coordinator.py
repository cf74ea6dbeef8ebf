"""The coordinator against an in-memory offsets log: timers and futures, no sockets.

Every scenario runs on a virtual clock (tests/virtual_time.py): the coordinator's timers (session
timeouts, the rebalance and initial delays, the load delay) and its timestamps (``now_ms``)
follow the event loop's clock, so the tests assert exact times and orders that no machine load
can change, and the ordering waits are on observable state, not on sleeps.
"""

import asyncio

import pytest

from harness.wire.errors import ErrorCode
from harness.wire.group_records import decode_group_value, decode_key
from reference_broker.coordinator.common import (
    ControlType,
    LoggedRecord,
    java_string_hash,
    partition_for,
)
from reference_broker.coordinator.group import group_admin
from reference_broker.coordinator.group.group_coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
)
from reference_broker.coordinator.group.group_metadata import GroupState
from reference_broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from reference_broker.coordinator.group.offset_commits import OffsetCommits, OffsetToCommit
from tests.virtual_time import clock_ms, run, settle

PARTITIONS = 3
CONFIG = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10,
                     max_session_timeout_ms=10_000, max_size=3, offsets_retention_ms=50)


class FakeOffsetsLog:
    def __init__(self):
        self.partitions = {p: [] for p in range(PARTITIONS)}
        self.fail_with = ErrorCode.none

    def append(self, partition, records, producer=None):
        if self.fail_with != ErrorCode.none:
            return self.fail_with
        pid = -1 if producer is None else producer[0]
        self.partitions[partition].extend(
            LoggedRecord(k, v, pid, producer is not None) for k, v in records)
        return ErrorCode.none

    def marker(self, partition, producer_id, commit):
        """What the WriteTxnMarkers handler appends to an offsets partition."""
        self.partitions[partition].append(LoggedRecord(
            None, None, producer_id, True, ControlType.COMMIT if commit else ControlType.ABORT))

    def read(self, partition):
        return iter(list(self.partitions[partition]))


async def started(log, config=CONFIG, load_delay_ms=0):
    manager = GroupMetadataManager(PARTITIONS, log.append, log.read, load_delay_ms=load_delay_ms,
                                   now_ms=clock_ms)
    coordinator = GroupCoordinator(manager, config)
    for p in range(PARTITIONS):
        await coordinator.on_elected(p)
    return coordinator, OffsetCommits(manager, config)


def join(member_id="", group="g", session=1000, protocols=(("range", b"m"),), instance=None,
         known_required=False):
    return JoinRequest(group, member_id, instance, "c", "/h", session, 1000, "consumer",
                       list(protocols), known_required)


def test_java_hash_and_placement_match_kafka():
    assert java_string_hash("") == 0
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    # Java: "my-group".hashCode() == -1906497762; Kafka: Utils.abs(hash) % partitions.
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 12


def test_two_members_join_sync_and_survive_a_reload():
    async def scenario():
        log = FakeOffsetsLog()
        coordinator, offsets = await started(log)
        first = await coordinator.join_group(join(known_required=True))
        assert first.error == ErrorCode.member_id_required and first.member_id
        a = await coordinator.join_group(join(first.member_id))
        assert (a.error, a.generation_id, a.leader_id) == (ErrorCode.none, 1, a.member_id)
        b_task = asyncio.ensure_future(coordinator.join_group(join()))
        group = coordinator.manager.groups["g"]
        await settle(lambda: group.is_state(GroupState.PREPARING_REBALANCE), "b's join begun")
        assert coordinator.heartbeat("g", a.member_id, None, 1) == ErrorCode.rebalance_in_progress
        a2 = await coordinator.join_group(join(a.member_id))
        b = await b_task
        assert a2.generation_id == b.generation_id == 2
        assert [m[0] for m in a2.members] == [a.member_id, b.member_id] and b.members == []
        b_sync = asyncio.ensure_future(
            coordinator.sync_group("g", 2, b.member_id, None, None, None, {}))
        await asyncio.sleep(0.5)  # virtual; within both sessions (1 s)
        assert not b_sync.done(), "the follower's SyncGroup waits for the leader's"
        a_sync = await coordinator.sync_group("g", 2, a.member_id, None, "consumer", "range",
                                              {a.member_id: b"A", b.member_id: b"B"})
        assert (a_sync.error, a_sync.assignment) == (ErrorCode.none, b"A")
        assert (await b_sync).assignment == b"B"
        assert coordinator.heartbeat("g", b.member_id, None, 2) == ErrorCode.none
        assert coordinator.heartbeat("g", b.member_id, None, 1) == ErrorCode.illegal_generation
        assert offsets.commit("g", a.member_id, None, 2, {("t", 0): OffsetToCommit(7, 3, "m")}) \
            == {("t", 0): ErrorCode.none}
        group_key = [decode_key(r.key) for p in log.partitions.values() for r in p]
        assert any(getattr(k, "topic", None) == "t" for k in group_key)
        # A new coordinator replaying the same log knows the group and its offsets.
        again, offsets_again = await started(log)
        group = again.manager.groups["g"]
        assert group.state is GroupState.STABLE and group.generation_id == 2
        assert group.members[b.member_id].assignment == b"B"
        _, fetched, _ = offsets_again.fetch("g", [("t", 0), ("t", 1)])
        assert fetched[("t", 0)].offset == 7 and fetched[("t", 1)] is None
        again.on_resigned(partition_for("g", PARTITIONS))
        assert again.heartbeat("g", b.member_id, None, 2) == ErrorCode.not_coordinator
        coordinator.on_resigned(partition_for("g", PARTITIONS))

    run(scenario())


def test_session_expiry_evicts_and_the_survivor_rebalances():
    async def scenario():
        coordinator, _ = await started(FakeOffsetsLog())
        a = await coordinator.join_group(join(session=50))
        group = coordinator.manager.groups["g"]
        b_task = asyncio.ensure_future(coordinator.join_group(join(session=50)))
        await settle(lambda: group.is_state(GroupState.PREPARING_REBALANCE), "b's join begun")
        await coordinator.join_group(join(a.member_id, session=50))
        b = await b_task
        await coordinator.sync_group("g", b.generation_id, a.member_id, None, None, None, {})
        # a's session runs from that SyncGroup: 50 ms. b heartbeats every 20 ms, a does not.
        for _ in range(2):
            await asyncio.sleep(0.02)
            assert coordinator.heartbeat("g", b.member_id, None, b.generation_id) \
                == ErrorCode.none
        await asyncio.sleep(0.009)
        assert a.member_id in group.members, "49 ms into a 50 ms session"
        await asyncio.sleep(0.002)
        assert a.member_id not in group.members, "51 ms into a 50 ms session"
        assert group.state is GroupState.PREPARING_REBALANCE
        assert coordinator.heartbeat("g", b.member_id, None, b.generation_id) \
            == ErrorCode.rebalance_in_progress
        rejoined = await coordinator.join_group(join(b.member_id, session=50))
        assert rejoined.leader_id == b.member_id and rejoined.generation_id == 3
        assert coordinator.leave_group("g", [(b.member_id, None)]) \
            == (ErrorCode.none, [ErrorCode.none])
        assert (group.state, group.generation_id) == (GroupState.EMPTY, 4)

    run(scenario())


def test_join_errors():
    async def scenario():
        coordinator, _ = await started(FakeOffsetsLog())
        assert (await coordinator.join_group(join(session=5))).error \
            == ErrorCode.invalid_session_timeout
        assert (await coordinator.join_group(join("nobody"))).error == ErrorCode.unknown_member_id
        assert (await coordinator.join_group(join(group=""))).error == ErrorCode.invalid_group_id
        a = await coordinator.join_group(join())
        other = join(protocols=(("roundrobin", b""),))
        assert (await coordinator.join_group(other)).error == ErrorCode.inconsistent_group_protocol
        assert a.error == ErrorCode.none
        # As in Apache Kafka, members only handed an id (MEMBER_ID_REQUIRED) do not count
        # towards group.max.size: more of them than the limit are all handed one.
        for _ in range(CONFIG.max_size + 1):
            assert (await coordinator.join_group(join(known_required=True))).error \
                == ErrorCode.member_id_required
        group = coordinator.manager.groups["g"]
        newcomers = [asyncio.create_task(coordinator.join_group(join())) for _ in range(2)]
        await settle(lambda: group.is_state(GroupState.PREPARING_REBALANCE),
                     "the newcomers' joins begun")
        joined = await asyncio.gather(coordinator.join_group(join(a.member_id)), *newcomers)
        assert [j.error for j in joined] == [ErrorCode.none] * CONFIG.max_size
        assert (await coordinator.join_group(join(known_required=True))).error \
            == ErrorCode.group_max_size_reached

    run(scenario())


def test_static_member_rejoin_keeps_the_generation_and_fences_the_old_id():
    async def scenario():
        coordinator, _ = await started(FakeOffsetsLog())
        old = await coordinator.join_group(join(instance="i-1"))
        await coordinator.sync_group("g", old.generation_id, old.member_id, "i-1", None, None,
                                     {old.member_id: b"A"})
        new = await coordinator.join_group(join(instance="i-1"))
        assert new.error == ErrorCode.none and new.generation_id == old.generation_id
        assert new.member_id != old.member_id and new.skip_assignment
        assert coordinator.heartbeat("g", old.member_id, "i-1", old.generation_id) \
            == ErrorCode.fenced_instance_id
        assert (await coordinator.join_group(join(old.member_id, instance="i-1"))).error \
            == ErrorCode.fenced_instance_id
        synced = await coordinator.sync_group("g", new.generation_id, new.member_id, "i-1",
                                              None, None, {})
        assert synced.assignment == b"A"
        changed = await coordinator.join_group(join(instance="i-1",
                                                    protocols=(("range", b"other"),)))
        assert changed.error == ErrorCode.none and changed.generation_id == new.generation_id + 1
        assert coordinator.leave_group("g", [("", "i-1")]) == (ErrorCode.none, [ErrorCode.none])

    run(scenario())


def test_a_failed_store_fails_the_sync_and_rebalances():
    async def scenario():
        log = FakeOffsetsLog()
        coordinator, _ = await started(log)
        a = await coordinator.join_group(join())
        log.fail_with = ErrorCode.not_leader_or_follower
        synced = await coordinator.sync_group("g", a.generation_id, a.member_id, None, None,
                                              None, {a.member_id: b"A"})
        assert synced.error == ErrorCode.not_coordinator
        assert coordinator.manager.groups["g"].state is GroupState.PREPARING_REBALANCE
        coordinator.leave_group("g", [(a.member_id, None)])

    run(scenario())


def test_loading_is_refused_until_replayed():
    async def scenario():
        log = FakeOffsetsLog()
        manager = GroupMetadataManager(PARTITIONS, log.append, log.read, load_delay_ms=50,
                                       now_ms=clock_ms)
        coordinator = GroupCoordinator(manager, CONFIG)
        assert coordinator.heartbeat("g", "m", None, 1) == ErrorCode.not_coordinator
        partition = partition_for("g", PARTITIONS)
        loop = asyncio.get_running_loop()
        elected = loop.time()
        loading = asyncio.ensure_future(coordinator.on_elected(partition))
        await settle(lambda: partition in manager.loading, "the load begun")
        loading_error = ErrorCode.coordinator_load_in_progress
        assert (await coordinator.join_group(join())).error == loading_error
        assert group_admin.list_groups(manager, None, None)[0] == loading_error
        await loading
        assert loop.time() - elected == pytest.approx(0.05), "loaded after load_delay_ms"
        assert (await coordinator.join_group(join())).error == ErrorCode.none

    run(scenario())


def test_a_long_replay_answers_other_requests_and_partitions_replay_one_at_a_time():
    """No delay configured: a replay of many records still leaves the event loop free between
    slices (the group answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's does), and a
    second partition waits for the first, as with Kafka's single loader thread."""
    async def scenario():
        log = FakeOffsetsLog()
        replays = []

        def read(partition):
            replays.append(("start", partition))
            yield from log.read(partition)
            replays.append(("end", partition))

        manager = GroupMetadataManager(PARTITIONS, log.append, read, now_ms=clock_ms)
        offsets = OffsetCommits(manager, CONFIG)
        first, second = partition_for("g", PARTITIONS), (partition_for("g", PARTITIONS) + 1) % 3
        other = next(f"h{i}" for i in range(100) if partition_for(f"h{i}", PARTITIONS) == second)
        await manager.load_partition(first, lambda _g: None)
        tp = ("t", 0)
        for offset in range(2000):
            offsets.commit("g", "", None, -1, {tp: OffsetToCommit(offset, -1, None)})
        manager.unload_partition(first)
        replays.clear()

        loads = [asyncio.ensure_future(manager.load_partition(p, lambda _g: None))
                 for p in (first, second)]
        await settle(lambda: ("start", first) in replays, "the first replay begun")
        assert ("end", first) not in replays, "this test runs in the middle of the replay"
        assert not any(load.done() for load in loads)
        assert manager.ownership_error("g") == ErrorCode.coordinator_load_in_progress
        assert manager.ownership_error(other) == ErrorCode.coordinator_load_in_progress
        await asyncio.gather(*loads)
        assert replays == [("start", first), ("end", first), ("start", second), ("end", second)]
        assert manager.ownership_error("g") == ErrorCode.none
        assert manager.groups["g"].offsets[tp].offset == 1999

    run(scenario())


def test_offset_rules_retention_and_group_deletion():
    async def scenario():
        log = FakeOffsetsLog()
        coordinator, offsets = await started(log)
        tp = ("t", 0)
        assert offsets.commit("s", "", None, 5, {tp: OffsetToCommit(1, -1, None)}) \
            == {tp: ErrorCode.illegal_generation}
        assert offsets.commit("s", "", None, -1, {tp: OffsetToCommit(1, -1, "x" * 5000)}) \
            == {tp: ErrorCode.offset_metadata_too_large}
        assert offsets.commit("s", "", None, -1, {tp: OffsetToCommit(1, -1, None)}) \
            == {tp: ErrorCode.none}
        a = await coordinator.join_group(join())
        assert offsets.commit("g", a.member_id, None, a.generation_id,
                              {tp: OffsetToCommit(1, -1, None)}) \
            == {tp: ErrorCode.rebalance_in_progress}
        await coordinator.sync_group("g", a.generation_id, a.member_id, None, None, None, {})
        assert offsets.commit("g", "", None, -1, {tp: OffsetToCommit(1, -1, None)}) \
            == {tp: ErrorCode.unknown_member_id}
        assert offsets.commit("g", a.member_id, None, 0, {tp: OffsetToCommit(1, -1, None)}) \
            == {tp: ErrorCode.illegal_generation}
        assert offsets.commit("g", a.member_id, None, a.generation_id,
                              {tp: OffsetToCommit(2, -1, None)}) == {tp: ErrorCode.none}
        assert group_admin.delete_group(coordinator.manager, "g") == ErrorCode.non_empty_group
        assert group_admin.delete_group(coordinator.manager, "nope") == ErrorCode.group_id_not_found
        assert offsets.delete("g", [tp]) == (ErrorCode.none, {tp: ErrorCode.none})
        coordinator.leave_group("g", [(a.member_id, None)])
        # "s"'s offset was committed when the scenario began (the virtual clock has not moved
        # since); retention is 50 ms.
        await asyncio.sleep(0.049)
        assert coordinator.manager.expire_offsets(CONFIG.offsets_retention_ms) == 0
        assert "s" in coordinator.manager.groups
        await asyncio.sleep(0.002)
        assert coordinator.manager.expire_offsets(CONFIG.offsets_retention_ms) == 1
        assert "s" not in coordinator.manager.groups
        assert group_admin.describe_group(coordinator.manager, "s").state == "Dead"
        tombstones = [decode_key(r.key) for p in log.partitions.values() for r in p
                      if r.value is None]
        assert {getattr(k, "group", None) for k in tombstones} >= {"s"}
        values = [decode_group_value(r.value) for p in log.partitions.values() for r in p
                  if r.value is not None
                  and decode_key(r.key).__class__.__name__ == "GroupMetadataKey"]
        assert values and all(v.protocol_type == "consumer" for v in values)

    run(scenario())


@pytest.mark.parametrize("states,expected", [(None, ["a"]), ({"stable"}, []),
                                             ({"CompletingRebalance"}, ["a"])])
def test_list_groups_filters_by_state(states, expected):
    async def scenario():
        coordinator, _ = await started(FakeOffsetsLog())
        await coordinator.join_group(join(group="a"))
        error, listed = group_admin.list_groups(coordinator.manager, states, None)
        assert error == ErrorCode.none and [g for g, _t, _s in listed] == expected
        assert group_admin.list_groups(coordinator.manager, None, {"consumer"}) \
            == (ErrorCode.none, [])
        coordinator.on_resigned(partition_for("a", PARTITIONS))

    run(scenario())


def test_initial_rebalance_delay_gathers_a_starting_fleet_into_one_generation():
    async def scenario():
        config = GroupConfig(initial_rebalance_delay_ms=100, min_session_timeout_ms=10)
        coordinator, _ = await started(FakeOffsetsLog(), config)
        loop = asyncio.get_running_loop()
        begun = loop.time()
        first = asyncio.ensure_future(coordinator.join_group(join()))
        await asyncio.sleep(0.03)  # virtual: 30 ms into the 100 ms initial delay
        assert not first.done()
        second = await coordinator.join_group(join())
        a = await first
        elapsed = loop.time() - begun
        assert a.generation_id == second.generation_id == 1
        assert len(a.members) == 2
        # As Kafka's InitialDelayedJoin: the delay expires at 100 ms, sees a new member, and
        # waits one more delay (the rebalance timeout, 1000 ms, leaves room for it).
        assert elapsed == pytest.approx(0.2)
        coordinator.on_resigned(partition_for("g", PARTITIONS))

    run(scenario())


def test_resigning_during_a_load_abandons_it():
    async def scenario():
        log = FakeOffsetsLog()
        writer, offsets = await started(log)
        offsets.commit("g", "", None, -1, {("t", 0): OffsetToCommit(1, -1, None)})
        manager = GroupMetadataManager(PARTITIONS, log.append, log.read, load_delay_ms=50,
                                       now_ms=clock_ms)
        coordinator = GroupCoordinator(manager, CONFIG)
        partition = partition_for("g", PARTITIONS)
        loading = asyncio.ensure_future(coordinator.on_elected(partition))
        await settle(lambda: partition in manager.loading, "the load begun")
        await asyncio.sleep(0.01)  # virtual: inside the 50 ms load delay
        assert not loading.done()
        coordinator.on_resigned(partition)
        await loading
        assert manager.groups == {} and partition not in manager.owned
        assert manager.ownership_error("g") == ErrorCode.not_coordinator
        assert writer.manager.groups["g"].offsets

    run(scenario())


def test_transactional_offsets_wait_for_their_marker_and_survive_a_reload():
    """TxnOffsetCommit (KIP-98): pending until the marker — invisible to OffsetFetch, and with
    require_stable UNSTABLE_OFFSET_COMMIT (KIP-447) — then committed or dropped; a reload
    replays the transactional batches and their markers the same way."""
    async def scenario():
        log = FakeOffsetsLog()
        coordinator, offsets = await started(log)
        tp0, tp1 = ("t", 0), ("t", 1)
        assert offsets.commit("g", "", None, -1, {tp0: OffsetToCommit(3, -1, "")}) == {
            tp0: ErrorCode.none}
        for pid, offset in ((7, 10), (8, 20)):
            assert offsets.txn_commit("g", pid, 0, "", None, -1, {
                tp0: OffsetToCommit(offset, -1, ""), tp1: OffsetToCommit(offset, -1, "")}) \
                == {tp0: ErrorCode.none, tp1: ErrorCode.none}
        error, fetched, unstable = offsets.fetch("g", [tp0, tp1], require_stable=True)
        assert (error, fetched[tp0].offset, fetched[tp1], unstable) == (
            ErrorCode.none, 3, None, {tp0, tp1})
        assert offsets.fetch("g", [tp0], require_stable=False)[2] == frozenset()
        partition = partition_for("g", PARTITIONS)
        assert coordinator.complete_transactional_offsets(partition, 7, commit=False) == 1
        log.marker(partition, 7, commit=False)
        assert offsets.fetch("g", [tp0], require_stable=True)[2] == {tp0}  # 8 still pending
        # A reload before producer 8's marker: its offsets are pending again.
        again, offsets_again = await started(log)
        error, fetched, unstable = offsets_again.fetch("g", [tp0, tp1], require_stable=True)
        assert (fetched[tp0].offset, unstable) == (3, {tp0, tp1})
        assert again.complete_transactional_offsets(partition, 8, commit=True) == 1
        log.marker(partition, 8, commit=True)
        assert again.complete_transactional_offsets(partition, 8, commit=True) == 0
        _, fetched, unstable = offsets_again.fetch("g", [tp0, tp1], require_stable=True)
        assert ({tp: o.offset for tp, o in fetched.items()}, unstable) == (
            {tp0: 20, tp1: 20}, frozenset())
        _, reloaded, _ = (await started(log))[1].fetch("g", [tp0, tp1], require_stable=True)
        assert {tp: o.offset for tp, o in reloaded.items()} == {tp0: 20, tp1: 20}

    run(scenario())


def test_a_transactional_commit_checks_member_and_generation_when_given():
    async def scenario():
        _, offsets = await started(FakeOffsetsLog())
        wanted = {("t", 0): OffsetToCommit(1, -1, "")}
        assert offsets.txn_commit("g", 7, 0, "stranger", None, -1, wanted) == {
            ("t", 0): ErrorCode.unknown_member_id}
        assert offsets.txn_commit("g", 7, 0, "", None, 4, wanted) == {
            ("t", 0): ErrorCode.illegal_generation}
        assert offsets.txn_commit("g", 7, 0, "", None, -1, wanted) == {
            ("t", 0): ErrorCode.none}

    run(scenario())


def test_a_deleted_topic_takes_every_groups_offsets_with_it():
    """GroupCoordinator.onPartitionsDeleted: the deleted partitions' offsets leave every group,
    tombstoned so a reload does not bring them back, and a pending transactional offset of
    them is dropped; other partitions' offsets stay, and an Empty group left with none is
    deleted, so a topic re-created under the same name starts with no committed offset."""
    async def scenario():
        log = FakeOffsetsLog()
        coordinator, offsets = await started(log)
        gone, kept = ("t", 0), ("u", 0)
        assert offsets.commit("a", "", None, -1, {gone: OffsetToCommit(2, -1, None),
                                                  kept: OffsetToCommit(5, -1, None)}) \
            == {gone: ErrorCode.none, kept: ErrorCode.none}
        assert offsets.commit("b", "", None, -1, {gone: OffsetToCommit(7, -1, None)}) \
            == {gone: ErrorCode.none}
        assert offsets.txn_commit("c", 9, 0, "", None, -1, {gone: OffsetToCommit(3, -1, "")}) \
            == {gone: ErrorCode.none}
        coordinator.on_partitions_deleted([gone, ("t", 1)])

        def committed(offsets_, group):
            _, fetched, unstable = offsets_.fetch(group, [gone, kept], require_stable=True)
            return {tp: o.offset for tp, o in fetched.items() if o is not None}, unstable

        assert committed(offsets, "a") == ({kept: 5}, frozenset())
        assert committed(offsets, "c") == ({}, frozenset())
        assert "b" not in coordinator.manager.groups  # Empty, with no offset left: deleted
        _, reloaded = await started(log)
        assert committed(reloaded, "a") == ({kept: 5}, frozenset())
        assert committed(reloaded, "b") == ({}, frozenset())

    run(scenario())
