"""Which librdkafka errors say an operation definitely did not happen, and which leave it open.

A history is only as good as its ``fail`` rows: the checker reports a read of a value whose send
``fail``-ed as an aborted read, so ``fail`` must mean "certainly not written". librdkafka reports
one error per message — the last attempt's — and earlier attempts of a retried message may have
been written even if the last one was refused. So an error is definite only when it could not
have come after a write:

* errors raised before the message ever left the client (unknown partition, a message too
  large for the client), and
* refusals the broker gives every attempt alike, because they are about the message or the
  producer's rights, not about the cluster's state (too large, corrupt, not authorized).

Refusals about the cluster's state (not enough replicas, not the leader) are definite for one
attempt only, so they count as definite only when the producer makes exactly one attempt. So
does a queue purge (``_PURGE_QUEUE``): librdkafka puts a message whose request timed out back in
its queue for the retry, and a purge then reports it as never sent while the first attempt may
still land — seen under the delayed-end-txn nemesis, where Toxiproxy delivered a timed-out
Produce at the heal and a consumer read two values recorded ``fail`` with ``_PURGE_QUEUE``
(docs/scenarios.md).
Everything else — timeouts, disconnects, a purged in-flight request, "appended but not
replicated" — is ``info``: the value may still show up.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

_NEVER_WRITTEN_SEND = frozenset({
    KafkaError._QUEUE_FULL,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._INVALID_ARG,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.INVALID_MSG,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.INVALID_TIMESTAMP,
    KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
})
_REFUSED_THIS_ATTEMPT = frozenset({
    KafkaError._PURGE_QUEUE,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.KAFKA_STORAGE_ERROR,
})

# An OffsetCommit the coordinator refused for the member or the request itself; timeouts and
# coordinator moves leave the commit open (librdkafka may have retried one that landed).
_NEVER_WRITTEN_COMMIT = frozenset({
    KafkaError._NO_OFFSET,
    KafkaError._INVALID_ARG,
    KafkaError._ASSIGNMENT_LOST,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError.OFFSET_METADATA_TOO_LARGE,
    KafkaError.INVALID_COMMIT_OFFSET_SIZE,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
})


def send_outcome(error: KafkaError, *, single_attempt: bool) -> str:
    """``fail`` or ``info`` for a send that completed with ``error``."""
    code = error.code()
    if code in _NEVER_WRITTEN_SEND or (single_attempt and code in _REFUSED_THIS_ATTEMPT):
        return "fail"
    return "info"


def commit_outcome(code: int) -> str:
    """``fail`` or ``info`` for a commit of one partition that completed with error ``code``."""
    return "fail" if code in _NEVER_WRITTEN_COMMIT else "info"


def error_name(error: KafkaError | int) -> str:
    """The error's name as librdkafka spells it (``_MSG_TIMED_OUT``, ``NOT_ENOUGH_REPLICAS``)."""
    if isinstance(error, KafkaError):
        return error.name()
    return KafkaError(error).name()
