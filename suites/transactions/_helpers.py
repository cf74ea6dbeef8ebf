"""A transactional producer played one raw request at a time, for the transactions suite.

Real transactional clients hide what the coordinator answered: they retry
CONCURRENT_TRANSACTIONS, bump epochs, add partitions on their own and translate fencing into
exceptions. The suite checks the rules of KIP-98 (and KIP-447, KIP-890) against the exact
answers, so :class:`TxnProducer` sends each request itself — InitProducerId, AddPartitionsToTxn,
a transactional Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn — and hands back the error
code, leaving every decision to the test.

Routing is what a client does: transaction requests go to the transactional id's coordinator
(FindCoordinator key type 1, the leader of its ``__transaction_state`` partition), Produce and
Fetch to the partition leader, TxnOffsetCommit and OffsetFetch to the group's coordinator.

Versions are the highest both sides speak (what a current client sends), but AddPartitionsToTxn
stays at v3: from v4 on it is the brokers' own batched request (KIP-890), which clients do not
send. EndTxn v5 answers a new epoch when the coordinator bumps it at the end of every
transaction (KIP-890's transaction version 2); the producer takes it, as Kafka's client does.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import pytest

from harness.raw_client import RawClient
from harness.waiting import wait_for
from harness.wire.errors import ErrorCode
from harness.wire.records import build_batch, decode_records

from ..groups._helpers import RETRIABLE_COORDINATOR_ERRORS, RawFactory, coordinator_client
from ..protocol._records import batch_headers
from ..protocol._wire import TRANSACTION_KEY, Wire

PRODUCE, API_VERSIONS = 0, 18
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 28, 9, 10
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, DESCRIBE_PRODUCERS = 65, 66, 61

CLIENT_ADD_PARTITIONS_VERSION = 3  # v4+ is broker-to-broker (KIP-890)
VERIFYING_ADD_PARTITIONS = 4       # the brokers' batched request, with verify_only
IMPLICIT_ADD_PRODUCE = 12          # a Produce that adds its partition itself (KIP-890 part 2)
FEATURES_API_VERSIONS = 3          # ApiVersions v3 lists the finalized features (KIP-584)
BATCHED_FIND_COORDINATOR = 4      # from v4 on, FindCoordinator takes and answers a list (KIP-699)
OFFSET_FETCH_STABLE_VERSION = 7    # the first with require_stable (KIP-447); one group per request
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1                        # ListOffsets timestamp: the end (the LSO when read_committed)
NO_PRODUCER = -1
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type

TXN_TIMEOUT_MS = 60_000
WAIT_S = 30.0
# What a client retries before its producer id is usable: the coordinator still loads its
# __transaction_state partition, or moves, or the previous transaction still completes.
RETRIABLE_INIT = frozenset({ErrorCode.coordinator_load_in_progress,
                            ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
                            ErrorCode.concurrent_transactions})
# The two answers to a stale epoch: INVALID_PRODUCER_EPOCH before KIP-588, PRODUCER_FENCED
# (code 90) from the versions that know it (InitProducerId v4, AddPartitionsToTxn v2, EndTxn
# v2, AddOffsetsToTxn v2, TxnOffsetCommit v3), and INVALID_PRODUCER_EPOCH on Produce.
FENCED = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})


class ControlType(IntEnum):
    """The key of a control record (a transaction marker): version, then this type."""

    ABORT, COMMIT = 0, 1


def code(part: Any) -> ErrorCode:
    """A response's (or a response part's) error code as the enum."""
    return ErrorCode(int(part.error_code))


@dataclass
class TxnProducer:
    """One transactional id's producer id and epoch, and its next sequence per partition."""

    txn: Transactions
    transactional_id: str
    producer_id: int
    epoch: int
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def wire(self) -> Wire:
        return self.txn.wire

    @property
    def coordinator(self) -> RawClient:
        return self.txn.coordinator(self.transactional_id)

    def _txn_request(self, api_key: int, body: dict[str, Any], *,
                     version: int | None = None) -> Any:
        return self.coordinator.request(api_key, version or self.wire.version(api_key), {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch, **body})

    def add_partitions(self, topic: str, *partitions: int,
                       epoch: int | None = None) -> dict[int, ErrorCode]:
        """AddPartitionsToTxn v3 (at most): each partition's error code."""
        version = min(self.wire.version(ADD_PARTITIONS_TO_TXN), CLIENT_ADD_PARTITIONS_VERSION)
        response = self.coordinator.request(ADD_PARTITIONS_TO_TXN, version, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.epoch if epoch is None else epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": list(partitions or (0,))}]})
        return {p.partition_index: ErrorCode(int(p.partition_error_code))
                for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}

    def verify_partitions(self, topic: str, *partitions: int) -> dict[int, ErrorCode]:
        """AddPartitionsToTxn v4 (the brokers' request) with ``verify_only``: whether each
        partition is in the transaction, as a leader asks before a transactional append."""
        response = self.coordinator.request(ADD_PARTITIONS_TO_TXN, VERIFYING_ADD_PARTITIONS, {
            "transactions": [{
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "verify_only": True,
                "topics": [{"name": topic, "partitions": list(partitions)}]}]})
        assert code(response) == ErrorCode.none, f"AddPartitionsToTxn v4: {response}"
        return {p.partition_index: ErrorCode(int(p.partition_error_code))
                for r in response.results_by_transaction for t in r.topic_results
                for p in t.results_by_partition}

    def batch(self, topic: str, values: Iterable[bytes], partition: int = 0,
              epoch: int | None = None) -> bytes:
        """A transactional batch at this partition's next sequence."""
        return build_batch([(None, v) for v in values], producer_id=self.producer_id,
                           producer_epoch=self.epoch if epoch is None else epoch,
                           base_sequence=self.sequences.get((topic, partition), 0),
                           transactional=True)

    def send(self, topic: str, values: Iterable[bytes], partition: int = 0, *,
             epoch: int | None = None, version: int | None = None) -> Any:
        """A transactional Produce (acks all) to the leader, at `version` or the highest;
        the partition's response. The sequence moves on only when the batch was appended."""
        values = list(values)
        highest, body = self.wire.produce_request(
            topic, self.batch(topic, values, partition, epoch), partition=partition)
        version = highest if version is None else version
        body["transactional_id"] = self.transactional_id
        response = self.wire.leader(topic, partition).request(PRODUCE, version, body)
        answer = response.responses[0].partition_responses[0]
        if code(answer) == ErrorCode.none:
            key = (topic, partition)
            self.sequences[key] = self.sequences.get(key, 0) + len(values)
        return answer

    def add_offsets(self, group: str, *, epoch: int | None = None) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        return code(self._txn_request(ADD_OFFSETS_TO_TXN, {
            "group_id": group, **({} if epoch is None else {"producer_epoch": epoch})}))

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int], *,
                       epoch: int | None = None, at: RawClient | None = None
                       ) -> dict[int, ErrorCode]:
        """TxnOffsetCommit to the group's coordinator (or the broker `at`), as a consumer
        outside the group (no generation, no member id); each partition's error code."""
        client = self.txn.group_coordinator(group) if at is None else at
        response = client.request(
            TXN_OFFSET_COMMIT, self.wire.version(TXN_OFFSET_COMMIT), {
                "transactional_id": self.transactional_id, "group_id": group,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p, o in offsets.items()]}]})
        return {p.partition_index: code(p) for t in response.topics for p in t.partitions}

    def end(self, commit: bool, *, epoch: int | None = None) -> ErrorCode:
        """EndTxn; a new epoch the coordinator answers (EndTxn v5, KIP-890) is taken, and the
        sequences start again under it."""
        response = self._txn_request(END_TXN, {
            "committed": commit, **({} if epoch is None else {"producer_epoch": epoch})})
        error = code(response)
        new_epoch = getattr(response, "producer_epoch", -1)
        if error == ErrorCode.none and new_epoch >= 0 and new_epoch != self.epoch:
            self.epoch, self.sequences = new_epoch, {}
        return error

    def commit(self) -> None:
        assert (error := self.end(True)) == ErrorCode.none, f"EndTxn(commit): {error!r}"

    def abort(self) -> None:
        assert (error := self.end(False)) == ErrorCode.none, f"EndTxn(abort): {error!r}"

    def begin(self, topic: str, *partitions: int) -> None:
        """Add the partitions to the transaction, asserting each is added. As a client does,
        CONCURRENT_TRANSACTIONS is retried (bounded): the previous transaction's markers may
        be written — its LSO moved — before the coordinator has recorded it complete (Kafka
        4.4 answered it so)."""
        def add() -> dict[int, ErrorCode] | None:
            added = self.add_partitions(topic, *partitions)
            return None if ErrorCode.concurrent_transactions in added.values() else added

        added = wait_for(add, WAIT_S, f"{self.transactional_id}'s previous transaction to "
                         "complete", retry_on=())
        assert set(added.values()) == {ErrorCode.none}, f"AddPartitionsToTxn: {added}"


