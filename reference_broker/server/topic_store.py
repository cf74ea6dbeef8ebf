"""Durable topic metadata for a broker running without ZooKeeper.

In ZooKeeper mode `/brokers/topics/<t>` and `/config/topics/<t>` hold this; a standalone
broker keeps the same facts (topic id, replica assignment, config overrides) in one JSON file
in its first log dir, replaced atomically (write, fsync, rename) so a crash never leaves half a
file. It also hands out producer-id blocks, persisting each block's end before any id of the
block is used, so a restart never reissues a producer id.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "standalone-metadata.json"
PRODUCER_ID_BLOCK = 1000


@dataclass
class StoredTopic:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    configs: dict[str, str]


class TopicStore:
    def __init__(self, log_dir: Path) -> None:
        self._path = log_dir / FILE_NAME
        self.topics: dict[str, StoredTopic] = {}
        self.cluster_id: str | None = None
        self._producer_id_block_end = 0
        self._next_producer_id = 0
        if self._path.exists():
            self._load()

    def _load(self) -> None:
        data = json.loads(self._path.read_text())
        self.cluster_id = data.get("cluster_id")
        self._producer_id_block_end = int(data.get("producer_id_block_end", 0))
        self._next_producer_id = self._producer_id_block_end
        for name, entry in data.get("topics", {}).items():
            self.topics[name] = StoredTopic(
                name,
                uuid.UUID(entry["id"]),
                {int(p): list(r) for p, r in entry["partitions"].items()},
                dict(entry.get("configs", {})),
            )

    def save(self) -> None:
        data = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": {
                t.name: {
                    "id": str(t.topic_id),
                    "partitions": {str(p): r for p, r in sorted(t.assignment.items())},
                    "configs": t.configs,
                }
                for t in self.topics.values()
            },
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def put(self, topic: StoredTopic) -> None:
        self.topics[topic.name] = topic
        self.save()

    def delete(self, name: str) -> None:
        if self.topics.pop(name, None) is not None:
            self.save()

    def next_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_block_end:
            self._producer_id_block_end = self._next_producer_id + PRODUCER_ID_BLOCK
            self.save()
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid
