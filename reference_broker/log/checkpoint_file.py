"""Kafka's offset checkpoint files: recovery points, log start offsets and high watermarks.

Text, as Kafka writes them, so Kafka's own tools and engineers can read ours:

    0                 <- version
    2                 <- number of entries
    my-topic 0 1234   <- topic, partition, offset
    my-topic 1 99

Written atomically (temp file, fsync, rename, fsync of the directory): a crash leaves either the
old checkpoint or the new one. A damaged file is reported and treated as empty, which only
costs a longer recovery; it never stops the broker.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger("reference_broker.log")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
_VERSION = 0


def write_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [str(_VERSION), str(len(offsets))]
    lines.extend(f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items())
    write_text_atomically(path, "\n".join(lines) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """Temp file, fsync, rename, fsync of the directory: readers see the old text or the new."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The entries of a checkpoint file; empty when the file is missing or damaged."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        return _parse(text)
    except ValueError as exc:
        logger.error("ignoring malformed checkpoint file %s: %s", path, exc)
        return {}


def _parse(text: str) -> dict[tuple[str, int], int]:
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("missing version or entry count")
    if int(lines[0]) != _VERSION:
        raise ValueError(f"unsupported version {lines[0]!r}")
    count = int(lines[1])
    entries = lines[2:]
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    offsets: dict[tuple[str, int], int] = {}
    for line in entries:
        fields = line.split(" ")
        if len(fields) != 3:
            raise ValueError(f"malformed line {line!r}")
        topic, partition, offset = fields
        offsets[(topic, int(partition))] = int(offset)
    return offsets


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
