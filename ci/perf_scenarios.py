"""The perf benchmark's scenarios and results as plain data: what each scenario runs (which
tool, how many clients, the topic layout) and what one target measured in it.

The scenarios are Kafka's published benchmark scaled to one 2-core machine: 100-byte records,
a 6-partition topic, async producers; 1 and 3 producers, replicas 1 and 3 with acks=1 and
acks=all, 1 and 6 partitions, 1 and 3 consumers, a producer and a consumer together, latency
(end-to-end, and produce acknowledgement at a fixed rate), 1 KB records, kcat producing
and consuming as a non-JVM cross-check, and transactions: a transactional producer committing
every 100 ms (RF 1 and RF 3) and a read_committed consumer of a topic written that way. No I/O
here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from perf_tools import Usage


class Target(StrEnum):
    REFERENCE = "reference"
    APACHE_KAFKA = "apache-kafka"
    TANSU = "tansu"


class Work(StrEnum):
    """Which tool, doing what; the value names the profile file of a profiled scenario."""

    PRODUCE = "produce"                  # ProducerPerformance × clients, as fast as they go
    FIXED_RATE = "fixed-rate"            # one ProducerPerformance at ``rate`` records/s
    CONSUME = "consume"                  # ConsumerPerformance × clients, each its own group
    PRODUCE_CONSUME = "produce-consume"  # one of each on one fresh topic, at once
    LATENCY = "latency"                  # EndToEndLatency: one record in flight at a time
    KCAT_PRODUCE = "kcat-produce"
    KCAT_CONSUME = "kcat-consume"


class Isolation(StrEnum):
    """A consumer's ``isolation.level``: read_committed reads up to the last stable offset and
    drops aborted transactions' records, so the broker's LSO, transaction index and the
    control batches between the records are all on its path."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


class Measure(StrEnum):
    PRODUCE_RPS = "produce records/s"
    PRODUCE_MBPS = "produce MB/s"
    CONSUME_RPS = "consume records/s"
    CONSUME_MBPS = "consume MB/s"
    AVG_MS = "avg latency ms"
    P50_MS = "p50 latency ms"
    P99_MS = "p99 latency ms"

    @property
    def throughput(self) -> bool:
        return self in (Measure.PRODUCE_RPS, Measure.CONSUME_RPS)


LATENCY_RECORDS = 2_000      # EndToEndLatency: one at a time, so few
FIXED_RATE = 10_000          # records/s for the fixed-rate scenario
FIXED_RATE_RECORDS = 50_000  # five seconds of it
TRANSACTION_MS = 100         # a transactional producer commits after this long (10 per second)


@dataclass(frozen=True)
class Scenario:
    name: str
    work: Work
    what: str
    clients: int = 1
    partitions: int = 6
    replicas: int = 1
    acks: str = "1"
    record_bytes: int = 100
    records_scale: float = 1.0
    records_cap: int | None = None
    rate: int = -1
    transaction_ms: int = 0
    """A producer's transactions last this long (ProducerPerformance's
    ``--transaction-duration-ms``; it commits on the first send after that); a consume
    scenario's topic is written that way. 0: no transactions."""
    isolation: Isolation = Isolation.READ_UNCOMMITTED

    @property
    def transactional(self) -> bool:
        return self.transaction_ms > 0

    @property
    def source_key(self) -> tuple[int, int, int, int]:
        """What a topic's records look like to a consumer: a consume scenario may read a topic
        that a produce scenario of the same key wrote (partitions, replicas, record size, and
        whether it was written in transactions — the control batches and the LSO depend on
        it). acks is left out: it changes when a record is acknowledged, not the records."""
        return (self.partitions, self.replicas, self.record_bytes, self.transaction_ms)

    def records(self, base: int) -> int:
        """Records per client given ``--records``."""
        scaled = max(1, int(base * self.records_scale))
        return min(scaled, self.records_cap) if self.records_cap else scaled

    @property
    def headline(self) -> Measure:
        """The figure the summary shows and the goal judges."""
        if self.work in (Work.LATENCY, Work.FIXED_RATE):
            return Measure.P99_MS
        if self.work in (Work.CONSUME, Work.KCAT_CONSUME):
            return Measure.CONSUME_RPS
        return Measure.PRODUCE_RPS


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("produce-1", Work.PRODUCE, "1 producer, 6 partitions, RF 1, acks=1"),
    Scenario("produce-3", Work.PRODUCE, "3 producers at once, 6 partitions, RF 1, acks=1",
             clients=3),
    Scenario("acks-all-rf1", Work.PRODUCE, "1 producer, 6 partitions, RF 1, acks=all",
             acks="all"),
    Scenario("rf3-acks1", Work.PRODUCE, "1 producer, 6 partitions, RF 3, acks=1", replicas=3),
    Scenario("rf3-acks-all", Work.PRODUCE, "1 producer, 6 partitions, RF 3, acks=all",
             replicas=3, acks="all"),
    Scenario("partitions-1", Work.PRODUCE, "1 producer, 1 partition, RF 1, acks=1",
             partitions=1),
    Scenario("produce-1kb", Work.PRODUCE, "1 producer, 1 KB records (a fifth as many)",
             record_bytes=1024, records_scale=0.2),
    Scenario("consume-1", Work.CONSUME, "1 consumer reads the first half of the 6-partition "
             "topic"),
    Scenario("consume-3", Work.CONSUME, "3 consumers at once, each its own group, each reads "
             "the first half", clients=3),
    Scenario("produce-consume", Work.PRODUCE_CONSUME, "1 producer and 1 consumer at once"),
    Scenario("latency-e2e", Work.LATENCY, "EndToEndLatency, 1 partition, acks=1, one record "
             "in flight", partitions=1, records_cap=LATENCY_RECORDS),
    Scenario("latency-fixed-rate", Work.FIXED_RATE, f"produce ack latency at {FIXED_RATE:,} "
             "records/s, 6 partitions, acks=1", records_cap=FIXED_RATE_RECORDS, rate=FIXED_RATE),
    Scenario("kcat-produce", Work.KCAT_PRODUCE, "kcat -P, 6 partitions, acks=1, wall clock"),
    Scenario("kcat-consume", Work.KCAT_CONSUME, "kcat -C, the first half from the beginning, wall "
             "clock"),
    # Transactions need idempotence, and idempotence acks=all: the baseline is acks-all-rf1.
    Scenario("txn-produce", Work.PRODUCE, f"1 transactional producer, {TRANSACTION_MS} ms "
             "transactions, 6 partitions, RF 1, acks=all", acks="all",
             transaction_ms=TRANSACTION_MS),
    Scenario("txn-rf3", Work.PRODUCE, f"1 transactional producer, {TRANSACTION_MS} ms "
             "transactions, 6 partitions, RF 3, acks=all", replicas=3, acks="all",
             transaction_ms=TRANSACTION_MS),
    Scenario("txn-consume", Work.CONSUME, "1 read_committed consumer reads the first half of "
             f"the 6-partition topic written in {TRANSACTION_MS} ms transactions", acks="all",
             transaction_ms=TRANSACTION_MS, isolation=Isolation.READ_COMMITTED),
)


