"""Leave a shared broker as the session found it: delete the topics and groups it made.

A cluster the harness starts is thrown away with its data, but a broker the user points the
suites at (``--kafka-bootstrap-server``) is theirs, perhaps shared. Every name the suites make
starts with the session's prefix (:attr:`KafkaOptions.name_prefix`), so cleaning up is exact:
topics and consumer groups with that prefix, nothing else.

A group is only deletable once empty; a member a test left behind (a raw-protocol JoinGroup, a
killed client) is removed by the broker after its session timeout, so non-empty groups are
retried for a while. What still cannot be deleted is reported, never hidden.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from harness.waiting import ClusterWaitTimeout, wait_for

GROUP_RETRY_S = 45.0  # above the 10-30 s session timeouts the suites' members use
TOPIC_GONE_S = 30.0


@dataclass
class Cleanup:
    """What a cleanup deleted and what it could not (with the broker's reason)."""

    topics: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    left: dict[str, str] = field(default_factory=dict)

    def summary(self, prefix: str) -> str:
        said = (f"kafka-harness cleanup of {prefix!r}: deleted {len(self.topics)} topic(s), "
                f"{len(self.groups)} group(s)")
        if self.left:
            said += "; could not delete " + ", ".join(
                f"{name} ({why})" for name, why in sorted(self.left.items()))
        return said


def _prefixed_topics(admin: AdminClient, prefix: str) -> list[str]:
    return sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix))


def _prefixed_groups(admin: AdminClient, prefix: str) -> list[str]:
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    return sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))


def _delete_topics(admin: AdminClient, topics: list[str], done: Cleanup,
                   gone_s: float = TOPIC_GONE_S) -> None:
    """Delete the topics, then wait (bounded) until metadata no longer lists them: a deletion
    may be answered before it is carried out (the reference broker in ZooKeeper mode answers
    once its request znode exists, and a Kafka whose DeleteTopics timed out goes on deleting),
    and the session ends only once it has left the broker as it found it."""
    if not topics:
        return
    for topic, future in admin.delete_topics(topics, operation_timeout=30).items():
        try:
            future.result(60)
            done.topics.append(topic)
        except KafkaException as exc:
            done.left[topic] = exc.args[0].str()
    listed = set(done.topics)  # until a metadata answer says otherwise

    def gone() -> bool:
        still = set(done.topics) & set(admin.list_topics(timeout=10).topics)
        listed.clear()  # only once metadata has answered: a failed ask leaves it as it was
        listed.update(still)
        return not listed

    with contextlib.suppress(ClusterWaitTimeout):
        wait_for(gone, gone_s, "the deleted topics to leave the metadata", interval=0.5)
    for topic in sorted(listed):
        done.topics.remove(topic)
        done.left[topic] = f"deleted, but still listed after {gone_s:.0f} s"


def _delete_groups(admin: AdminClient, groups: list[str], done: Cleanup,
                   retry_s: float) -> None:
    pending = list(groups)

    def attempt() -> bool:
        failed: dict[str, str] = {}
        for group, future in admin.delete_consumer_groups(pending, request_timeout=10).items():
            try:
                future.result(15)
                done.groups.append(group)
            except KafkaException as exc:
                failed[group] = exc.args[0].str()
        pending[:] = list(failed)
        done.left.update(failed)
        for group in done.groups:
            done.left.pop(group, None)
        return not pending

    if pending:
        # What is still left after retry_s stays in done.left, with the broker's reason.
        with contextlib.suppress(ClusterWaitTimeout):
            wait_for(attempt, retry_s, "the session's groups to be deletable (empty)",
                     interval=2.0)


def clean(bootstrap: str, prefix: str, *, group_retry_s: float = GROUP_RETRY_S) -> Cleanup:
    """Delete every topic and consumer group whose name starts with ``prefix``."""
    if not prefix:
        raise ValueError("an empty prefix would delete everything on the broker")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    done = Cleanup()
    _delete_groups(admin, _prefixed_groups(admin, prefix), done, group_retry_s)
    _delete_topics(admin, _prefixed_topics(admin, prefix), done)
    return done
