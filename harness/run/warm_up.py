"""The warm-up gate: a run's faults start once its consumer groups are Stable and assigned.

A nemesis schedule timed from the run's start hit consumer groups that had not formed yet: on a
loaded machine (Apache Kafka 3.9.2, load average 30) a group first stabilized 29 s into a run,
after the first broker bounce, and the rolling-bounce scenario counted that first formation as a
rebalance the bounce caused. So for a run whose clients read in groups, the runner waits here
until every such group is Stable with all its members and every partition it reads assigned,
and the schedule's times count from that moment.

The brokers are asked (DescribeGroups, through the AdminClient) rather than the consumers'
history read: Stable is the coordinator's state, which no client knows; it covers every member
at once, where a consumer records only its own assignment; and the clients' history files are
written by other processes as they go, not a record to read while they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

from harness.waiting import ClusterWaitTimeout, wait_for
from harness.workload.client import ClientSpec
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import QUIET
from harness.workload.transform import ProcessorSpec

TIMEOUT_S = 60.0
"""How long the gate waits before the schedule starts anyway (with a note): longer than a group
took to form under load (29 s at load average 30), short enough that a run whose group cannot
form still ends."""
# One ask's wait for its answer. The first ask of a run, sent while the consumers' own lookups
# create the offsets topic, went unanswered for 10 s (the old wait) on the reference broker;
# with 2 s the next ask answers at once. (AdminClient's own request_timeout option is not used:
# librdkafka 2.16.0 aborted the process with it — rd_kafka_enq_once_del_source_return's
# "eonce->refcnt > 0" assertion — on every run against a 3-broker reference cluster.)
_ASK_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class GroupWant:
    """A consumer group the run's clients form: its id, how many members, what it reads."""

    group: str
    members: int
    topics: tuple[str, ...]


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
            (*(known.topics if known else ()), *topics))))
    return list(wants.values())


def group_ready(admin: AdminClient, want: GroupWant, partitions: int) -> bool:
    """Whether ``want``'s group is Stable, with exactly its members, and every partition of its
    topics assigned to one of them."""
    described = admin.describe_consumer_groups([want.group])[want.group].result(_ASK_TIMEOUT_S)
    if described.state != ConsumerGroupState.STABLE or len(described.members) != want.members:
        return False
    assigned = {(tp.topic, tp.partition) for member in described.members
                for tp in member.assignment.topic_partitions}
    return assigned >= {(topic, p) for topic in want.topics for p in range(partitions)}


def wait_until_warm(bootstrap: str, wants: list[GroupWant], partitions: int,
                    meanwhile: Callable[[], object], timeout_s: float = TIMEOUT_S) -> str | None:
    """Wait for every group of ``wants`` to be ready (:func:`group_ready`), calling
    ``meanwhile`` on each poll (the generator replaces a client that died); None once they are,
    else the note that says which never was."""
    if not wants:
        return None
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})

    def ready() -> bool:
        meanwhile()
        return all(group_ready(admin, want, partitions) for want in wants)

    names = ", ".join(want.group for want in wants)
    try:
        wait_for(ready, timeout_s, f"consumer group(s) {names} Stable with every member "
                                   f"assigned", interval=0.2,
                 retry_on=(KafkaException, TimeoutError))
    except ClusterWaitTimeout as exc:
        return (f"the consumer group(s) never became Stable with every member assigned within "
                f"{timeout_s:.0f} s; the nemesis schedule started anyway: {exc}")
    return None