@dataclass
class Outcome:
    """What one target measured in one scenario, or why it could not apply."""

    scenario: str
    target: Target
    not_applicable: str = ""
    failed: str = ""
    figures: dict[Measure, float] = field(default_factory=dict)
    records: int = 0
    seconds: float = 0.0
    usage: list[Usage] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # each round's headline, with --rounds
    topic_records: int = 0  # what the topic held when a consume scenario read ``records``

    @property
    def cpu_s(self) -> float:
        return sum(u.cpu_s for u in self.usage)

    @property
    def cpu_s_per_million(self) -> float | None:
        return self.cpu_s / (self.records / 1e6) if self.records else None

    @property
    def peak_rss_mb(self) -> list[float]:
        return [u.peak_rss_mb for u in self.usage]

    def summary(self) -> str:
        if self.not_applicable:
            return f"n/a ({self.not_applicable})"
        if self.failed:
            return f"FAILED: {self.failed}"
        shown = ", ".join(f"{value:,.1f} {m.value}" for m, value in self.figures.items())
        return f"{shown}; brokers {self.cpu_s:.1f} CPU-s"

    def as_json(self) -> dict[str, object]:
        return {"scenario": self.scenario, "target": str(self.target),
                "not_applicable": self.not_applicable or None, "failed": self.failed or None,
                "figures": {str(m): v for m, v in self.figures.items()},
                "records": self.records, "seconds": self.seconds,
                "broker_cpu_s": self.cpu_s, "broker_cpu_s_per_million_records":
                self.cpu_s_per_million, "broker_peak_rss_mb": self.peak_rss_mb,
                "round_headlines": self.rounds or None,
                "topic_records": self.topic_records or None}


def median_round(scenario: Scenario, rounds: list[Outcome]) -> Outcome:
    """One target's rounds of one scenario as one outcome: the round whose headline figure is
    the median (the lower middle of an even count), carrying every round's headline. A short
    measurement — a consumer reads 500,000 records in half a second — can double or halve on
    a single wait of the tool's own (a 500 ms fetch wait, a GC pause); the median of rounds
    interleaved across targets is a figure that one stall cannot decide. A round that failed
    or did not apply decides the whole: it is returned as it is."""
    if not rounds:
        raise ValueError(f"no rounds of {scenario.name}")
    spoiled = next((r for r in rounds if r.failed or r.not_applicable), None)
    if spoiled is not None:
        return spoiled
    measure = scenario.headline
    ordered = sorted(rounds, key=lambda r: r.figures.get(measure, 0.0))
    chosen = ordered[(len(ordered) - 1) // 2]
    return replace(chosen, rounds=[r.figures.get(measure, 0.0) for r in rounds])
