"""Broker configuration: Kafka's server.properties key names, types, defaults and validation.

Every key is declared once in `DEFINITIONS` with its parser and what is allowed, so an invalid
value produces one line naming the key, the value and the allowed range, and an unknown key a
warning naming it — the behaviour operators know from Kafka's own KafkaConfig.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("reference_broker.config")

MAX_LONG = 2**63 - 1
MAX_INT = 2**31 - 1


class ConfigError(ValueError):
    def __init__(self, key: str, value: str, allowed: str) -> None:
        super().__init__(f"Invalid value {value!r} for configuration {key}: {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed


@dataclass(frozen=True)
class Definition:
    parse: Callable[[str], Any]
    default: Any
    allowed: str
    doc: str


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if not low <= value <= high:
            raise ValueError
        return value

    return parse


def parse_ratio(raw: str) -> float:
    """A number in [0, 1] (a broker's or a topic's min cleanable ratio); ValueError if not."""
    value = float(raw.strip())
    if not 0.0 <= value <= 1.0:
        raise ValueError
    return value


def _bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError
    return lowered == "true"


def _string(raw: str) -> str:
    return raw.strip()


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw.strip() not in options:
            raise ValueError
        return raw.strip()

    return parse


_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int


def _listeners(raw: str) -> tuple[Endpoint, ...]:
    endpoints = []
    for part in raw.split(","):
        match = _LISTENER.match(part.strip())
        if match is None:
            raise ValueError
        port = int(match["port"])
        if port > 65535:
            raise ValueError
        endpoints.append(Endpoint(match["name"], match["host"].strip("[]"), port))
    if not endpoints:
        raise ValueError
    return tuple(endpoints)


def _dirs(raw: str) -> tuple[Path, ...]:
    dirs = tuple(Path(p.strip()) for p in raw.split(",") if p.strip())
    if not dirs:
        raise ValueError
    return dirs


def _peer_addresses(raw: str) -> dict[int, tuple[str, int]]:
    peers: dict[int, tuple[str, int]] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        broker, _, address = part.strip().partition("=")
        host, _, port = address.rpartition(":")
        if not host or not 0 <= int(port) <= 65535:
            raise ValueError
        peers[int(broker)] = (host.strip("[]"), int(port))
    return peers


_LISTENERS_ALLOWED = "a comma-separated list of NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092"

DEFINITIONS: dict[str, Definition] = {
    "broker.id": Definition(_int(0, MAX_INT), 0, "an integer in [0, 2147483647]",
                            "this broker's id in the cluster"),
    "listeners": Definition(_listeners, _listeners("PLAINTEXT://127.0.0.1:9092"),
                            _LISTENERS_ALLOWED, "addresses the broker binds"),
    "advertised.listeners": Definition(_listeners, None, _LISTENERS_ALLOWED,
                                       "addresses given to clients; defaults to listeners"),
    "log.dirs": Definition(_dirs, (Path("/tmp/reference-broker-logs"),),
                           "a comma-separated list of directories", "where partition logs live"),
    "num.partitions": Definition(_int(1, MAX_INT), 1, "an integer >= 1",
                                 "partitions of auto-created topics"),
    "default.replication.factor": Definition(_int(1, 32767), 1, "an integer in [1, 32767]",
                                             "replicas of auto-created topics"),
    "auto.create.topics.enable": Definition(_bool, True, "true or false",
                                            "create a topic on first metadata/produce request"),
    "message.max.bytes": Definition(_int(0, MAX_INT), 1048588, "an integer >= 0",
                                    "largest record batch accepted"),
    "socket.request.max.bytes": Definition(_int(1, MAX_INT), 104857600, "an integer >= 1",
                                           "largest request frame accepted"),
    "log.segment.bytes": Definition(_int(14, MAX_INT), 1073741824, "an integer >= 14",
                                    "segment size that triggers a roll"),
    "log.roll.ms": Definition(_int(1, MAX_LONG), 7 * 24 * 3600 * 1000, "an integer >= 1",
                              "segment age that triggers a roll"),
    "log.roll.hours": Definition(_int(1, MAX_INT), 168, "an integer >= 1",
                                 "segment age in hours (log.roll.ms wins)"),
    "log.retention.ms": Definition(_int(-1, MAX_LONG), None, "-1 (unlimited) or an integer >= 0",
                                   "age after which segments are deleted"),
    "log.retention.minutes": Definition(_int(-1, MAX_INT), None, "-1 or an integer >= 0",
                                        "retention in minutes (log.retention.ms wins)"),
    "log.retention.hours": Definition(_int(-1, MAX_INT), 168, "-1 or an integer >= 0",
                                      "retention in hours (lowest precedence)"),
    "log.retention.bytes": Definition(_int(-1, MAX_LONG), -1, "-1 (unlimited) or an integer >= 0",
                                      "partition size above which old segments are deleted"),
    "log.retention.check.interval.ms": Definition(_int(1, MAX_LONG), 300000, "an integer >= 1",
                                                  "how often retention runs"),
    "log.flush.interval.messages": Definition(_int(1, MAX_LONG), MAX_LONG, "an integer >= 1",
                                              "fsync after this many messages"),
    "log.flush.interval.ms": Definition(_int(0, MAX_LONG), None, "an integer >= 0",
                                        "fsync when data is older than this"),
    "log.flush.scheduler.interval.ms": Definition(_int(1, MAX_LONG), 1000, "an integer >= 1",
                                                  "how often the time-based flush is checked"),
    "log.index.interval.bytes": Definition(_int(0, MAX_INT), 4096, "an integer >= 0",
                                           "bytes between offset index entries"),
    "log.message.timestamp.type": Definition(_choice("CreateTime", "LogAppendTime"), "CreateTime",
                                             "CreateTime or LogAppendTime", "timestamp owner"),
    "log.cleanup.policy": Definition(_choice("delete", "compact", "compact,delete",
                                             "delete,compact"), "delete",
                                     "delete, compact or compact,delete", "default cleanup"),
    "min.insync.replicas": Definition(_int(1, MAX_INT), 1, "an integer >= 1",
                                      "ISR size acks=all needs"),
    "unclean.leader.election.enable": Definition(_bool, False, "true or false",
                                                 "elect out-of-sync replicas (loses data)"),
    "zookeeper.connect": Definition(_string, None, "host:port[,host:port...][/chroot]",
                                    "ZooKeeper ensemble (cluster mode)"),
    "zookeeper.session.timeout.ms": Definition(_int(1, MAX_INT), 18000, "an integer >= 1",
                                               "ZooKeeper session timeout"),
    "num.network.threads": Definition(_int(1, MAX_INT), 3, "an integer >= 1",
                                      "accepted for compatibility; asyncio serves all sockets"),
    "num.io.threads": Definition(_int(1, MAX_INT), 8, "an integer >= 1",
                                 "accepted for compatibility; one event loop handles requests"),
    "cluster.id": Definition(_string, None, "a string", "cluster id when no ZooKeeper is used"),
    "group.initial.rebalance.delay.ms": Definition(_int(0, MAX_INT), 3000, "an integer >= 0",
                                                   "wait for more members before the first "
                                                   "rebalance of an empty group"),
    "group.min.session.timeout.ms": Definition(_int(0, MAX_INT), 6000, "an integer >= 0",
                                               "smallest session timeout a member may ask for"),
    "group.max.session.timeout.ms": Definition(_int(0, MAX_INT), 1800000, "an integer >= 0",
                                               "largest session timeout a member may ask for"),
    "group.max.size": Definition(_int(1, MAX_INT), MAX_INT, "an integer >= 1",
                                 "members one group may hold"),
    "offsets.topic.num.partitions": Definition(_int(1, MAX_INT), 50, "an integer >= 1",
                                               "partitions of __consumer_offsets"),
    # Kafka's default is 3, which a single reference broker could never satisfy; cluster setups
    # set it explicitly (creation fails with COORDINATOR_NOT_AVAILABLE while brokers are short).
    "offsets.topic.replication.factor": Definition(_int(1, 32767), 1, "an integer in [1, 32767]",
                                                   "replicas of __consumer_offsets"),
    "offsets.topic.segment.bytes": Definition(_int(14, MAX_INT), 104857600, "an integer >= 14",
                                              "segment size of __consumer_offsets"),
    "offsets.retention.minutes": Definition(_int(1, MAX_INT), 10080, "an integer >= 1",
                                            "how long an empty group keeps its offsets"),
    "offsets.retention.check.interval.ms": Definition(_int(1, MAX_LONG), 600000,
                                                      "an integer >= 1",
                                                      "how often expired offsets are removed"),
    "offset.metadata.max.bytes": Definition(_int(0, MAX_INT), 4096, "an integer >= 0",
                                            "largest metadata string of a committed offset"),
    "transaction.state.log.num.partitions": Definition(_int(1, MAX_INT), 50, "an integer >= 1",
                                                       "partitions of __transaction_state"),
    # Kafka's defaults are 3 replicas and a min ISR of 2, which a single reference broker could
    # never satisfy; as for the offsets topic, cluster setups set them explicitly.
    "transaction.state.log.replication.factor": Definition(_int(1, 32767), 1,
                                                           "an integer in [1, 32767]",
                                                           "replicas of __transaction_state"),
    "transaction.state.log.min.isr": Definition(_int(1, MAX_INT), 1, "an integer >= 1",
                                                "min.insync.replicas of __transaction_state"),
    "transaction.state.log.segment.bytes": Definition(_int(1, MAX_INT), 104857600,
                                                      "an integer >= 1",
                                                      "segment size of __transaction_state"),
    "transaction.max.timeout.ms": Definition(_int(1, MAX_INT), 900000, "an integer >= 1",
                                             "largest transaction timeout a producer may ask "
                                             "for (INVALID_TRANSACTION_TIMEOUT above it)"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Definition(
        _int(1, MAX_INT), 10000, "an integer >= 1",
        "how often transactions past their timeout are aborted"),
    "request.timeout.ms": Definition(_int(0, MAX_INT), 30000, "an integer >= 0",
                                     "how long a transaction state write waits for the ISR"),
    "log.cleaner.enable": Definition(_bool, True, "true or false",
                                     "compact topics with cleanup.policy=compact"),
    "log.cleaner.backoff.ms": Definition(_int(1, MAX_LONG), 15000, "an integer >= 1",
                                         "pause between cleaner passes"),
    "log.cleaner.min.cleanable.ratio": Definition(parse_ratio, 0.5, "a number in [0, 1]",
                                                  "the share of a compacted log's cleanable "
                                                  "bytes not yet cleaned that starts a "
                                                  "cleaning (topic override: "
                                                  "min.cleanable.dirty.ratio)"),
    "log.segment.delete.delay.ms": Definition(_int(0, MAX_LONG), 60000, "an integer >= 0",
                                              "Kafka's wait before a deleted segment's files "
                                              "go (topic override: file.delete.delay.ms); "
                                              "here they are unlinked at once, and the open "
                                              "descriptors of in-flight reads keep them "
                                              "readable, which is what the wait protects"),
    "log.cleaner.delete.retention.ms": Definition(_int(0, MAX_LONG), 86400000, "an integer >= 0",
                                                  "how long the cleaner keeps tombstones "
                                                  "(topic override: delete.retention.ms)"),
    # --- cluster mode (zookeeper.connect set) ---
    "zookeeper.connection.timeout.ms": Definition(_int(1, MAX_INT), 18000, "an integer >= 1",
                                                  "wait this long for the first ZooKeeper "
                                                  "connection before giving up"),
    "inter.broker.listener.name": Definition(_string, None, "a listener name from listeners",
                                             "listener brokers use to reach each other; "
                                             "defaults to the first listener"),
    "broker.peer.addresses": Definition(_peer_addresses, {}, "a comma-separated list of "
                                        "ID=host:port, e.g. 1=127.0.0.1:19092",
                                        "where this broker reaches peer brokers instead of "
                                        "their registered address (the harness points these "
                                        "at per-link proxies)"),
    "replica.lag.time.max.ms": Definition(_int(1, MAX_LONG), 30000, "an integer >= 1",
                                          "a follower not caught up for this long leaves "
                                          "the ISR"),
    "replica.fetch.wait.max.ms": Definition(_int(0, MAX_INT), 500, "an integer >= 0",
                                            "max wait of a follower's fetch"),
    "replica.fetch.min.bytes": Definition(_int(1, MAX_INT), 1, "an integer >= 1",
                                          "min bytes of a follower's fetch"),
    "replica.fetch.max.bytes": Definition(_int(0, MAX_INT), 1048576, "an integer >= 0",
                                          "bytes a follower asks for per partition"),
    "replica.fetch.backoff.ms": Definition(_int(0, MAX_INT), 1000, "an integer >= 0",
                                           "pause after a failed follower fetch"),
    "replica.socket.timeout.ms": Definition(_int(1, MAX_INT), 30000, "an integer >= 1",
                                            "request timeout of follower fetches"),
    "replica.high.watermark.checkpoint.interval.ms": Definition(
        _int(1, MAX_LONG), 5000, "an integer >= 1",
        "how often high watermarks are written to replication-offset-checkpoint"),
    "controller.socket.timeout.ms": Definition(_int(1, MAX_INT), 30000, "an integer >= 1",
                                               "request timeout of controller requests"),
    "auto.leader.rebalance.enable": Definition(_bool, True, "true or false",
                                               "move leadership back to preferred replicas"),
    "leader.imbalance.check.interval.seconds": Definition(_int(1, MAX_LONG), 300,
                                                          "an integer >= 1",
                                                          "how often the controller checks "
                                                          "leader imbalance"),
    "leader.imbalance.per.broker.percentage": Definition(_int(0, 100), 10,
                                                         "an integer in [0, 100]",
                                                         "imbalance that triggers a "
                                                         "preferred-replica election"),
    "controlled.shutdown.enable": Definition(_bool, True, "true or false",
                                             "move leadership away before stopping"),
    "controlled.shutdown.max.retries": Definition(_int(0, MAX_INT), 3, "an integer >= 0",
                                                  "attempts of a controlled shutdown"),
    "controlled.shutdown.retry.backoff.ms": Definition(_int(0, MAX_LONG), 5000,
                                                       "an integer >= 0",
                                                       "pause between attempts"),
    "delete.topic.enable": Definition(_bool, True, "true or false",
                                      "DeleteTopics is allowed"),
    "offsets.commit.required.acks": Definition(_int(-1, 32767), -1, "-1 or an integer >= 0",
                                               "acks an offset commit waits for"),
    "offsets.commit.timeout.ms": Definition(_int(1, MAX_INT), 5000, "an integer >= 1",
                                            "how long an offset commit waits for the ISR"),
    "group.coordinator.load.delay.ms": Definition(_int(0, MAX_INT), 0, "an integer >= 0",
                                                  "TEST ONLY: wait this long before replaying "
                                                  "an offsets partition, so "
                                                  "COORDINATOR_LOAD_IN_PROGRESS is observable"),
}

# Keys Kafka also accepts whose meaning the reference broker does not model; they are accepted
# silently so stock server.properties files load without noise.
IGNORED = frozenset({
    "num.recovery.threads.per.data.dir", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "transactional.id.expiration.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "listener.security.protocol.map",
})


class KafkaConfig(Mapping[str, Any]):
    """Parsed broker configuration; `config["log.dirs"]` etc. with defaults applied."""

    def __init__(self, props: Mapping[str, str]) -> None:
        values: dict[str, Any] = {k: d.default for k, d in DEFINITIONS.items()}
        self.unknown: list[str] = []
        for key, raw in props.items():
            definition = DEFINITIONS.get(key)
            if definition is None:
                if key not in IGNORED:
                    self.unknown.append(key)
                continue
            try:
                values[key] = definition.parse(raw)
            except (ValueError, TypeError):
                raise ConfigError(key, raw, definition.allowed) from None
        self._values = values
        self._explicit = frozenset(props)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def is_set(self, key: str) -> bool:
        return key in self._explicit

    @property
    def broker_id(self) -> int:
        return self["broker.id"]

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        return self["log.dirs"]

    @property
    def listeners(self) -> tuple[Endpoint, ...]:
        return self["listeners"]

    @property
    def advertised_listeners(self) -> tuple[Endpoint, ...]:
        return self["advertised.listeners"] or self["listeners"]

    @property
    def zookeeper_mode(self) -> bool:
        return bool(self["zookeeper.connect"])

    @property
    def inter_broker_listener(self) -> Endpoint:
        """The advertised endpoint peers and the controller use to reach this broker."""
        name = self["inter.broker.listener.name"]
        for endpoint in self.advertised_listeners:
            if name is None or endpoint.listener == name:
                return endpoint
        raise ConfigError("inter.broker.listener.name", name,
                          "the name of one of the advertised listeners")

    @property
    def retention_ms(self) -> int:
        if self["log.retention.ms"] is not None:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] is not None:
            return self["log.retention.minutes"] * 60_000
        hours = self["log.retention.hours"]
        return -1 if hours < 0 else hours * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self.is_set("log.roll.ms") or not self.is_set("log.roll.hours"):
            return self["log.roll.ms"]
        return self["log.roll.hours"] * 3_600_000

    def describe(self) -> Iterable[tuple[str, Any, bool]]:
        """(key, value, is_default) for DescribeConfigs of the broker resource."""
        for key, value in self._values.items():
            yield key, value, key not in self._explicit


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: `key=value` or `key: value`, # and ! comments, \\ continuations."""
    props: dict[str, str] = {}
    logical = ""
    for raw_line in text.splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        if match is None:
            props[logical] = ""
        else:
            props[match[1]] = match[2]
        logical = ""
    return props


def load(path: Path, overrides: Mapping[str, str] | None = None) -> KafkaConfig:
    props = parse_properties(path.read_text())
    props.update(overrides or {})
    config = KafkaConfig(props)
    for key in config.unknown:
        log.warning("Unknown configuration key %s (ignored)", key)
    return config
