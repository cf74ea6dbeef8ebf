"""Which leader epoch wrote which offsets of a partition (Kafka's LeaderEpochFileCache).

Each entry `(epoch, start_offset)` says: the leader of `epoch` wrote its first offset at
`start_offset`, and it wrote everything up to the next entry's start. This is what lets a
follower ask "where does my epoch end on the leader?" (OffsetsForLeaderEpoch, KIP-101) and cut
exactly the records the new leader never had, instead of trusting its high watermark and
risking divergent logs after an unclean or fast sequence of elections.

The entries live in the partition directory's `leader-epoch-checkpoint`, Kafka's text format:

    0          <- version
    2          <- number of entries
    0 0        <- epoch, start offset
    2 10

The file is rewritten atomically (temp file, fsync, rename) whenever the entries change. It is
written *before* the data it describes, so after a crash it can only be ahead of the log, which
`truncate_from_end` fixes on load. A file that cannot be parsed is reported and flagged with
`needs_rebuild`; the loader then re-derives the entries from the batches on disk (every batch
carries its partition leader epoch), so a damaged checkpoint costs one scan, never the broker.

Not thread-safe, like the log that owns it.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.wire.records import BatchHeader
from reference_broker.log.checkpoint_file import write_text_atomically

logger = logging.getLogger("reference_broker.log")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochFileCache:
    """The epoch entries of one partition, kept in memory and mirrored to `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # True when the file was missing or unreadable: the entries must come from the log.
        self.needs_rebuild = False
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.needs_rebuild = True
            return
        except (OSError, UnicodeDecodeError) as exc:
            logger.error("cannot read leader epoch checkpoint %s (%s); rebuilding it from the "
                         "log", path, exc)
            self.needs_rebuild = True
            return
        try:
            entries = parse_leader_epoch_checkpoint(text)
        except ValueError as exc:
            logger.error("leader epoch checkpoint %s is corrupt (%s); rebuilding it from the "
                         "log", path, exc)
            self.needs_rebuild = True
            return
        for entry in entries:
            self._epochs.append(entry.epoch)
            self._starts.append(entry.start_offset)

    # --- queries ----------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        if not self._epochs:
            return None
        return EpochEntry(self._epochs[-1], self._starts[-1])

    def epoch_entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True)]

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest known epoch <= `epoch`, where `epoch` ended).

        - the latest epoch is still being written: it ends at the log end;
        - otherwise it ended where the first larger epoch starts, answered with the largest
          epoch <= the requested one (KIP-279: the follower then truncates to the smaller of
          this offset and its own end of that epoch);
        - an epoch older than every entry (its data went with the log start) is answered with
          itself and the first entry's start, so the follower replicates from there, as Kafka
          does;
        - an undefined (-1) or larger than latest epoch, or an empty cache: (-1, -1).
        """
        if epoch < 0 or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # --- updates ----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the entries changed.

        The same epoch again at a later offset is the common case (every append) and changes
        nothing. Like Kafka, a new entry that does not follow the latest one (a smaller epoch,
        or an earlier start) wins over what it contradicts: entries with an epoch >= it or a
        start offset >= its start are removed first, with a warning unless only an entry with
        no data (same start offset) went. `flush=False` lets a caller assigning many batches
        write the file once, with `flush()`.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            logger.warning(
                "%s: new leader epoch entry (%d, %d) replaces entries %s that do not precede it",
                self.path, epoch, start_offset, removed[::-1],
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if flush:
            self.flush()
        return True

    def assign_batches(self, headers: Iterable[BatchHeader]) -> None:
        """Record the epochs a leader stamped into replicated batches, writing the file once.
        Batches without an epoch (-1, written by old clients' leaders) leave no entry."""
        changed = False
        for header in headers:
            if header.partition_leader_epoch >= 0:
                changed |= self.assign(
                    header.partition_leader_epoch, header.base_offset, flush=False
                )
        if changed:
            self.flush()

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at `end_offset`: forget epochs that start at or after it."""
        keep = bisect_left(self._starts, end_offset)
        if end_offset >= 0 and keep < len(self._starts):
            del self._epochs[keep:], self._starts[keep:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: the epoch covering it starts there, earlier
        entries go (their data is gone)."""
        covering = bisect_right(self._starts, start_offset) - 1
        if covering < 0 or (covering == 0 and self._starts[0] == start_offset):
            return
        del self._epochs[:covering], self._starts[:covering]
        self._starts[0] = start_offset
        self.flush()

    def clear_and_flush(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.flush()

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry by replaying `(epoch, start_offset)` pairs in log order (the
        batches of the log); negative epochs (batches written without one) are skipped."""
        self._epochs.clear()
        self._starts.clear()
        for epoch, start_offset in entries:
            if epoch >= 0:
                self.assign(epoch, start_offset, flush=False)
        if self._epochs or self.path.exists():  # a new, empty log writes its file at first use
            self.flush()
        self.needs_rebuild = False

    def flush(self) -> None:
        write_text_atomically(self.path, format_leader_epoch_checkpoint(self.epoch_entries()))

    def __repr__(self) -> str:
        entries = ", ".join(f"{e}:{s}" for e, s in zip(self._epochs, self._starts, strict=True))
        return f"LeaderEpochFileCache({self.path.parent.name}, {{{entries}}})"


def format_leader_epoch_checkpoint(entries: list[EpochEntry]) -> str:
    lines = [str(_VERSION), str(len(entries))]
    lines.extend(f"{entry.epoch} {entry.start_offset}" for entry in entries)
    return "\n".join(lines) + "\n"


def parse_leader_epoch_checkpoint(text: str) -> list[EpochEntry]:
    """The entries of a checkpoint's text; ValueError names what is wrong with it."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("missing version or entry count")
    if lines[0].strip() != str(_VERSION):
        raise ValueError(f"unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise ValueError(f"malformed entry count {lines[1]!r}") from None
    if len(lines) - 2 != count:
        raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
    entries: list[EpochEntry] = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2 or not all(f.isdigit() and f.isascii() for f in fields):
            raise ValueError(f"malformed line {line!r}")
        entry = EpochEntry(int(fields[0]), int(fields[1]))
        if entries and (
            entry.epoch <= entries[-1].epoch or entry.start_offset <= entries[-1].start_offset
        ):
            raise ValueError(f"entry {line!r} does not follow the one before it")
        entries.append(entry)
    return entries
