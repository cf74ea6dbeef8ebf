"""Producer transactions, recorded as HISTORY.md's ``txn`` operations, and the client that writes
them: a transactional producer sending each transaction to several partitions of two topics.

:class:`RecordedTransactions` wraps confluent-kafka's transactional producer (init, begin,
produce, send_offsets, commit, abort) and turns what each call returned into history rows, so the
consume-transform-produce processor (:mod:`harness.workload.transform`) records its
transactions by the same rules. What a completion row says is the part that must be honest:

* ``ok`` — ``commit_transaction`` returned;
* ``fail`` — the transaction cannot have committed: ``abort_transaction`` returned (a committed
  transaction cannot be aborted in the same producer epoch: the coordinator refuses), or the
  producer failed — fenced, fatal, abort refused — before commit was ever asked;
* ``info`` — anything else once commit was asked: a commit that timed out (even after
  retries), a fatal error or fencing during the commit (a retried EndTxn may have landed before
  the fence), an abort that failed after the commit was tried.

A retriable error of commit or abort is retried until the operation's time is up, as
librdkafka's documentation asks of an application; only then does it count as unknown. After an
``info`` transaction, or once the producer is fatal, the client process ends (exit
:data:`REPLACE_ME`) and the generator starts a new process: guessing the outcome and carrying on
would itself lose or repeat work.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from harness.waiting import ClusterWaitTimeout, wait_for
from harness.workload.context import QUIET, RunContext
from harness.workload.kinds import DEFAULT_ABORT_P, TxnIdPolicy
from harness.workload.outcomes import error_name, send_outcome
from harness.workload.recorder import Recorder

REPLACE_ME = 1
"""A transactional client's exit code when it ended for a successor to carry on (after an
``info`` transaction, or with a fatal producer); any non-zero code gets a replacement."""
# How long settle() serves the purged sends' delivery reports before it gives up on the rest.
SETTLE_S = 5.0

DELIBERATE_ABORT = "ABORTED_BY_WORKLOAD"
"""The error column of a ``fail`` txn row whose abort the workload chose (``--abort-p``), so a
reader tells it from an abort forced by a failed send or offset commit."""


class TxnOutcome(StrEnum):
    """A transaction's completion row type (HISTORY.md, Transactions)."""

    OK = "ok"
    FAIL = "fail"
    INFO = "info"


def transactional_id(prefix: str, policy: TxnIdPolicy, process: int) -> str:
    """The ``transactional.id`` of a client process: the slot's own (``prefix``) when successors
    reuse it, else one of this process alone."""
    return prefix if policy is TxnIdPolicy.REUSE else f"{prefix}-p{process}"


def transactional_config(bootstrap: str, txn_id: str, *, transaction_timeout_ms: int,
                         delivery_timeout_ms: int, request_timeout_ms: int,
                         config: dict[str, Any]) -> dict[str, Any]:
    """A transactional producer's settings: acks=all and idempotence, which transactions
    require, and a transaction timeout short enough that a dead client's open transaction is
    aborted by its coordinator within a short run (Kafka's default is a minute)."""
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "acks": "all",
        "enable.idempotence": True,
        "transaction.timeout.ms": transaction_timeout_ms,
        "delivery.timeout.ms": delivery_timeout_ms,
        "request.timeout.ms": request_timeout_ms,
        "linger.ms": 5,
        **QUIET,
        **config,
    }


def open_coordinator(bootstrap: str, txn_id: str, *, timeout_s: float = 60.0) -> None:
    """Initialise one transactional producer and let it go, before a run's clock starts.

    Kafka creates its transaction state topic (50 partitions by default) when a transactional
    id's coordinator is first looked up, which took 3-6 s of a short run's first clients on a
    small machine; a run pays it here instead. Tried again while librdkafka gives up with an
    error (NOT_COORDINATOR while the topic loads); ClusterWaitTimeout when it never answered.
    """
    producer = Producer(transactional_config(bootstrap, txn_id, transaction_timeout_ms=10_000,
                                             delivery_timeout_ms=10_000,
                                             request_timeout_ms=5_000, config={}))

    def initialised() -> bool:
        producer.init_transactions(10)
        return True

    wait_for(initialised, timeout_s, f"the transaction coordinator of {txn_id}",
             retry_on=(KafkaException,))


