"""The warm-up gate: a run's faults start once its consumer groups are Stable and assigned.

A nemesis schedule timed from the run's start hit consumer groups that had not formed yet: on a
loaded machine (Apache Kafka 3.9.2, load average 30) a group first stabilized 29 s into a run,
after the first broker bounce, and the rolling-bounce scenario counted that first formation as a
rebalance the bounce caused. So for a run whose clients read in groups, the runner waits here
until every such group is Stable with all its members and every partition it reads assigned,
and the schedule's times count from that moment.

The brokers are asked rather than the consumers' history read: Stable is the coordinator's
state, which no client knows; it covers every member at once, where a consumer records only its
own assignment; and the clients' history files are written by other processes as they go, not a
record to read while they run.

They are asked on the harness's own raw connections (FindCoordinator, then DescribeGroups for a
classic group or ConsumerGroupDescribe for a KIP-848 one), opened and closed within each ask. The
first gate asked through confluent-kafka's AdminClient and hung a fresh-clone CI run: a client
dropped with a describe future still pending was garbage-collected minutes later inside the final
read's ``Consumer.consume``, and librdkafka's destroy waited there for ever (``Admin_dealloc`` →
``rd_kafka_destroy_app`` → ``thrd_join``, seen with py-spy). A raw ask leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.nemesis.roles import FIND_COORDINATOR, FIND_COORDINATOR_VERSION
from harness.net.toxiproxy_process import split_address
from harness.raw_client import RawClient
from harness.waiting import ClusterWaitTimeout, wait_for
from harness.wire.errors import ErrorCode
from harness.wire.group_records import decode_assignment
from harness.workload.client import ClientSpec
from harness.workload.consumer import ConsumerSpec
from harness.workload.group_protocol import GroupProtocol
from harness.workload.transform import ProcessorSpec

TIMEOUT_S = 60.0
"""How long the gate waits before the schedule starts anyway (with a note): longer than a group
took to form under load (29 s at load average 30), short enough that a run whose group cannot
form still ends."""
# One ask's wait for its answer. The first ask of a run, sent while the consumers' own lookups
# create the offsets topic, went unanswered for 10 s on the reference broker; a short wait lets
# the next ask, which answers at once, come sooner.
_ASK_TIMEOUT_S = 2.0

DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION = 15, 5
CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_VERSION = 69, 0
STABLE = "Stable"  # the state both describes name a settled group by (Kafka's own spelling)


@dataclass(frozen=True)
class GroupWant:
    """A consumer group the run's clients form: its id, how many members, what it reads, and
    the protocol they speak (which describe answers for it)."""

    group: str
    members: int
    topics: tuple[str, ...]
    protocol: GroupProtocol = GroupProtocol.CLASSIC


def groups_of(roles: list[tuple[str, ClientSpec]]) -> list[GroupWant]:
    """The groups the run's clients join (consumers in group mode, transform processors), in
    the order first met; none for a run without group consumers."""
    wants: dict[str, GroupWant] = {}
    for _, spec in roles:
        if isinstance(spec, ConsumerSpec) and spec.mode == "group" and spec.group:
            group, topics = spec.group, spec.topics
        elif isinstance(spec, ProcessorSpec):
            group, topics = spec.group, (spec.input_topic,)
        else:
            continue
        known = wants.get(group)
        members = known.members + 1 if known else 1
        wants[group] = GroupWant(group, members, tuple(dict.fromkeys(
            (*(known.topics if known else ()), *topics))), spec.group_protocol)
    return list(wants.values())


@dataclass(frozen=True)
class Described:
    """What the coordinator says of a group: its state, and each member's partitions."""

    state: str
    assignments: tuple[frozenset[tuple[str, int]], ...]

    def ready(self, want: GroupWant, partitions: int) -> bool:
        """Stable, with exactly ``want``'s members, and every partition of its topics held."""
        held = frozenset().union(*self.assignments)
        return (self.state == STABLE and len(self.assignments) == want.members
                and held >= {(topic, p) for topic in want.topics for p in range(partitions)})


def _classic_assignment(data: bytes) -> frozenset[tuple[str, int]]:
    """A classic member's assignment, in the consumer protocol's encoding; empty when it has
    none yet (or it is not a consumer's: then the group is not the one the run formed)."""
    try:
        return frozenset((topic, p) for topic, held in decode_assignment(data).items()
                         for p in held)
    except ValueError:  # RecordFormatError among them
        return frozenset()


def _described(response: Any, protocol: GroupProtocol) -> Described | None:
    """The one group of a describe answer, or None when the coordinator answered an error
    (not the coordinator now, still loading, …): the next ask tries again."""
    (group,) = response.groups
    if group.error_code != ErrorCode.none:
        return None
    if protocol is GroupProtocol.CONSUMER:
        return Described(str(group.group_state), tuple(
            frozenset((str(tp.topic_name), int(p)) for tp in member.assignment.topic_partitions
                      for p in tp.partitions) for member in group.members))
    return Described(str(group.group_state), tuple(
        _classic_assignment(bytes(member.member_assignment)) for member in group.members))


def describe(bootstrap: str, want: GroupWant,
             timeout_s: float = _ASK_TIMEOUT_S) -> Described | None:
    """Ask the group's coordinator, found through the first bootstrap address that answers,
    how the group stands; None when no coordinator answers yet."""
    for address in bootstrap.split(","):
        host, port = split_address(address)
        try:
            with RawClient(host, port, timeout=timeout_s,
                           client_id="kafka-harness-warm-up") as client:
                found = client.request(FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                                       {"key": want.group, "key_type": 0})
        except OSError:
            continue
        if found.error_code != ErrorCode.none:
            continue
        with RawClient(str(found.host), int(found.port), timeout=timeout_s,
                       client_id="kafka-harness-warm-up") as client:
            if want.protocol is GroupProtocol.CONSUMER:
                response = client.request(CONSUMER_GROUP_DESCRIBE,
                                          CONSUMER_GROUP_DESCRIBE_VERSION,
                                          {"group_ids": [want.group],
                                           "include_authorized_operations": False})
            else:
                response = client.request(DESCRIBE_GROUPS, DESCRIBE_GROUPS_VERSION,
                                          {"groups": [want.group],
                                           "include_authorized_operations": False})
        return _described(response, want.protocol)
    return None


def wait_until_warm(bootstrap: str, wants: list[GroupWant], partitions: int,
                    meanwhile: Callable[[], object], timeout_s: float = TIMEOUT_S) -> str | None:
    """Wait for every group of ``wants`` to be ready (:meth:`Described.ready`), calling
    ``meanwhile`` on each poll (the generator replaces a client that died); None once they are,
    else the note that says which never was."""
    if not wants:
        return None

    def ready() -> bool:
        meanwhile()
        for want in wants:
            described = describe(bootstrap, want)
            if described is None or not described.ready(want, partitions):
                return False
        return True

    names = ", ".join(want.group for want in wants)
    try:
        wait_for(ready, timeout_s, f"consumer group(s) {names} Stable with every member "
                                   f"assigned", interval=0.2, retry_on=(OSError,))
    except ClusterWaitTimeout as exc:
        return (f"the consumer group(s) never became Stable with every member assigned within "
                f"{timeout_s:.0f} s; the nemesis schedule started anyway: {exc}")
    return None
