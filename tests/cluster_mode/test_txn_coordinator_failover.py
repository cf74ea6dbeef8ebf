"""Transaction coordinator failover: transaction state lives in the replicated
``__transaction_state``.

Kafka's contract: a transactional id's coordinator is the leader of ``__transaction_state``
partition ``abs(transactionalId.hashCode) % transaction.state.log.num.partitions``; every state
change is written there with acks=-1 before it is answered, so when the coordinator crashes the
new leader of the partition loads the id — its producer id, epoch and open transaction — and
answers for it (COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR are retried meanwhile). A new
InitProducerId then fences the old epoch and aborts the transaction it left open.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from harness.cluster.local import LocalCluster
from harness.raw_client import RawClient
from harness.wire.errors import ErrorCode
from reference_broker.coordinator.common import partition_for

MakeCluster = Callable[..., LocalCluster]

TXN_TOPIC = "__transaction_state"
TXN_PARTITIONS = 5
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, CREATE_TOPICS = 10, 22, 24, 19
DESCRIBE_TRANSACTIONS = 65
RETRIED = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
           ErrorCode.not_coordinator}
WAIT_S = 30.0


def _ask(local: LocalCluster, broker_id: int, api_key: int, version: int,
         body: dict[str, Any]) -> Any:
    node = local.broker(broker_id)
    assert node.port is not None
    with RawClient(node.host, node.port) as client:
        return client.request(api_key, version, body)


def _coordinator(local: LocalCluster, transactional_id: str) -> int:
    """FindCoordinator key type 1 asked of a running broker, until it names one."""
    def found() -> int:
        broker = local.running_broker_ids()[0]
        answer = _ask(local, broker, FIND_COORDINATOR, 3,
                      {"key": transactional_id, "key_type": 1})
        # 0 is no broker of this cluster (its ids start at 1): wait_for keeps asking.
        return int(answer.node_id) if answer.error_code == ErrorCode.none else 0
    return local.wait_for(found, WAIT_S, f"a coordinator for {transactional_id}")


def _describe(local: LocalCluster, transactional_id: str) -> Any:
    """DescribeTransactions from the id's coordinator, once it answers for the id."""
    def described() -> Any:
        coordinator = _coordinator(local, transactional_id)
        (state,) = _ask(local, coordinator, DESCRIBE_TRANSACTIONS, 0,
                        {"transactional_ids": [transactional_id]}).transaction_states
        return None if ErrorCode(state.error_code) in RETRIED else state
    return local.wait_for(described, WAIT_S, f"{transactional_id} described")


def _init(local: LocalCluster, transactional_id: str, retried: set[ErrorCode]) -> Any:
    def answered() -> Any:
        answer = _ask(local, _coordinator(local, transactional_id), INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1})
        return None if ErrorCode(answer.error_code) in retried else answer
    return local.wait_for(answered, WAIT_S, f"InitProducerId for {transactional_id}")


def _add_partition(local: LocalCluster, transactional_id: str, producer_id: int, epoch: int,
                   topic: str) -> ErrorCode:
    answer = _ask(local, _coordinator(local, transactional_id), ADD_PARTITIONS, 3, {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    (result,) = [p for t in answer.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
    return ErrorCode(result.partition_error_code)


def test_an_open_transaction_survives_its_coordinators_crash_and_is_then_fenced(
        cluster: MakeCluster) -> None:
    local = cluster(brokers=3, zookeeper_session_timeout_ms=4000, properties={
        "transaction.state.log.num.partitions": TXN_PARTITIONS,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2})
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    created = _ask(local, 1, CREATE_TOPICS, 5, {"topics": [{
        "name": topic, "num_partitions": 1, "replication_factor": 3, "assignments": [],
        "configs": []}], "timeout": 20_000, "validate_only": False})
    assert ErrorCode(created.topics[0].error_code) is ErrorCode.none, created
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    partition = partition_for(transactional_id, TXN_PARTITIONS)
    first = _init(local, transactional_id, RETRIED)
    assert ErrorCode(first.error_code) is ErrorCode.none, first
    pid, epoch = first.producer_id, first.producer_epoch
    assert _add_partition(local, transactional_id, pid, epoch, topic) is ErrorCode.none

    coordinator = local.leader(TXN_TOPIC, partition)
    assert coordinator == _coordinator(local, transactional_id)
    state = local.partition_state(TXN_TOPIC, partition)
    assert state is not None and sorted(state["isr"]) == [1, 2, 3], state
    local.kill(coordinator)
    local.wait_for(lambda: (leader := local.leader(TXN_TOPIC, partition)) != coordinator
                   and leader, WAIT_S, f"a new leader of {TXN_TOPIC}-{partition}")

    # The new coordinator loaded the open transaction as it was acknowledged.
    loaded = _describe(local, transactional_id)
    assert (loaded.transaction_state, loaded.producer_id, loaded.producer_epoch) == (
        "Ongoing", pid, epoch)
    assert [(t.topic, list(t.partitions)) for t in loaded.topics] == [(topic, [0])]

    # A new incarnation fences the old epoch and aborts what it left open.
    fencing = _init(local, transactional_id, RETRIED)
    assert ErrorCode(fencing.error_code) is ErrorCode.concurrent_transactions, fencing
    assert _add_partition(local, transactional_id, pid, epoch, topic) is \
        ErrorCode.producer_fenced
    # Fencing passes through PrepareEpochFence (its own state, as in Kafka) on its way to the
    # abort: the describe waits for the abort rather than catching the fence half-written.
    aborted = local.wait_for(
        lambda: (d := _describe(local, transactional_id)).transaction_state in {
            "PrepareAbort", "CompleteAbort"} and d, WAIT_S, "the fenced transaction's abort")
    assert (aborted.producer_id, aborted.producer_epoch) == (pid, epoch + 1)
