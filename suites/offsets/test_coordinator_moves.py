"""Where offsets live when the coordinator is elsewhere, moves, crashes or restarts.

A group's coordinator is the leader of its ``__consumer_offsets`` partition; an OffsetCommit is
acknowledged once that record is replicated. So another broker must send clients on with
NOT_COORDINATOR, and acknowledged offsets must be served by whichever broker coordinates the
group next — after a crash (failover to a follower) or a restart (replay from its own log).
Between, a client sees only retriable coordinator errors (COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) and recovers by finding the coordinator again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from harness.cluster.targets import Target
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode, error_name

from ..groups._helpers import (
    API_VERSIONS,
    HEARTBEAT,
    JOIN_GROUP,
    OFFSET_COMMIT,
    RETRIABLE_COORDINATOR_ERRORS,
    WAIT_S,
    Coordinator,
    RawFactory,
    V,
    err,
    fetch_offsets,
    find_coordinator,
    heartbeat,
    join_body,
    wait_coordinator_ready,
)
from ..support import unique_name
from ._helpers import (
    broker_addresses,
    commit,
    committed,
    offsets_client,
    wait_topic_known,
)

COMMITTED = {0: (4, "before"), 1: (9, "before")}
# What the load test commits before the restart: enough that replaying it takes a while.
LOAD_PARTITIONS, LOAD_COMMITS, LOAD_METADATA = 50, 60, "m" * 1000


@pytest.mark.requires_multi_broker
def test_a_broker_that_is_not_the_coordinator_answers_not_coordinator(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """Group requests (OffsetCommit, OffsetFetch, JoinGroup, Heartbeat) sent to a broker that
    is not the group's coordinator answer NOT_COORDINATOR, and the coordinator FindCoordinator
    names serves them [protocol guide, FindCoordinator and error NOT_COORDINATOR]."""
    topic = make_topic(partitions=1, exact=False)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT, JOIN_GROUP, HEARTBEAT)
    coordinator = find_coordinator(client, group)
    others = [address for node, address in broker_addresses(client).items()
              if node != coordinator.node_id]
    assert others, "Metadata lists no broker but the coordinator"
    for address in others:
        elsewhere = kafka_raw_client(address)
        wait_topic_known(elsewhere, topic)
        assert commit(elsewhere, group, topic, {0: 1}) == [ErrorCode.not_coordinator]
        assert err(fetch_offsets(elsewhere, group, topic, [0])) == ErrorCode.not_coordinator
        joined = elsewhere.request(JOIN_GROUP, V[JOIN_GROUP], join_body(group))
        assert err(joined) == ErrorCode.not_coordinator
        assert heartbeat(elsewhere, group, "member", 1) == ErrorCode.not_coordinator
    assert commit(client, group, topic, {0: 1}) == [ErrorCode.none]
    assert committed(client, group, topic, [0])[0][0] == 1


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
def test_commits_survive_a_coordinator_crash_and_clients_recover(
        kafka_target: Target, kafka_raw_client: RawFactory, kafka_consumer: Callable[..., Any],
        make_topic: Callable[..., str], request: pytest.FixtureRequest) -> None:
    """After the coordinator is killed, another broker becomes the group's coordinator and
    serves exactly the acknowledged offsets and metadata; until then a client meets only
    retriable coordinator errors, and a real consumer that had been talking to the dead
    coordinator finds the new one and fetches and commits again [Kafka group coordinator
    failover: offsets replicated in __consumer_offsets; protocol guide, error codes].

    Served at once on Apache Kafka 3.9, which loads a partition up to its log end. Kafka 4's
    group coordinator (KIP-848's runtime) serves reads as of the partition's high watermark,
    which a new leader learns from its followers a moment after it takes over: measured on
    4.4 in KRaft mode, its first answers lacked the newest acknowledged commit (the partition
    read as never committed) for up to 3 s. So the rule held here is the one both keep: no
    answer names an offset that was not committed, and every acknowledged one is served soon."""
    topic = make_topic(partitions=2)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT)
    for partition, (offset, metadata) in COMMITTED.items():
        assert commit(client, group, topic, {partition: offset}, metadata=metadata) \
            == [ErrorCode.none]
    member = kafka_consumer(**{"group.id": group, "enable.auto.commit": False})
    before = member.committed([TopicPartition(topic, p) for p in COMMITTED], timeout=30)
    assert [(tp.partition, tp.offset) for tp in before] \
        == [(p, o) for p, (o, _) in COMMITTED.items()]

    old = find_coordinator(client, group)
    survivor = next(address for node, address in broker_addresses(client).items()
                    if node != old.node_id)
    kafka_target.require_nodes().kill(old.node_id)
    probe = kafka_raw_client(survivor)
    new = _wait_for_new_coordinator(probe, group, old.node_id)
    moved = kafka_raw_client(new.address)
    seen = wait_coordinator_ready(moved, group)
    stale = _until_served(moved, group, topic)
    assert all(offset in (-1, COMMITTED[p][0]) for answer in stale
               for p, (offset, _) in answer.items()), \
        f"the new coordinator named offsets never committed: {stale}; retriable first: {seen}"

    recovered = member.committed([TopicPartition(topic, p) for p in COMMITTED], timeout=30)
    assert [(tp.partition, tp.offset) for tp in recovered] \
        == [(p, o) for p, (o, _) in COMMITTED.items()]
    member.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    assert committed(moved, group, topic, [0])[0][0] == 6


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_lone_broker
def test_commits_survive_a_restart_of_the_coordinator(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """A coordinator that restarts as the group's only replica replays the acknowledged
    offsets and metadata from its own log and serves them again (a restarted broker first
    answers only retriable coordinator errors) [Kafka GroupMetadataManager loading of
    __consumer_offsets; protocol guide, COORDINATOR_LOAD_IN_PROGRESS].

    The other brokers are stopped first, so the restarted broker must lead the offsets
    partition again (it is the last of its ISR) and nothing can be fetched from a follower."""
    topic = make_topic(partitions=2)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT)
    for partition, (offset, metadata) in COMMITTED.items():
        assert commit(client, group, topic, {partition: offset}, metadata=metadata) \
            == [ErrorCode.none]
    coordinator = find_coordinator(client, group)
    address = broker_addresses(client)[coordinator.node_id]
    client.close()
    _restart_alone(kafka_target, coordinator.node_id)

    restarted = kafka_raw_client(address)
    assert find_coordinator(restarted, group).node_id == coordinator.node_id
    seen = wait_coordinator_ready(restarted, group)
    assert _committed(restarted, group, topic) == COMMITTED, f"retriable errors first: {seen}"


@pytest.mark.requires_process_faults
@pytest.mark.requires_multi_broker
@pytest.mark.requires_lone_broker
def test_a_restarted_coordinator_answers_load_in_progress_until_it_has_replayed(
        kafka_target: Target, kafka_raw_client: RawFactory, make_topic: Callable[..., str],
        request: pytest.FixtureRequest) -> None:
    """While a coordinator replays its offsets partition it answers the group's requests with
    COORDINATOR_LOAD_IN_PROGRESS — not NONE with offsets still missing — and then serves every
    acknowledged offset [Kafka GroupMetadataManager: a partition is "loading" until replayed;
    protocol guide, COORDINATOR_LOAD_IN_PROGRESS].

    Forced for real: the group commits a few thousand offsets, every broker stops, and the
    coordinator starts alone, so it must replay its own log before it can answer; the test asks
    as fast as it can from the moment the broker is back. Apache Kafka 3.9 answers
    NOT_COORDINATOR until it leads the partition again, then COORDINATOR_LOAD_IN_PROGRESS for
    tens of requests (it replays the fifty offsets partitions one after another)."""
    _wait_settled(kafka_target)
    topic = make_topic(partitions=LOAD_PARTITIONS)
    group = unique_name(request, "g-")
    client = offsets_client(kafka_raw_client, group, [topic], OFFSET_COMMIT)
    for offset in range(LOAD_COMMITS):
        client = _commit_at_coordinator(kafka_raw_client, client, group, topic,
                                        {p: offset for p in range(LOAD_PARTITIONS)})
    coordinator = find_coordinator(client, group)
    address = broker_addresses(client)[coordinator.node_id]
    client.close()
    _stop_all(kafka_target, coordinator.node_id)
    with ThreadPoolExecutor(1) as pool:
        restarting = pool.submit(kafka_target.require_nodes().start_broker, coordinator.node_id)
        restarted = _first_connection(kafka_raw_client, address, restarting,
                                      kafka_target.require_nodes().spec.startup_timeout)
        seen = wait_coordinator_ready(restarted, group, interval=0)
        restarting.result()
    assert ErrorCode.coordinator_load_in_progress in seen, \
        f"the restarted coordinator never said it was loading; it answered {_runs(seen)}"
    fetched = committed(restarted, group, topic, list(range(LOAD_PARTITIONS)))
    last = LOAD_COMMITS - 1
    assert fetched == {p: (last, LOAD_METADATA, ErrorCode.none) for p in range(LOAD_PARTITIONS)}


def _until_served(client: RawClient, group: str, topic: str
                  ) -> list[dict[int, tuple[int, str | None]]]:
    """OffsetFetch until it answers exactly :data:`COMMITTED`; the answers before that."""
    answers: list[dict[int, tuple[int, str | None]]] = []

    def served() -> bool:
        answer = _committed(client, group, topic)
        if answer == COMMITTED:
            return True
        answers.append(answer)
        return False

    wait_for(served, WAIT_S, f"{group}'s acknowledged offsets to be served", retry_on=())
    return answers


def _wait_settled(cluster: Target) -> None:
    """Until every offsets partition has all its replicas in sync again. A test before may have
    stopped every broker and started them one by one: until the followers have caught up,
    controllers move leaderships (measured on Kafka 3.9: three elections within seconds of the
    restarts), the group's coordinator with them, and this test's commits would meet
    NOT_COORDINATOR or its coordinator would not be the last of the ISR it must be. (No offsets
    partition yet, on a new cluster, is settled too: they are made with every replica.)"""
    nodes = cluster.require_nodes()
    replicas = min(3, nodes.spec.brokers)  # offsets.topic.replication.factor, as the spec sets

    def settled() -> bool:
        states = nodes.reads.partition_states(internal=True)
        offsets = [s for name, s in states.items() if name.startswith("__consumer_offsets/")]
        return all(len(s["isr"]) == replicas and s["leader"] >= 0 for s in offsets)

    wait_for(settled, WAIT_S, "every __consumer_offsets partition with all replicas in sync")


def _commit_at_coordinator(raw_client: RawFactory, client: RawClient, group: str, topic: str,
                           offsets: dict[int, int]) -> RawClient:
    """Commit ``offsets`` with the group's coordinator, finding it again when it has moved, as
    a client does; the client on the coordinator that took them. It may move in a healthy
    cluster: after brokers restart, a controller moves leaderships back to their preferred
    replicas (Kafka 3.9 checks 5 s after it is elected), the offsets partitions' with them."""
    def taken() -> bool:
        nonlocal client
        errors = set(commit(client, group, topic, offsets, metadata=LOAD_METADATA))
        if errors == {ErrorCode.none}:
            return True
        assert errors <= RETRIABLE_COORDINATOR_ERRORS, f"OffsetCommit answered {errors}"
        client = offsets_client(raw_client, group, [topic], OFFSET_COMMIT)
        return False

    wait_for(taken, WAIT_S, f"the coordinator of {group} to take a commit", retry_on=())
    return client


def _restart_alone(cluster: Target, broker_id: int) -> None:
    """Stop every broker, then start `broker_id` alone: the last of every ISR it was in, it
    leads its partitions again and must replay their logs (no follower can serve them)."""
    _stop_all(cluster, broker_id)
    cluster.require_nodes().start_broker(broker_id)


def _stop_all(cluster: Target, last: int) -> None:
    """Stop every broker, `last` last (so it is the last of every ISR it is in)."""
    nodes = cluster.require_nodes()
    for other in nodes.running_broker_ids():
        if other != last:
            nodes.stop_broker(other)
    nodes.stop_broker(last)


def _first_connection(raw_client: RawFactory, address: str, restarting: Future[None],
                      startup_timeout: float) -> RawClient:
    """A connection the restarting broker answers on, as soon as there is one (the restart
    itself waits for ZooKeeper registration, by when a fast replay could be over). A proxy in
    front of the broker accepts at once and closes when the broker is not there yet; so a
    connection counts once the broker has answered ApiVersions on it."""
    def connect() -> RawClient | None:
        if restarting.done():
            restarting.result()  # a failed restart fails here, with its own error
        try:
            client = raw_client(address, timeout=5)
        except ConnectionRefusedError:
            return None
        try:
            client.request(API_VERSIONS, 0, {})
        except (ConnectionError, TimeoutError):
            client.close()
            return None
        return client

    # As long as the cluster itself gives a broker to start (a JVM, then its logs' recovery):
    # on a loaded machine (a Spark benchmark beside the suites) 30 s were not enough.
    return wait_for(connect, startup_timeout, f"the broker at {address} to answer",
                    interval=0.005, retry_on=())


def _runs(answers: list[ErrorCode]) -> str:
    """``[A, A, B]`` → ``"A ×2, B"`` in Kafka's spelling: a long list of answers, readable in a
    message."""
    out: list[str] = []
    for code, group in itertools.groupby(answers):
        count = len(list(group))
        name = error_name(code)
        out.append(name if count == 1 else f"{name} ×{count}")
    return ", ".join(out) or "nothing but NONE"


def _committed(client: RawClient, group: str, topic: str) -> dict[int, tuple[int, str | None]]:
    fetched = committed(client, group, topic, sorted(COMMITTED))
    assert {error for _, _, error in fetched.values()} == {ErrorCode.none}, fetched
    return {p: (offset, metadata) for p, (offset, metadata, _) in fetched.items()}


def _wait_for_new_coordinator(client: RawClient, group: str, dead: int) -> Coordinator:
    def moved() -> Coordinator | None:
        found = find_coordinator(client, group)
        return found if found.node_id != dead else None

    return wait_for(moved, WAIT_S, f"a coordinator for {group} other than broker {dead}",
                    retry_on=())
