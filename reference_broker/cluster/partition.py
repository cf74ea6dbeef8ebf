"""One partition replica on this broker: leader or follower state, ISR, high watermark, epochs.

As in Kafka, the high watermark is the smallest log end offset among the in-sync replicas and
bounds what consumers may read. A leader learns each follower's log end offset from the offset
the follower fetches at; a follower that has not caught up with the leader's log end for
`replica.lag.time.max.ms` leaves the ISR, and one that reaches the high watermark joins it again.
This class decides *that* the ISR should change; writing the change to ZooKeeper (and only then
applying it here with :meth:`Partition.apply_isr`) is the replica manager's job, so a leader
never acts on an ISR that the controller could not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from harness.wire.control_records import EndTxnMarker
from harness.wire.errors import ErrorCode, error_name
from harness.wire.records import BatchHeader
from reference_broker.log.producer_state import AppendOrigin
from reference_broker.log.transaction_index import AbortedTxn
from reference_broker.log.unified_log import AppendResult, UnifiedLog


class IsolationLevel(IntEnum):
    """What a consumer may read (KIP-98): to the high watermark, or to the last stable offset
    without the aborted transactions' records (which the fetch lists for it to drop)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @classmethod
    def from_wire(cls, value: int) -> IsolationLevel:
        """A request's isolation_level byte. Kafka refuses values other than 0 and 1; here they
        read uncommitted, as every value did before read_committed existed here."""
        return cls.READ_COMMITTED if value == cls.READ_COMMITTED else cls.READ_UNCOMMITTED


class PartitionError(Exception):
    """A per-partition failure answered with a Kafka error code (e.g. NOT_LEADER_OR_FOLLOWER)."""

    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_name(error))
        self.error = error


@dataclass(frozen=True)
class ReadResult:
    records: object | None  # the log's FetchSlice, or None when nothing is readable
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    # read_committed: the aborted transactions overlapping what may be read; None otherwise
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


