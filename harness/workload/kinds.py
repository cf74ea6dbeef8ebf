"""What a run's clients do (the workload kind) and how transactional clients name themselves.

Kept apart from the clients, which load librdkafka: the CLI's options and the runner's checks
name the choices without loading a client library (as :mod:`harness.workload.group_protocol`).
"""

from __future__ import annotations

from enum import StrEnum


class WorkloadKind(StrEnum):
    """``kafka-harness run --workload``.

    * ``produce-consume`` — idempotent producers and consumers, no transactions (the first
      workload, and still the default);
    * ``transactions`` — transactional producers writing each transaction to several partitions
      of two topics, a share of them aborted on purpose, read by read_committed consumers (and
      one read_uncommitted group, which may see what the others must not);
    * ``consume-transform-produce`` — idempotent producers fill an input topic; processors in
      one group turn each input record into an output record and commit its input offset in the
      same transaction (Kafka's exactly-once stream processing, KIP-98/KIP-447).
    """

    PRODUCE_CONSUME = "produce-consume"
    TRANSACTIONS = "transactions"
    CONSUME_TRANSFORM_PRODUCE = "consume-transform-produce"

    @property
    def transactional(self) -> bool:
        return self is not WorkloadKind.PRODUCE_CONSUME


class TxnIdPolicy(StrEnum):
    """Which ``transactional.id`` a transactional client takes, which decides what happens to a
    transaction its predecessor left open.

    * ``fresh`` — every client process (every incarnation) has an id of its own, as Jepsen's
      Kafka test does: a dead client's open transaction is aborted only when the coordinator
      times it out (``transaction.timeout.ms``), and until then it holds back the last stable
      offset of every partition it wrote;
    * ``reuse`` — the process that replaces a dead one takes over its id: its
      ``init_transactions`` bumps the producer epoch, fencing the predecessor (a zombie, if it
      still runs) and completing or aborting what it left open (KIP-98's zombie fencing).
    """

    FRESH = "fresh"
    REUSE = "reuse"


class Isolation(StrEnum):
    """A consumer's ``isolation.level``; the values are the history's ``isolation`` column
    (harness.history.ISOLATIONS)."""

    READ_COMMITTED = "read_committed"
    READ_UNCOMMITTED = "read_uncommitted"


def workload_topics(kind: WorkloadKind, topic: str) -> tuple[str, ...]:
    """The topics a run of ``kind`` creates and reads back, all with the same partitions: the
    transactions span two topics; consume-transform-produce reads ``topic`` and writes its
    ``-out`` topic."""
    if kind is WorkloadKind.TRANSACTIONS:
        return topic, f"{topic}-2"
    if kind is WorkloadKind.CONSUME_TRANSFORM_PRODUCE:
        return topic, f"{topic}-out"
    return (topic,)


DEFAULT_ABORT_P = 0.1
"""The share of transactions a transactional client aborts on purpose (``--abort-p``)."""


def workload_problems(workload: str, txn_id_policy: str, *, abort_p: float,
                      producers: int, consumers: int, acks: str = "all",
                      idempotence: bool = True, consumer_mode: str = "group") -> list[str]:
    """What is wrong with running ``workload`` with these options, in the CLI's words (the
    runner takes its options from library callers too, as plain strings). An option a kind
    would have to ignore is refused rather than silently dropped: transactional producers are
    always acks=all and idempotent, and processors always a group."""
    if workload not in tuple(WorkloadKind):
        return [f"--workload must be one of {', '.join(WorkloadKind)}, got {workload!r}"]
    if txn_id_policy not in tuple(TxnIdPolicy):
        return [f"--txn-id-policy must be one of {', '.join(TxnIdPolicy)}, got "
                f"{txn_id_policy!r}"]
    kind = WorkloadKind(workload)
    problems = []
    if not 0.0 <= abort_p <= 1.0:
        problems.append(f"--abort-p must be within [0, 1], got {abort_p}")
    if kind is WorkloadKind.TRANSACTIONS and (acks not in ("all", "-1") or not idempotence):
        problems.append("--workload transactions: transactional producers are acks=all and "
                        "idempotent (Kafka requires it); drop --acks and --no-idempotence")
    if kind is WorkloadKind.CONSUME_TRANSFORM_PRODUCE and min(producers, consumers) < 1:
        problems.append("--workload consume-transform-produce needs at least one producer (to "
                        "fill the input topic) and one consumer (a processor)")
    if kind is WorkloadKind.CONSUME_TRANSFORM_PRODUCE and consumer_mode != "group":
        problems.append("--workload consume-transform-produce: its processors are one consumer "
                        "group (their offsets commit with their transactions); drop "
                        "--consumer-mode assign")
    return problems