class Transactions:
    """The suite's entry: transactional producers, the coordinator's view, LSO waits."""

    def __init__(self, wire: Wire, raw_client: RawFactory) -> None:
        self.wire = wire
        self._raw_client = raw_client
        self._groups: dict[str, RawClient] = {}
        self._coordinators: dict[str, RawClient] = {}

    def require_transaction_apis(self) -> None:
        """Skip the test unless the target advertises what every transaction needs:
        InitProducerId, AddPartitionsToTxn and EndTxn (``Wire.version`` names the missing
        one)."""
        for api_key in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN):
            self.wire.version(api_key)

    def find_coordinator(self, transactional_id: str) -> Any:
        """FindCoordinator key type 1 (the transaction coordinator), waiting (bounded) while
        it is not available — Kafka creates ``__transaction_state`` on the first lookup — and
        asserting any other answer is NONE; the coordinator found (node id, host, port)."""
        version = self.wire.version(FIND_COORDINATOR)

        def ask() -> Any:
            response = self.wire.bootstrap.request(FIND_COORDINATOR, version, {
                "key": transactional_id, "key_type": TRANSACTION_KEY,
                "coordinator_keys": [transactional_id]})
            found = response.coordinators[0] if version >= BATCHED_FIND_COORDINATOR else response
            if code(found) in RETRIABLE_COORDINATOR_ERRORS:
                return None
            assert code(found) == ErrorCode.none, f"FindCoordinator({transactional_id}): {found}"
            return found

        return wait_for(ask, WAIT_S, f"the coordinator of {transactional_id}", retry_on=())

    def id_coordinated_elsewhere(self, new_name: Callable[[], str], broker: int) -> str:
        """A new transactional id (from `new_name`) whose coordinator is not `broker`: ids hash
        over ``__transaction_state``'s partitions, whose leaders are spread over the brokers."""
        def pick() -> str | None:
            name = new_name()
            return name if self.find_coordinator(name).node_id != broker else None

        return wait_for(pick, WAIT_S, f"a transactional id not coordinated by broker {broker}",
                        retry_on=())

    def coordinator(self, transactional_id: str) -> RawClient:
        """The test's connection to the transactional id's coordinator."""
        if transactional_id not in self._coordinators:
            found = self.find_coordinator(transactional_id)
            self._coordinators[transactional_id] = self._raw_client(f"{found.host}:{found.port}")
        return self._coordinators[transactional_id]

    def group_coordinator(self, group: str) -> RawClient:
        """A connection to the group's coordinator once it serves the group (a KRaft cluster's
        answers NOT_COORDINATOR while it loads a fresh ``__consumer_offsets`` partition)."""
        if group not in self._groups:
            self._groups[group] = coordinator_client(self._raw_client, group)
        return self._groups[group]

    def init_producer_id(self, transactional_id: str, *, timeout_ms: int = TXN_TIMEOUT_MS,
                         producer_id: int = NO_PRODUCER, epoch: int = -1,
                         retry: frozenset[ErrorCode] = RETRIABLE_INIT) -> Any:
        """InitProducerId for a transactional id at its coordinator, retrying (bounded) what
        a client retries; the answer."""
        def ask() -> Any:
            response = self.coordinator(transactional_id).request(
                INIT_PRODUCER_ID, self.wire.version(INIT_PRODUCER_ID), {
                    "transactional_id": transactional_id, "transaction_timeout": timeout_ms,
                    "producer_id": producer_id, "producer_epoch": epoch})
            return None if code(response) in retry else response

        return wait_for(ask, WAIT_S, f"InitProducerId({transactional_id}) to be answered",
                        retry_on=())

    def producer(self, transactional_id: str, *,
                 timeout_ms: int = TXN_TIMEOUT_MS) -> TxnProducer:
        response = self.init_producer_id(transactional_id, timeout_ms=timeout_ms)
        assert code(response) == ErrorCode.none, f"InitProducerId: {response}"
        return TxnProducer(self, transactional_id, response.producer_id,
                           response.producer_epoch)

    def idempotent_send(self, topic: str, values: Iterable[bytes], partition: int = 0) -> Any:
        """Records of an idempotent producer outside any transaction; the partition's answer."""
        pid, epoch = self.wire.init_producer_id()
        batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0)
        return self.wire.produce(topic, batch, partition=partition)

    def wait_leaders_serve(self, topic: str) -> None:
        """Wait (bounded) until each partition's leader answers ListOffsets for it: Kafka 4.4
        answered a Produce NOT_LEADER_OR_FOLLOWER just after every broker's Metadata named
        that very leader (a one-node KRaft cluster), before the node had become it."""
        (described,) = self.wire.metadata(topic).topics
        partitions = [p.partition_index for p in described.partitions]
        wait_for(lambda: all(code(self.wire.list_offset(topic, LATEST, p)) == ErrorCode.none
                             for p in partitions),
                 WAIT_S, f"the leaders of {topic}'s partitions to serve them")

    def stable_offset(self, topic: str, partition: int = 0) -> int:
        """ListOffsets latest with read_committed: the last stable offset."""
        return self.wire.list_offset(topic, LATEST, partition, READ_COMMITTED).offset

    def wait_stable(self, topic: str, end: int, partition: int = 0,
                    timeout: float = WAIT_S) -> int:
        """Wait (bounded) until the partition's LSO reaches `end` — the markers of a finished
        transaction are written after EndTxn is answered — and return it."""
        def reached() -> tuple[int] | None:
            lso = self.stable_offset(topic, partition)
            return (lso,) if lso >= end else None

        (lso,) = wait_for(reached, timeout, f"the LSO of {topic}-{partition} to reach {end}")
        return lso

    def describe(self, transactional_id: str) -> Any:
        """DescribeTransactions at the id's coordinator: its one transaction state."""
        response = self.coordinator(transactional_id).request(
            DESCRIBE_TRANSACTIONS, self.wire.version(DESCRIBE_TRANSACTIONS),
            {"transactional_ids": [transactional_id]})
        (state,) = response.transaction_states
        return state

    def wait_state(self, transactional_id: str, *states: str,
                   timeout: float = WAIT_S) -> Any:
        """Wait (bounded) until DescribeTransactions says one of `states`; that answer."""
        return wait_for(
            lambda: (d := self.describe(transactional_id)).transaction_state in states and d,
            timeout, f"{transactional_id} to be {' or '.join(states)}")

    def describe_producers(self, topic: str, *partitions: int) -> dict[int, Any]:
        """DescribeProducers at the leader of the topic's partition 0: each asked partition's
        answer by index."""
        response = self.wire.leader(topic, 0).request(
            DESCRIBE_PRODUCERS, self.wire.version(DESCRIBE_PRODUCERS), {
            "topics": [{"name": topic, "partition_indexes": list(partitions)}]})
        (described,) = response.topics
        return {p.partition_index: p for p in described.partitions}

    def list_transactions(self, client: RawClient, *, states: Iterable[str] = (),
                          producer_ids: Iterable[int] = (), pattern: str | None = None) -> Any:
        """ListTransactions at one broker (each lists the transactions it coordinates)."""
        return client.request(LIST_TRANSACTIONS, self.wire.version(LIST_TRANSACTIONS), {
            "state_filters": list(states), "producer_id_filters": list(producer_ids),
            "duration_filter": -1, "transactional_id_pattern": pattern})

    def committed(self, group: str, topic: str, partition: int = 0, *,
                  require_stable: bool) -> tuple[int, ErrorCode]:
        """OffsetFetch v7 (KIP-447's ``require_stable``) of one partition at the group's
        coordinator: (committed offset, the partition's error code); asserts no group error."""
        self.wire.version(OFFSET_FETCH, at_least=OFFSET_FETCH_STABLE_VERSION)  # or skip
        response = self.group_coordinator(group).request(
            OFFSET_FETCH, OFFSET_FETCH_STABLE_VERSION, {
                "group_id": group, "require_stable": require_stable,
                "topics": [{"name": topic, "partition_indexes": [partition]}]})
        assert code(response) == ErrorCode.none, f"OffsetFetch({group}): {response}"
        ((answer,),) = (t.partitions for t in response.topics)
        return answer.committed_offset, code(answer)

    def stable_committed(self, group: str, topic: str,
                         partition: int = 0) -> tuple[int, ErrorCode]:
        """:meth:`committed` with ``require_stable`` once it is no longer
        UNSTABLE_OFFSET_COMMIT (a consumer's wait after a transaction ended: the coordinator
        applies its offsets when the marker reaches the offsets partition)."""
        def settled() -> tuple[int, ErrorCode] | None:
            answer = self.committed(group, topic, partition, require_stable=True)
            return None if answer[1] == ErrorCode.unstable_offset_commit else answer

        return wait_for(settled, WAIT_S, f"{group}'s offsets of {topic}-{partition} to be "
                        "stable", retry_on=())

    def read_committed(self, topic: str, end: int, partition: int = 0) -> ReadCommitted:
        """Fetch with read_committed from offset 0 until `end` (at most the LSO), fetching on
        from the last batch as a consumer does (Kafka answered an aborted batch and its marker
        in two fetches); every batch, with the aborted transactions listed on the way."""
        read = ReadCommitted()

        def more() -> bool:
            answer = self.wire.fetch(topic, read.next_offset, partition=partition,
                                     isolation_level=READ_COMMITTED)
            assert code(answer) == ErrorCode.none, f"Fetch(read_committed): {answer}"
            read.add(answer)
            return read.next_offset >= end

        wait_for(more, WAIT_S, f"read_committed fetches of {topic}-{partition} to reach {end}",
                 retry_on=())
        return read


