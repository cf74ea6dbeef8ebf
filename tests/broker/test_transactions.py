"""The transaction coordinator of a running reference broker, over the wire.

Until the log side of transactions (the WriteTxnMarkers handler) is in, a transaction whose
EndTxn was answered stays PrepareCommit/PrepareAbort (its markers are retried); the tests accept
the completed state too, so they hold once the markers are written as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.cluster.peers import ReferenceBroker
from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode

from .conftest import create_topic

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
RETRIED = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}
WAIT_S = 20.0


@pytest.fixture
def client(broker) -> Iterator[RawClient]:
    host, port = broker.bootstrap.rsplit(":", 1)
    with RawClient(host, int(port)) as raw:
        yield raw


def init(client: RawClient, transactional_id: str, timeout_ms: int = 60_000,
         version: int = 4, retried: set[ErrorCode] = RETRIED) -> Any:
    """FindCoordinator (which creates __transaction_state on first use), then InitProducerId,
    each retried while the coordinator is made or loads (as a client does)."""
    wait_for(lambda: client.request(FIND_COORDINATOR, 3, {
        "key": transactional_id, "key_type": 1}).error_code == ErrorCode.none, WAIT_S,
        f"the coordinator of {transactional_id}")

    def answer() -> Any:
        response = client.request(INIT_PRODUCER_ID, version, {
            "transactional_id": transactional_id, "transaction_timeout": timeout_ms,
            "producer_id": -1, "producer_epoch": -1})
        return None if ErrorCode(response.error_code) in retried else response
    return wait_for(answer, WAIT_S, f"InitProducerId for {transactional_id}")


def add_partitions(client: RawClient, tid: str, pid: int, epoch: int, topic: str,
                   version: int = 3) -> ErrorCode:
    response = client.request(ADD_PARTITIONS, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    (result,) = [p for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
    return ErrorCode(result.partition_error_code)


def end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool,
        version: int = 3) -> ErrorCode:
    return ErrorCode(client.request(END_TXN, version, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
        "committed": commit}).error_code)


def describe(client: RawClient, tid: str) -> Any:
    (state,) = client.request(DESCRIBE_TRANSACTIONS, 0,
                              {"transactional_ids": [tid]}).transaction_states
    return state


def test_find_init_add_describe_end(broker, client):
    topic = create_topic(broker.bootstrap)
    found = client.request(FIND_COORDINATOR, 3, {"key": "txn-a", "key_type": 1})
    assert (ErrorCode(found.error_code), found.port) == (ErrorCode.none, broker.port)
    first = init(client, "txn-a")
    again = init(client, "txn-a")
    assert (again.producer_id, again.producer_epoch) == (first.producer_id,
                                                         first.producer_epoch + 1)
    pid, epoch = again.producer_id, again.producer_epoch
    assert end(client, "txn-a", pid, epoch, True) is ErrorCode.invalid_txn_state
    assert add_partitions(client, "txn-a", pid, epoch, topic) is ErrorCode.none
    assert ErrorCode(client.request(ADD_OFFSETS, 3, {
        "transactional_id": "txn-a", "producer_id": pid, "producer_epoch": epoch,
        "group_id": "g"}).error_code) is ErrorCode.none
    state = describe(client, "txn-a")
    assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
        "Ongoing", pid, epoch)
    assert {t.topic for t in state.topics} == {topic, "__consumer_offsets"}
    listed = client.request(LIST_TRANSACTIONS, 1, {
        "state_filters": ["Ongoing", "Nonsense"], "producer_id_filters": [pid],
        "duration_filter": -1})
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        ("txn-a", "Ongoing")]
    assert list(listed.unknown_state_filters) == ["Nonsense"]
    # A stale epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH to a client before KIP-588.
    assert add_partitions(client, "txn-a", pid, epoch - 1, topic) is ErrorCode.producer_fenced
    assert add_partitions(client, "txn-a", pid, epoch - 1, topic, version=1) is \
        ErrorCode.invalid_producer_epoch
    assert end(client, "txn-a", pid + 1, epoch, True) is ErrorCode.invalid_producer_id_mapping
    assert end(client, "txn-a", pid, epoch, True) is ErrorCode.none
    assert describe(client, "txn-a").transaction_state in {"PrepareCommit", "CompleteCommit"}
    assert end(client, "txn-a", pid, epoch, False) is ErrorCode.invalid_txn_state
    assert ErrorCode(describe(client, "never-seen").error_code) is \
        ErrorCode.transactional_id_not_found


def test_an_invalid_timeout_and_an_empty_id_are_refused(client):
    assert init(client, "txn-b", timeout_ms=900_001).error_code == \
        ErrorCode.invalid_transaction_timeout
    found = client.request(FIND_COORDINATOR, 3, {"key": "", "key_type": 1})
    assert ErrorCode(found.error_code) is ErrorCode.invalid_request


def test_state_survives_a_restart_and_a_timed_out_transaction_is_aborted(tmp_path):
    broker = ReferenceBroker(tmp_path / "b", properties={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
    broker.start()
    try:
        topic = create_topic(broker.bootstrap)
        with RawClient("127.0.0.1", broker.port) as client:
            first = init(client, "txn-c", timeout_ms=60_000)
            timed = init(client, "txn-d", timeout_ms=1_000)
            assert add_partitions(client, "txn-d", timed.producer_id, timed.producer_epoch,
                                  topic) is ErrorCode.none
            wait_for(lambda: describe(client, "txn-d").transaction_state
                     in {"PrepareAbort", "CompleteAbort"}, WAIT_S, "txn-d aborted at its timeout")
            state = describe(client, "txn-d")
            assert state.producer_epoch == timed.producer_epoch + 1  # the producer is fenced
            assert end(client, "txn-d", timed.producer_id, timed.producer_epoch, True) is \
                ErrorCode.producer_fenced
        assert broker.stop() == 0
        broker.start()
        with RawClient("127.0.0.1", broker.port) as client:
            after = init(client, "txn-c")
            assert (after.producer_id, after.producer_epoch) == (first.producer_id,
                                                                 first.producer_epoch + 1)
            reloaded = wait_for(
                lambda: (s := describe(client, "txn-d")).error_code == ErrorCode.none and s,
                WAIT_S, "txn-d loaded")
            assert reloaded.transaction_state in {"PrepareAbort", "CompleteAbort"}
            assert reloaded.producer_epoch == timed.producer_epoch + 1
    finally:
        broker.stop()
