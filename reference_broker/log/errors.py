"""Exceptions the log raises, each carrying the Kafka error code the server answers with."""

from __future__ import annotations

from harness.wire.errors import ErrorCode


class LogError(Exception):
    """Base class; `error` is the Kafka error code for the response."""

    error: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRange(LogError):
    """A fetch or ListOffsets asked for an offset outside [log start, log end]."""

    error = ErrorCode.offset_out_of_range

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffset(LogError):
    """A follower append whose batches do not continue the log (Kafka's exception of that name).

    The replica fetcher reacts by truncating or resetting the log, so the offsets are kept.
    """

    def __init__(self, message: str, first_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


class CorruptRecord(LogError):
    """Follower data failed framing or CRC checks."""

    error = ErrorCode.corrupt_message


class CorruptIndex(LogError):
    """An index file failed its sanity check; the segment rebuilds it from the .log file."""


class LogDirError(LogError):
    """A log directory cannot be used: locked by another broker, or belongs to another broker."""

    error = ErrorCode.kafka_storage_error
