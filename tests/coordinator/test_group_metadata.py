"""The group state machine on its own: no sockets, no event loop."""

import pytest

from reference_broker.coordinator.group.group_metadata import (
    VALID_PREVIOUS_STATES,
    CommittedOffset,
    GroupMetadata,
    GroupState,
    InvalidStateTransition,
    MemberMetadata,
)

E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                 GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)


def member(member_id, protocols=(("range", b"r"), ("roundrobin", b"rr")), instance=None):
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", 3000, 1000, "consumer",
                          list(protocols))


def group_in(state):
    group = GroupMetadata("g")
    group.state = state
    return group


ALLOWED = {(E, P), (P, C), (P, E), (C, S), (S, P), (C, P),
           (E, D), (P, D), (C, D), (S, D), (D, D)}


@pytest.mark.parametrize("source", list(GroupState))
@pytest.mark.parametrize("target", list(GroupState))
def test_only_documented_transitions_are_allowed(source, target):
    group = group_in(source)
    if (source, target) in ALLOWED:
        group.transition_to(target, now_ms=5)
        assert group.state is target and group.current_state_timestamp == 5
    else:
        with pytest.raises(InvalidStateTransition):
            group.transition_to(target, now_ms=5)
        assert group.state is source


def test_the_table_and_the_allowed_set_agree():
    table = {(prev, state) for state, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert table == ALLOWED


def test_a_full_generation():
    group = GroupMetadata("g")
    group.add(member("a"))
    group.add(member("b", protocols=(("roundrobin", b"x"), ("range", b"y"))))
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    group.transition_to(P, 1)
    assert not group.has_all_members_joined()
    for m in group.members.values():
        m.awaiting_join = True
    assert group.has_all_members_joined()
    group.init_next_generation(2)
    assert (group.state, group.generation_id) == (C, 1)
    # One vote each: the leader's preference breaks the tie.
    assert group.protocol_name == "range"
    assert group.member_list() == [("a", None, b"r"), ("b", None, b"y")]
    group.set_assignments({"a": b"A"})
    assert [m.assignment for m in group.members.values()] == [b"A", b""]
    group.transition_to(S, 3)


def test_majority_vote_wins_over_leader_preference():
    group = GroupMetadata("g")
    group.add(member("a"))
    group.add(member("b", protocols=(("roundrobin", b""), ("range", b""))))
    group.add(member("c", protocols=(("roundrobin", b""), ("range", b""))))
    group.transition_to(P, 0)
    group.init_next_generation(0)
    assert group.protocol_name == "roundrobin"


def test_a_generation_without_members_empties_the_group():
    group = GroupMetadata("g")
    group.add(member("a"))
    group.transition_to(P, 0)
    group.remove("a")
    group.init_next_generation(0)
    assert group.state is E and group.generation_id == 1 and group.protocol_name is None


def test_protocol_support():
    group = GroupMetadata("g")
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    assert group.supports_protocols("consumer", ["range"])
    group.add(member("a", protocols=(("range", b""),)))
    assert group.supports_protocols("consumer", ["roundrobin", "range"])
    assert not group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("connect", ["range"])


def test_leader_moves_when_the_leader_leaves_or_does_not_rejoin():
    group = GroupMetadata("g")
    group.add(member("a"))
    group.add(member("b"))
    group.remove("a")
    assert group.leader_id == "b"
    group.add(member("c"))
    group.members["c"].awaiting_join = True
    group.elect_joined_leader()
    assert group.leader_id == "c"


def test_static_members_are_replaced_and_fenced():
    group = GroupMetadata("g")
    group.add(member("old", instance="i-1"))
    assert group.static_member_id("i-1") == "old"
    assert group.is_fenced("i-1", "someone-else") and not group.is_fenced("i-1", "old")
    group.members["old"].assignment = b"kept"
    replaced = group.replace_static_member("i-1", "new")
    assert replaced.assignment == b"kept" and group.leader_id == "new"
    assert group.is_fenced("i-1", "old") and "old" not in group.members
    group.remove("new")
    assert group.static_member_id("i-1") is None


def test_select_protocol_without_a_common_one_is_a_bug():
    group = GroupMetadata("g")
    group.add(member("a", protocols=(("range", b""),)))
    group.add(member("b", protocols=(("roundrobin", b""),)))
    with pytest.raises(InvalidStateTransition):
        group.select_protocol()


def test_offsets_expire_only_when_empty():
    group = GroupMetadata("g", protocol_type="consumer")
    group.commit(("t", 0), CommittedOffset(5, -1, "", commit_timestamp=100))
    group.commit(("t", 1), CommittedOffset(6, -1, "", commit_timestamp=100,
                                           expire_timestamp=150))
    group.state = S
    assert group.expired_offsets(now_ms=10_000, retention_ms=10) == []
    group.state = P
    group.transition_to(E, now_ms=1000)
    # The consumer group's clock starts when it became empty; explicit expiry wins.
    assert group.expired_offsets(now_ms=1005, retention_ms=10) == [("t", 1)]
    assert group.expired_offsets(now_ms=1010, retention_ms=10) == [("t", 0), ("t", 1)]
    simple = GroupMetadata("s")
    simple.commit(("t", 0), CommittedOffset(1, -1, "", commit_timestamp=100))
    assert simple.expired_offsets(now_ms=110, retention_ms=10) == [("t", 0)]
    simple.remove_offsets([("t", 0)])
    assert simple.offsets == {}