@dataclass
class ReadCommitted:
    """What read_committed fetches answered: data records by offset, markers by offset
    (:class:`ControlType`), the aborted transactions listed, the last LSO."""

    values: dict[int, bytes | None] = field(default_factory=dict)
    producers: dict[int, int] = field(default_factory=dict)  # offset -> producer id
    markers: dict[int, int] = field(default_factory=dict)
    marker_producers: dict[int, int] = field(default_factory=dict)  # marker offset -> pid
    aborted: set[tuple[int, int]] = field(default_factory=set)  # (producer id, first offset)
    last_stable_offset: int = -1
    next_offset: int = 0

    def add(self, answer: Any) -> None:
        self.last_stable_offset = answer.last_stable_offset
        self.aborted |= {(a.producer_id, a.first_offset)
                         for a in answer.aborted_transactions or ()}
        data = answer.records or b""
        for header in batch_headers(data):
            records = decode_records(data[header.position:header.position + header.size])
            if header.is_control:
                (record,) = records
                _version, self.markers[header.base_offset] = _CONTROL_KEY.unpack(record.key or b"")
                self.marker_producers[header.base_offset] = header.producer_id
            for record in records if not header.is_control else ():
                self.values[record.offset] = record.value
                self.producers[record.offset] = header.producer_id
            self.next_offset = max(self.next_offset, header.last_offset + 1)

    def committed_values(self) -> list[bytes | None]:
        """The values a read_committed consumer keeps: those of no aborted transaction (a
        producer's records from an aborted transaction's first offset up to its marker)."""
        def aborted(offset: int) -> bool:
            producer = self.producers[offset]
            return any(pid == producer and first <= offset < min(
                (m for m, p in self.marker_producers.items() if p == pid and m > first),
                default=offset + 1) for pid, first in self.aborted)
        return [v for o, v in sorted(self.values.items()) if not aborted(o)]


def transaction_version(wire: Wire) -> int:
    """The cluster's finalized ``transaction.version`` feature level (0 when not listed, or
    when the target speaks no ApiVersions version that lists features)."""
    if wire.advertised.get(API_VERSIONS, (0, 0))[1] < FEATURES_API_VERSIONS:
        return 0
    response = wire.bootstrap.request(API_VERSIONS, FEATURES_API_VERSIONS, {
        "client_software_name": "kafka-harness-suites", "client_software_version": "1.0"})
    return max((f.max_version_level for f in response.finalized_features
                if f.name == "transaction.version"), default=0)


def implicit_add_version(wire: Wire) -> int:
    """The Produce version that adds its partition to the transaction (KIP-890 part 2); skips
    the test where the target speaks no such version or runs at transaction version 1."""
    version = wire.version(PRODUCE, at_least=IMPLICIT_ADD_PRODUCE)
    level = transaction_version(wire)
    if level < 2:
        pytest.skip(f"needs transaction version 2 (KIP-890 part 2); the target's finalized "
                    f"transaction.version is {level}")
    return version


def pattern_of(name: str) -> str:
    """A ListTransactions ``transactional_id_pattern`` that matches exactly `name`."""
    return re.escape(name)
