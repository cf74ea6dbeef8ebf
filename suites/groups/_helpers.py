"""Raw classic-group flows (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) for the groups and offsets
suites, on :class:`~harness.raw_client.RawClient`.

Real clients hide what the coordinator answered — they retry, rejoin and translate errors — so
the exact protocol rules are checked with raw requests at fixed versions: new enough for KIP-394
(JoinGroup v4+) and KIP-345 (``group_instance_id``, JoinGroup v5), old enough that librdkafka's
mock cluster implements them too. A target lacking an API or version skips the test by name.

Group requests go to the group's coordinator (a raw request elsewhere gets NOT_COORDINATOR), so
:func:`coordinator_client` asks FindCoordinator and connects there, and waits until the
coordinator has loaded the group's offsets partition — what every Kafka client does first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.group_records import encode_subscription

OFFSET_COMMIT, OFFSET_FETCH, METADATA, FIND_COORDINATOR = 8, 9, 3, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 12, 13, 14, 15
API_VERSIONS, DELETE_GROUPS, OFFSET_DELETE, DESCRIBE_CONFIGS = 18, 42, 47, 32

# The versions the suites speak (see the module docstring for why these).
V = {FIND_COORDINATOR: 3, JOIN_GROUP: 5, SYNC_GROUP: 3, HEARTBEAT: 3, LEAVE_GROUP: 3,
     OFFSET_COMMIT: 7, OFFSET_FETCH: 6, DESCRIBE_GROUPS: 4, DELETE_GROUPS: 1, OFFSET_DELETE: 0,
     METADATA: 1, DESCRIBE_CONFIGS: 1}

# What a client retries while a coordinator moves or loads [protocol guide, error codes].
RETRIABLE_COORDINATOR_ERRORS = frozenset({ErrorCode.coordinator_not_available,
                                          ErrorCode.coordinator_load_in_progress,
                                          ErrorCode.not_coordinator})
WAIT_S = 30.0
# A well-formed consumer subscription: coordinators may read it (KIP-496's OffsetDelete does).
SUBSCRIPTION = encode_subscription(["suite-topic"])
RawFactory = Callable[..., RawClient]


def err(response: Any) -> ErrorCode:
    """A response's (or a response part's) error code. A code Kafka does not define fails the
    test here, naming it: no rule in the suites expects one."""
    code = int(response.error_code)
    try:
        return ErrorCode(code)
    except ValueError:
        raise AssertionError(f"answered error code {code}, which Kafka does not define") \
            from None


def require_apis(client: RawClient, *api_keys: int) -> None:
    """Skip the test when the target does not implement each API at the suite's version."""
    ranges = client.advertised()
    for key in api_keys:
        _require(ranges, key, V[key])


def require_version(client: RawClient, api_key: int, version: int) -> int:
    """``version`` of ``api_key`` if the target implements it, else a precise skip."""
    _require(client.advertised(), api_key, version)
    return version


def _require(ranges: dict[int, tuple[int, int]], api_key: int, version: int) -> None:
    low, high = ranges.get(api_key, (0, -1))
    if not low <= version <= high:
        pytest.skip(f"needs API key {api_key} at version {version}; the target offers "
                    f"{'none' if high < 0 else f'versions {low}-{high}'}")


@dataclass(frozen=True)
class Coordinator:
    node_id: int
    address: str


def find_coordinator(client: RawClient, group: str, timeout: float = WAIT_S) -> Coordinator:
    """FindCoordinator, retried while the offsets topic is being created or elected."""
    def ask() -> Coordinator | None:
        answer = client.request(FIND_COORDINATOR, V[FIND_COORDINATOR],
                                {"key": group, "key_type": 0})
        if err(answer) in RETRIABLE_COORDINATOR_ERRORS:
            return None
        assert err(answer) == ErrorCode.none, f"FindCoordinator({group}) answered {err(answer)!r}"
        return Coordinator(answer.node_id, f"{answer.host}:{answer.port}")

    return wait_for(ask, timeout, f"a coordinator for {group}", retry_on=())


def fetch_offsets(client: RawClient, group: str, topic: str | None = None,
                  partitions: list[int] | None = None) -> Any:
    """OffsetFetch of `partitions` of `topic`, or of everything the group committed."""
    topics = None if topic is None else [{"name": topic, "partition_indexes": partitions}]
    return client.request(OFFSET_FETCH, V[OFFSET_FETCH], {"group_id": group, "topics": topics})


def wait_coordinator_ready(client: RawClient, group: str, timeout: float = WAIT_S, *,
                           interval: float = 0.1) -> list[ErrorCode]:
    """Retry an OffsetFetch every `interval` s until the coordinator serves the group; the
    retriable errors seen, in order.

    Anything but NONE or a retriable coordinator error fails: a client could not recover."""
    seen: list[ErrorCode] = []

    def served() -> bool:
        # No topics rather than all (null): this probe must not depend on the all-topics
        # answer, which a peer may get wrong (Tansu's is malformed) and a test checks instead.
        answer = err(client.request(OFFSET_FETCH, V[OFFSET_FETCH],
                                    {"group_id": group, "topics": []}))
        if answer == ErrorCode.none:
            return True
        assert answer in RETRIABLE_COORDINATOR_ERRORS, f"OffsetFetch({group}) answered {answer!r}"
        seen.append(answer)
        return False

    wait_for(served, timeout, f"the coordinator of {group} to serve it", interval=interval,
             retry_on=())
    return seen


def coordinator_client(raw_client: RawFactory, group: str, *apis: int) -> RawClient:
    """A raw client connected to `group`'s coordinator, once it serves the group.

    `apis` are checked against the target first (a precise skip when one is missing)."""
    probe = raw_client()
    require_apis(probe, FIND_COORDINATOR, OFFSET_FETCH, *apis)
    # A JoinGroup may be held for up to its rebalance timeout: read answers for longer.
    client = raw_client(find_coordinator(probe, group).address, timeout=2 * WAIT_S)
    wait_coordinator_ready(client, group)
    return client