@dataclass
class RemoteReplica:
    """What a leader knows of one follower."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0


class Partition:
    def __init__(
        self,
        topic: str,
        partition: int,
        log: UnifiedLog,
        local_broker_id: int,
        on_high_watermark: Callable[[Partition], None],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.controller_epoch = -1
        self.zk_version = 0
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.standalone = True
        self._remote: dict[int, RemoteReplica] = {}
        self._epoch_start_offset = 0
        self._high_watermark = log.log_end_offset
        self._on_high_watermark = on_high_watermark

    def __repr__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, bounded by the high watermark."""
        return self.log.last_stable_offset(self._high_watermark)

    def readable_end(self, isolation: IsolationLevel) -> int:
        """Where a consumer's reads stop (exclusive) at this isolation level."""
        if isolation is IsolationLevel.READ_COMMITTED:
            return self.last_stable_offset
        return self._high_watermark

    # --- state changes ordered by the controller ------------------------------------------------

    def make_leader(
        self, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
        *, controller_epoch: int = -1, zk_version: int = 0, now_ms: int = 0,
        standalone: bool = True,
    ) -> bool:
        """Lead from this epoch on; True when this broker was not already leading this epoch."""
        was_leading = self.is_leader and self.leader_epoch == leader_epoch
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.replicas = replicas
        self.isr = isr
        self.standalone = standalone
        if not was_leading:
            # KIP-101: the new epoch starts at the current log end, so a follower asking for
            # the previous epoch learns exactly where this leader's history diverges.
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
            self._epoch_start_offset = self.log.log_end_offset
            self._remote = {
                r: RemoteReplica(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas if r != self.local_broker_id
            }
        else:
            for r in replicas:
                if r != self.local_broker_id:
                    self._remote.setdefault(r, RemoteReplica())
        if standalone:
            self._high_watermark = min(self._high_watermark, self.log.log_end_offset)
        self._maybe_increment_high_watermark()
        return not was_leading

    def make_follower(
        self, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
        isr: tuple[int, ...], *, controller_epoch: int, zk_version: int,
    ) -> bool:
        """Follow `leader_id`; True when the leader or its epoch changed (fetching restarts)."""
        changed = self.leader_id != leader_id or self.leader_epoch != leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.replicas = replicas
        self.isr = isr
        self.standalone = False
        self._remote = {}
        self._high_watermark = min(self._high_watermark, self.log.log_end_offset)
        return changed

    def apply_isr(self, isr: tuple[int, ...], zk_version: int) -> None:
        """The ISR change this leader asked for is in ZooKeeper; act on it."""
        self.isr = isr
        self.zk_version = zk_version
        self._maybe_increment_high_watermark()

    def restore_high_watermark(self, offset: int) -> None:
        """Start-up: the checkpointed high watermark, never beyond the log end."""
        self._high_watermark = max(0, min(offset, self.log.log_end_offset))

    # --- leader side ----------------------------------------------------------------------------

    def append_records_to_leader(
        self, records: bytearray, header: BatchHeader, now_ms: int | None = None,
        required_acks: int = 1, min_insync_replicas: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        self._check_leader_for_append(required_acks, min_insync_replicas)
        result = self.log.append_as_leader(
            records, header, leader_epoch=self.leader_epoch, now_ms=now_ms, origin=origin
        )
        if not result.duplicate and result.error is None:
            self._maybe_increment_high_watermark()
        return result

    def append_marker_to_leader(
        self, marker: EndTxnMarker, producer_id: int, producer_epoch: int,
        min_insync_replicas: int = 1, now_ms: int | None = None,
    ) -> AppendResult:
        """Write a transaction marker (WriteTxnMarkers); the coordinator waits as acks=all."""
        self._check_leader_for_append(-1, min_insync_replicas)
        result = self.log.append_marker_as_leader(
            marker, producer_id=producer_id, producer_epoch=producer_epoch,
            leader_epoch=self.leader_epoch, now_ms=now_ms,
        )
        if result.error is None:
            self._maybe_increment_high_watermark()
        return result

    def _check_leader_for_append(self, required_acks: int, min_insync_replicas: int) -> None:
        if not self.is_leader:
            raise PartitionError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.local_broker_id} does not lead {self.topic}-{self.partition}",
            )
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"the ISR of {self} is {list(self.isr)}, below min.insync.replicas "
                f"{min_insync_replicas}",
            )

    def acks_all_outcome(self, required_offset: int,
                         min_insync_replicas: int) -> ErrorCode | None:
        """For a waiting acks=all produce: None (keep waiting) or the error code to answer.

        Complete once the high watermark covers the batch; if the ISR has meanwhile shrunk
        below min.insync.replicas the write is acknowledged as NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        """
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        if self._high_watermark >= required_offset:
            if len(self.isr) < min_insync_replicas:
                return ErrorCode.not_enough_replicas_after_append
            return ErrorCode.none
        return None

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, now_ms: int
    ) -> tuple[int, ...] | None:
        """Record a follower's fetch; returns a wider ISR to write when it has caught up."""
        replica = self._remote.get(replica_id)
        if replica is None:
            return None
        replica.log_end_offset = fetch_offset
        if fetch_offset >= self.log.log_end_offset:
            replica.last_caught_up_ms = now_ms
        self._maybe_increment_high_watermark()
        if replica_id in self.isr or replica_id not in self.replicas:
            return None
        # Kafka's rule: in sync again once it has everything up to the high watermark and has
        # reached the start of this leader's epoch (so it holds no record of an older leader
        # that this one does not have).
        caught_up = fetch_offset >= self._high_watermark \
            and fetch_offset >= self._epoch_start_offset
        if caught_up:
            return tuple(sorted({*self.isr, replica_id}, key=self.replicas.index))
        return None

    def shrunk_isr(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers that have lagged for more than `max_lag_ms`, or None."""
        if not self.is_leader or self.standalone:
            return None
        out_of_sync = [
            r for r in self.isr
            if r != self.local_broker_id and r in self._remote
            and self._remote[r].log_end_offset < self.log.log_end_offset
            and now_ms - self._remote[r].last_caught_up_ms > max_lag_ms
        ]
        if not out_of_sync:
            return None
        return tuple(r for r in self.isr if r not in out_of_sync)

    def follower_log_end_offset(self, replica_id: int) -> int:
        replica = self._remote.get(replica_id)
        return -1 if replica is None else replica.log_end_offset

    def _maybe_increment_high_watermark(self) -> None:
        if not self.is_leader:
            return
        leos = [self.log.log_end_offset]
        leos += [rep.log_end_offset for r, rep in self._remote.items() if r in self.isr]
        new_hw = min(leos)
        if new_hw > self._high_watermark:
            self._high_watermark = new_hw
            self._on_high_watermark(self)
        elif new_hw < self._high_watermark and self.standalone and not self._remote:
            # A standalone leader whose log was cut back (recovery) must not advertise data
            # it no longer has.
            self._high_watermark = new_hw

    # --- follower side --------------------------------------------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw != self._high_watermark:
            self._high_watermark = max(new_hw, 0)
            self._on_high_watermark(self)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self._high_watermark = min(self._high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self._high_watermark = offset

    # --- reads ----------------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request naming an older epoch is fenced, a newer one is ahead of us."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.fenced_leader_epoch)
        raise PartitionError(ErrorCode.unknown_leader_epoch)

    def read_records(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool, from_follower: bool = False,
        follower_may_serve: bool = False,
        isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    ) -> ReadResult:
        """Records from `fetch_offset`: a follower's fetch reads to the log end, anyone else's
        to the high watermark, or to the last stable offset when read_committed. A consumer
        whose Fetch carries client metadata (v11+) may read from a follower, up to the high
        watermark that follower has learned (KIP-392).

        read_committed also gets the aborted transactions with records in [fetch offset,
        last stable offset): a superset of those in what was served (Kafka's bound, the end
        of the segment read, is one too), which is all a consumer needs to drop them."""
        if not self.is_leader and not (follower_may_serve and not from_follower):
            raise PartitionError(ErrorCode.not_leader_or_follower)
        last_stable = self.last_stable_offset
        bound = self.log.log_end_offset if from_follower else self.readable_end(isolation)
        records = self.log.read(fetch_offset, max_bytes, bound, min_one_batch)
        aborted = None
        if isolation is IsolationLevel.READ_COMMITTED and not from_follower:
            aborted = tuple(self.log.collect_aborted_transactions(fetch_offset, last_stable))
        return ReadResult(
            records,
            self._high_watermark,
            last_stable,
            self.log.log_start_offset,
            self.log.log_end_offset,
            aborted,
        )