def error_of(exc: KafkaException) -> KafkaError:
    """The KafkaError a KafkaException carries (one of our own if it carries none)."""
    error = exc.args[0]
    return error if isinstance(error, KafkaError) else KafkaError(KafkaError._FAIL, str(error))


class RecordedTransactions:
    """One transactional producer and the rows of its transactions; every row it writes carries
    the current transaction's op in ``txn``.

    ``usable`` turns false once the producer cannot go on (fatal, or an outcome it cannot know):
    the client then ends and a new process takes over.
    """

    def __init__(self, producer: Producer, recorder: Recorder, txn_id: str, *,
                 timeout_s: float) -> None:
        self.producer = producer
        self.recorder = recorder
        self.txn_id = txn_id
        self.timeout_s = timeout_s
        self.usable = True
        self.sent = 0
        self._op: int | None = None
        self._must_abort: KafkaError | None = None  # a send or offset commit failed inside
        self._fatal: KafkaError | None = None
        self._commit_asked = False

    # --- the operations ------------------------------------------------------------------

    def init(self) -> None:
        """``init_transactions``, retried while librdkafka says it may be; KafkaException when
        it cannot be done (the process then ends before any transaction)."""
        self._retrying(lambda timeout: self.producer.init_transactions(timeout))

    def begin(self) -> int | None:
        """Begin a transaction; its op, or None when the producer refused (it is then no longer
        usable and the transaction is recorded ``fail``: nothing was sent in it)."""
        op = self.recorder.next_op()
        self._op, self._must_abort, self._commit_asked = op, None, False
        self.recorder.record("invoke", "txn", op, value=self.txn_id)
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            self._complete(TxnOutcome.FAIL, error_of(exc))
            self.usable = False
            return None
        return op

    def send(self, topic: str, partition: int, value: str, **fields: Any) -> None:
        """Produce one record inside the current transaction; ``fields`` are extra columns of
        both its rows (derived_from, group)."""
        op, txn = self.recorder.next_op(), self._current()
        self.sent += 1
        self.recorder.record("invoke", "send", op, topic=topic, partition=partition,
                             value=value, txn=txn, **fields)
        try:
            self.producer.produce(topic, value=value.encode(), partition=partition,
                                  on_delivery=self._on_delivery(op, txn, topic, value, fields))
        except BufferError:
            self.recorder.record("fail", "send", op, topic=topic, partition=partition,
                                 value=value, txn=txn, error="_QUEUE_FULL", **fields)
        except KafkaException as exc:
            error = error_of(exc)
            self._note_failure(error)
            self.recorder.record(send_outcome(error, single_attempt=True), "send", op,
                                 topic=topic, partition=partition, value=value, txn=txn,
                                 error=error_name(error), **fields)
        self.producer.poll(0)

    def send_offsets(self, positions: dict[tuple[str, int], int],
                     group_metadata: Callable[[], object], fields: dict[str, Any]) -> bool:
        """``send_offsets_to_transaction`` of the next positions to read, with the consumer's
        group metadata as ``group_metadata()`` gives it now; one commit row per partition,
        ``ok`` when the offsets joined the transaction (they take effect only if it commits)
        and ``fail`` when they did not (the transaction must then abort)."""
        op, txn = self.recorder.next_op(), self._current()
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
        failure: KafkaError | None = None
        try:
            metadata = group_metadata()
            self._retrying(lambda timeout: self.producer.send_offsets_to_transaction(
                partitions, metadata, timeout))
        except KafkaException as exc:
            failure = error_of(exc)
            self._note_failure(failure)
            self._must_abort = self._must_abort or failure
        for tp in partitions:
            self.recorder.record("ok" if failure is None else "fail", "commit", op,
                                 topic=tp.topic, partition=tp.partition, offset=tp.offset,
                                 txn=txn, error=None if failure is None else error_name(failure),
                                 **fields)
        return failure is None

    def finish(self, *, abort: bool) -> TxnOutcome:
        """Commit the current transaction (or abort it: on purpose, or because something inside
        failed) and record how it ended."""
        self._current()
        if self._fatal is not None:  # fenced or fatal before commit was asked: never committed
            self.usable = False
            self.settle()
            return self._complete(TxnOutcome.FAIL, self._fatal)
        if abort or self._must_abort is not None:
            fatal = self._flush()  # the sends complete before the transaction
            if fatal is not None:
                self.usable = False
                self.settle()
                return self._complete(TxnOutcome.FAIL, fatal)
            return self._abort(self._must_abort, commit_tried=False)
        self._commit_asked = True
        try:
            self._retrying(lambda timeout: self.producer.commit_transaction(timeout))
        except KafkaException as exc:
            error = error_of(exc)
            if error.txn_requires_abort():
                return self._abort(error, commit_tried=True)
            self.usable = False
            self.settle()
            return self._complete(TxnOutcome.INFO, error)
        return self._complete(TxnOutcome.OK, None)

    def give_up(self, error: KafkaError) -> None:
        """The client ends on an error its transaction's steps did not catch (a consumer's
        fatal error, say): the open transaction, if any, completes ``fail`` when commit was
        never asked — nobody can commit it now; its coordinator aborts it — else ``info``."""
        self.usable = False
        if self._op is not None:
            self.settle()
            self._complete(TxnOutcome.INFO if self._commit_asked else TxnOutcome.FAIL, error)

    # --- helpers -------------------------------------------------------------------------

    def _abort(self, cause: KafkaError | None, *, commit_tried: bool) -> TxnOutcome:
        """Abort; ``fail`` when the coordinator took the abort, else ``info`` if commit had been
        asked (it may have landed) and ``fail`` if not (nothing can commit it now)."""
        failure: KafkaError | None = None
        try:
            self._retrying(lambda timeout: self.producer.abort_transaction(timeout))
        except KafkaException as exc:
            failure = error_of(exc)
        self.producer.poll(0)  # the purged sends' reports, before the completion row
        if failure is not None:
            self.usable = False
            self.settle()
            return self._complete(TxnOutcome.INFO if commit_tried else TxnOutcome.FAIL, failure)
        return self._complete(TxnOutcome.FAIL, cause)

    def end(self, exc: KafkaException) -> int:
        """A client ends on ``exc``, which no step caught: the open transaction completes
        (:meth:`give_up`), the client's log says why, and the exit code asks for a successor."""
        self.give_up(error_of(exc))
        print(f"ended: {exc}", file=sys.stderr)
        return REPLACE_ME

    def settle(self) -> None:
        """Purge what the producer still holds, so every send completes (``fail`` if never
        sent, ``info`` if in flight) — before its transaction's completion row, when the
        producer cannot go on, and when the client ends. A purged in-flight send's report
        can come a moment after the purge: the reports are served until none is outstanding
        (bounded; one still missing then stays an invoke without completion, which the
        contract reads as unknown), so none lands after the completion row."""
        self.producer.purge()
        with contextlib.suppress(ClusterWaitTimeout):
            wait_for(lambda: self.producer.poll(0.05) >= 0 and len(self.producer) == 0,
                     SETTLE_S, "the purged sends' delivery reports", interval=0.0,
                     retry_on=())

    def _flush(self) -> KafkaError | None:
        """Flush the transaction's sends; the fatal error that ended the producer meanwhile
        (a successor fenced it), else None. confluent-kafka raises that error from flush() and
        runs the delivery reports with it still pending, where the first C call fails with
        SystemError (seen in a zombie-fencing test): either means the producer is dead, and a
        transaction it never asked to commit cannot commit."""
        try:
            self.producer.flush(self.timeout_s)
        except KafkaException as exc:
            error = error_of(exc)
            self._note_failure(error)
            return self._fatal
        except SystemError as exc:
            cause = exc.__context__ or exc.__cause__
            error = error_of(cause) if isinstance(cause, KafkaException) else KafkaError(
                KafkaError._FATAL, f"the producer failed inside flush: {exc}", fatal=True)
            self._fatal = self._fatal or error
            return self._fatal
        return None

    def _retrying(self, call: Callable[[float], None]) -> None:
        """Call ``call(timeout)`` again while it raises a retriable error and time is left."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                call(max(0.1, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error = error_of(exc)
                if not error.retriable() or time.monotonic() >= deadline:
                    self._note_failure(error)
                    raise

    def _complete(self, outcome: TxnOutcome, error: KafkaError | None) -> TxnOutcome:
        op = self._current()
        if error is not None:
            reason: str | None = error_name(error)
        else:
            reason = DELIBERATE_ABORT if outcome is TxnOutcome.FAIL else None
        self.recorder.record(outcome.value, "txn", op, value=self.txn_id, error=reason)
        self._op = None
        return outcome

    def _current(self) -> int:
        if self._op is None:
            raise RuntimeError("no transaction is open")
        return self._op

    def _note_failure(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = self._fatal or error
        elif error.txn_requires_abort():
            self._must_abort = self._must_abort or error

    def _on_delivery(self, op: int, txn: int, topic: str, value: str,
                     fields: dict[str, Any]) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, message: Message) -> None:
            if error is None:
                offset = message.offset()
                self.recorder.record("ok", "send", op, topic=topic, value=value, txn=txn,
                                     partition=message.partition(),
                                     offset=offset if offset is not None and offset >= 0
                                     else None, **fields)
                return
            self._note_failure(error)
            if not error.fatal():  # librdkafka makes the transaction abortable
                self._must_abort = self._must_abort or error
            self.recorder.record(send_outcome(error, single_attempt=False), "send", op,
                                 topic=topic, value=value, txn=txn,
                                 partition=message.partition() if message else -1,
                                 error=error_name(error), **fields)
        return report


# ---------------------------------------------------------------------------------------------
# The transactional producer client


@dataclass(frozen=True)
class TxnSettings:
    """What every transactional client is told: its ``transactional.id`` (the slot's prefix,
    see :func:`transactional_id`) and the policy naming it, the share of transactions it aborts
    on purpose — drawn from a generator seeded by ``seed`` and its process number — and its
    timeouts (``timeout_s`` for each of init, send_offsets, commit and abort)."""

    transactional_id: str
    id_policy: TxnIdPolicy = TxnIdPolicy.FRESH
    abort_p: float = DEFAULT_ABORT_P
    seed: int = 0
    transaction_timeout_ms: int = 10_000
    delivery_timeout_ms: int = 10_000
    request_timeout_ms: int = 5_000
    timeout_s: float = 10.0
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.abort_p <= 1.0:
            raise ValueError(f"abort_p must be within [0, 1], got {self.abort_p}")
        try:  # the settings also arrive as JSON, where the policy is its value
            object.__setattr__(self, "id_policy", TxnIdPolicy(self.id_policy))
        except ValueError:
            raise ValueError(f"id_policy must be one of {', '.join(TxnIdPolicy)}; got "
                             f"{self.id_policy!r}") from None

    def start(self, bootstrap: str, recorder: Recorder
              ) -> tuple[RecordedTransactions, random.Random]:
        """The client process's recorded transactional producer (not yet initialised) and the
        generator that decides which of its transactions to abort."""
        txn_id = transactional_id(self.transactional_id, self.id_policy, recorder.process)
        producer = Producer(transactional_config(
            bootstrap, txn_id, transaction_timeout_ms=self.transaction_timeout_ms,
            delivery_timeout_ms=self.delivery_timeout_ms,
            request_timeout_ms=self.request_timeout_ms, config=self.config))
        transactions = RecordedTransactions(producer, recorder, txn_id, timeout_s=self.timeout_s)
        return transactions, random.Random(f"{self.seed}-{recorder.process}")


@dataclass(frozen=True)
class TxnProducerSpec:
    """One transactional producer's settings.

    Each transaction sends ``sends_per_txn`` records, going round ``topics`` and, per topic,
    ``partitions`` partitions, so one transaction always spans several partitions of every
    topic it names; ``rate`` is sends per second for this process.
    """

    bootstrap: str
    topics: tuple[str, ...]
    txn: TxnSettings
    partitions: int = 3
    sends_per_txn: int = 4
    rate: float = 50.0
    # Seconds between one send of a transaction and the next: 0 sends them at once; a gap
    # keeps each transaction open for a while, as a client that reads or computes between its
    # writes does — which a late EndTxn of the transaction before needs to land in the middle
    # of one (KAFKA-17754).
    send_gap_s: float = 0.0
    # Seconds between the last send and the commit (or abort): the moment a client spends on
    # other work before it ends a transaction. A request held by the network is the first one
    # the client sends after the hold began, so the longer this pause, the likelier that one is
    # the EndTxn (KAFKA-17754), not an AddPartitionsToTxn of the next sends.
    end_gap_s: float = 0.0

    def __post_init__(self) -> None:
        if len(self.topics) < 1 or self.partitions < 1 or self.sends_per_txn < 1:
            raise ValueError("a transactional producer needs topics, partitions and sends")
        if self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")
        if min(self.send_gap_s, self.end_gap_s) < 0:
            raise ValueError(f"send_gap_s and end_gap_s must be >= 0, got {self.send_gap_s}, "
                             f"{self.end_gap_s}")

    def placement(self, txn_index: int, send_index: int) -> tuple[str, int]:
        """(topic, partition) of one send: round the topics, then a partition that moves on
        each round and each transaction, so consecutive transactions overlap partitions."""
        topic = self.topics[send_index % len(self.topics)]
        partition = (txn_index + send_index // len(self.topics)) % self.partitions
        return topic, partition


class TxnProducer:
    """Sends transactions of unique values until the run ends or the producer cannot go on."""

    def __init__(self, spec: TxnProducerSpec, context: RunContext) -> None:
        self.spec = spec
        self.context = context
        self.recorder = context.recorder()
        self.transactions, self.rng = spec.txn.start(spec.bootstrap, self.recorder)
        self.producer = self.transactions.producer

    def one_transaction(self, index: int) -> TxnOutcome | None:
        if self.transactions.begin() is None:
            return None
        for n in range(self.spec.sends_per_txn):
            if n and self.spec.send_gap_s:
                self._serve_for(self.spec.send_gap_s)
            topic, partition = self.spec.placement(index, n)
            value = f"{self.context.process}-{self.transactions.sent}"
            self.transactions.send(topic, partition, value)
        if self.spec.end_gap_s:
            self._serve_for(self.spec.end_gap_s)
        return self.transactions.finish(abort=self.rng.random() < self.spec.txn.abort_p)

    def _serve_for(self, seconds: float) -> None:
        """Serve the producer's delivery reports for ``seconds`` (a pace, not an ordering:
        nothing waits for an event here)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.producer.poll(left)

    def run(self) -> int:
        """0 when the run ended; :data:`REPLACE_ME` when the producer could not go on."""
        interval = self.spec.sends_per_txn / self.spec.rate
        next_at = time.monotonic()
        index = 0
        try:
            self.transactions.init()
            while self.context.remaining_s() > 0 and self.transactions.usable:
                self.one_transaction(index)
                index += 1
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    self.producer.poll(pause)
                else:
                    next_at = time.monotonic()  # behind: do not burst
        except KafkaException as exc:  # init failed, or a step no transaction step caught
            return self.transactions.end(exc)
        finally:
            self.transactions.settle()
            self.recorder.close()
        return 0 if self.transactions.usable else REPLACE_ME


def run(spec: TxnProducerSpec, context: RunContext) -> int:
    return TxnProducer(spec, context).run()