def join_body(group: str, member_id: str = "", *, protocols: list[tuple[str, bytes]] | None = None,
              session_ms: int = 10_000, rebalance_ms: int = 10_000, instance: str | None = None,
              protocol_type: str = "consumer") -> dict[str, Any]:
    return {"group_id": group, "session_timeout": session_ms,
            "rebalance_timeout": rebalance_ms, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m}
                          for n, m in (protocols or [("range", SUBSCRIPTION)])]}


def join(client: RawClient, group: str, member_id: str = "", **options: Any) -> Any:
    """JoinGroup v5 through KIP-394's two steps (a static member is given its id at once)."""
    answer = client.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group, member_id, **options))
    if err(answer) == ErrorCode.member_id_required:
        assert answer.member_id, "MEMBER_ID_REQUIRED without a member id"
        answer = client.request(JOIN_GROUP, V[JOIN_GROUP],
                                join_body(group, answer.member_id, **options))
    return answer


class BackgroundJoin:
    """A new member's :func:`join` on its own thread: its JoinGroup is held until the members
    already in the group rejoin, which the test drives meanwhile on other connections."""

    def __init__(self, client: RawClient, group: str, **options: Any) -> None:
        self._answer: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client, group, options),
                                        daemon=True)
        self._thread.start()

    def _run(self, client: RawClient, group: str, options: dict[str, Any]) -> None:
        try:
            self._answer = join(client, group, **options)
        except BaseException as exc:  # handed to the test thread by answer()
            self._error = exc

    def assert_pending(self) -> None:
        """Fail with the coordinator's answer if it answered before any rebalance completed."""
        if not self._thread.is_alive():
            raise AssertionError(f"the new member's JoinGroup was answered "
                                 f"{err(self.answer())!r} without a rebalance")

    def answer(self, timeout: float = 2 * WAIT_S) -> Any:
        """The JoinGroup answer, once the rebalance completed."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"JoinGroup unanswered after {timeout:.0f} s"
        if self._error is not None:
            raise self._error
        return self._answer


def sync(client: RawClient, group: str, joined: Any,
         assignments: dict[str, bytes] | None = None, instance: str | None = None) -> Any:
    """SyncGroup for the member `joined` (a JoinGroup answer); a leader hands out `assignments`."""
    return client.request(SYNC_GROUP, V[SYNC_GROUP], {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a}
                        for m, a in (assignments or {}).items()]})


def stable_member(client: RawClient, group: str, assignment: bytes = b"A", **options: Any) -> Any:
    """Join a fresh group as its only member and sync it to Stable; the JoinGroup answer."""
    joined = join(client, group, **options)
    assert err(joined) == ErrorCode.none, err(joined)
    synced = sync(client, group, joined, {joined.member_id: assignment},
                  instance=options.get("instance"))
    assert (err(synced), synced.assignment) == (ErrorCode.none, assignment)
    return joined


def heartbeat(client: RawClient, group: str, member_id: str, generation: int,
              instance: str | None = None) -> ErrorCode:
    answer = client.request(HEARTBEAT, V[HEARTBEAT], {
        "group_id": group, "member_id": member_id, "generation_id": generation,
        "group_instance_id": instance})
    return err(answer)


def leave(client: RawClient, group: str, *members: tuple[str, str | None]) -> Any:
    """LeaveGroup v3 (batched, KIP-345) of (member id, group instance id) pairs."""
    return client.request(LEAVE_GROUP, V[LEAVE_GROUP], {
        "group_id": group,
        "members": [{"member_id": m, "group_instance_id": i} for m, i in members]})


def describe(client: RawClient, group: str) -> Any:
    answer = client.request(DESCRIBE_GROUPS, V[DESCRIBE_GROUPS], {
        "groups": [group], "include_authorized_operations": False})
    return answer.groups[0]


def rejoin_when_rebalancing(client: RawClient, group: str, member: Any,
                            joining: BackgroundJoin | None = None, **options: Any) -> Any:
    """Heartbeat until the coordinator says REBALANCE_IN_PROGRESS, then rejoin, as clients do;
    the JoinGroup answer (which waits for every member to rejoin). `joining`, the new member
    that starts the rebalance, must still be waiting meanwhile."""
    def rebalancing() -> bool:
        if joining is not None:
            joining.assert_pending()
        return heartbeat(client, group, member.member_id, member.generation_id,
                         options.get("instance")) == ErrorCode.rebalance_in_progress

    wait_for(rebalancing, WAIT_S, "a heartbeat to report the rebalance", retry_on=())
    return join(client, group, member.member_id, **options)


def wait_topic_known(client: RawClient, topic: str) -> None:
    """Wait until the broker behind `client` has `topic`, with a leader per partition, in its
    own metadata: a new topic reaches each broker's metadata cache on its own time, and until
    then an OffsetCommit there answers UNKNOWN_TOPIC_OR_PARTITION, as on Kafka."""
    def known() -> bool:
        answer: Any = client.request(METADATA, V[METADATA], {"topics": [{"name": topic}]})
        return any(t.name == topic and err(t) == ErrorCode.none and t.partitions
                   and all(p.leader_id >= 0 for p in t.partitions) for t in answer.topics)

    wait_for(known, WAIT_S, f"the broker to know topic {topic}", retry_on=())


def broker_addresses(client: RawClient) -> dict[int, str]:
    """{node id: host:port} of every broker the target's Metadata lists."""
    answer: Any = client.request(METADATA, V[METADATA], {"topics": []})
    return {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
