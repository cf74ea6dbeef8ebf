"""Kafka's own perf tools and kcat as the perf benchmark runs them: their command lines, the
numbers in their output, and what the brokers spent (CPU, peak RSS) while they ran.

Kept apart from ``bench_perf.py`` (which decides what to run and reports it) so the parsers can
be tested on captured output without starting anything. The tools are Kafka 3.9.2's own classes
from its kafka-tools jar (``org.apache.kafka.tools.*``), run with ``java -cp <Kafka's libs>`` as
``kafka-run-class.sh`` runs them; a tool's output is a line format of its own, parsed here into
numbers, and anything else is an error, not a zero.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"
TOOL_HEAP = "-Xmx512m"  # kafka-run-class.sh gives tools 256 MB; 500k records need a little more
QUIET_LOG4J = ("log4j.rootLogger=WARN, stderr\n"
               "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
               "log4j.appender.stderr.Target=System.err\n"
               "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
               "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
PRODUCER_PROPS = {"linger.ms": "5", "batch.size": "65536", "compression.type": "none"}
"""The producer settings every target gets (besides ``acks``), the tools' and kcat's alike."""


class ToolOutputError(ValueError):
    """A tool's output lacked the line its figures come from: the run means nothing."""


@dataclass(frozen=True)
class ProducerFigures:
    """ProducerPerformance's final summary line."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_ms: float
    max_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float


@dataclass(frozen=True)
class ConsumerFigures:
    """ConsumerPerformance's data line. ``fetch_*`` exclude the group join (rebalance), so they
    are the broker's serving rate, the figure compared."""

    records: int
    mb: float
    rebalance_ms: float
    fetch_ms: float
    fetch_mb_per_s: float
    fetch_records_per_s: float


@dataclass(frozen=True)
class LatencyFigures:
    """EndToEndLatency's summary: one record in flight, produce → consumer poll returns it."""

    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_PRODUCER_FINAL = re.compile(
    rf"^(\d+) records sent, {_NUMBER} records/sec \({_NUMBER} MB/sec\), {_NUMBER} ms avg "
    rf"latency, {_NUMBER} ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
    r"(\d+) ms 99\.9th\.$")
_CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB"
_LATENCY_AVG = re.compile(rf"^Avg latency: {_NUMBER} ms$")
_LATENCY_PERCENTILES = re.compile(r"^Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)$")


def parse_producer(output: str) -> ProducerFigures:
    """The last summary line (the tool also prints a progress line every 5 s, without
    percentiles, which this skips)."""
    for line in reversed(output.splitlines()):
        match = _PRODUCER_FINAL.match(line.strip())
        if match:
            g = match.groups()
            return ProducerFigures(int(g[0]), *(float(x) for x in g[1:]))
    raise ToolOutputError(f"no ProducerPerformance summary line in: {_tail(output)}")


def parse_consumer(output: str) -> ConsumerFigures:
    """The line after the header; its columns are named by the header, not assumed."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith(_CONSUMER_HEADER):
            names = [name.strip() for name in line.split(",")]
            values = dict(zip(names, (v.strip() for v in lines[index + 1].split(",")),
                              strict=False))
            try:
                return ConsumerFigures(
                    records=int(values["data.consumed.in.nMsg"]),
                    mb=float(values["data.consumed.in.MB"]),
                    rebalance_ms=float(values["rebalance.time.ms"]),
                    fetch_ms=float(values["fetch.time.ms"]),
                    fetch_mb_per_s=float(values["fetch.MB.sec"]),
                    fetch_records_per_s=float(values["fetch.nMsg.sec"]))
            except (KeyError, ValueError) as exc:
                raise ToolOutputError(f"ConsumerPerformance data line unreadable ({exc}): "
                                      f"{lines[index + 1]!r}") from exc
    raise ToolOutputError(f"no ConsumerPerformance header and data line in: {_tail(output)}")


def parse_end_to_end(output: str) -> LatencyFigures:
    avg = percentiles = None
    for line in output.splitlines():
        avg = _LATENCY_AVG.match(line.strip()) or avg
        percentiles = _LATENCY_PERCENTILES.match(line.strip()) or percentiles
    if avg is None or percentiles is None:
        raise ToolOutputError(f"no EndToEndLatency summary in: {_tail(output)}")
    p50, p99, p999 = (float(x) for x in percentiles.groups())
    return LatencyFigures(float(avg.group(1)), p50, p99, p999)


def _tail(output: str, chars: int = 600) -> str:
    return repr(output[-chars:]) if output.strip() else "(no output)"


@dataclass(frozen=True)
class Transaction:
    """ProducerPerformance's transactional mode: its transactional id (one per producer, so
    concurrent or successive runs do not fence each other) and how long each transaction lasts."""

    transactional_id: str
    duration_ms: int


def consumer_config(path: Path, isolation_level: str) -> Path:
    """A consumer properties file at ``path`` setting ``isolation.level``."""
    path.write_text(f"isolation.level={isolation_level}\n")
    return path


@dataclass(frozen=True)
class Tools:
    """How to run Kafka's tool classes: ``java``, Kafka's classpath, a quiet log4j config."""

    java: str
    classpath: str
    log4j_config: Path

    def _java(self, main_class: str, *args: str) -> list[str]:
        return [self.java, TOOL_HEAP, "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.log4j_config}", "-cp", self.classpath,
                main_class, *args]

    def producer(self, bootstrap: str, topic: str, records: int, record_bytes: int, acks: str,
                 throughput: int = -1, transaction: Transaction | None = None) -> list[str]:
        """``throughput`` records/s (``-1``: as fast as it goes); with ``transaction``, the
        tool's own transactional mode: it begins a transaction, and commits it on the first
        send once ``transaction.duration_ms`` have passed (and at the end)."""
        props = {"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER_PROPS}
        transactional = ([] if transaction is None else
                         ["--transactional-id", transaction.transactional_id,
                          "--transaction-duration-ms", str(transaction.duration_ms)])
        return self._java(PRODUCER_PERFORMANCE, "--topic", topic, "--num-records", str(records),
                          "--record-size", str(record_bytes), "--throughput", str(throughput),
                          *transactional,
                          "--producer-props", *(f"{k}={v}" for k, v in props.items()))

    def consumer(self, bootstrap: str, topic: str, records: int, group: str,
                 timeout_ms: int = 30_000, config: Path | None = None) -> list[str]:
        """``config``: a consumer properties file (``--consumer.config``, the only way 3.9.2's
        ConsumerPerformance takes a consumer setting such as ``isolation.level``)."""
        extra = [] if config is None else ["--consumer.config", str(config)]
        return self._java(CONSUMER_PERFORMANCE, "--bootstrap-server", bootstrap, "--topic", topic,
                          "--messages", str(records), "--group", group,
                          "--timeout", str(timeout_ms), *extra)

    def end_to_end(self, bootstrap: str, topic: str, records: int, acks: str,
                   record_bytes: int) -> list[str]:
        return self._java(END_TO_END_LATENCY, bootstrap, topic, str(records), acks,
                          str(record_bytes))


def kcat_producer(kcat: str, bootstrap: str, topic: str, acks: str, lines: Path) -> list[str]:
    """kcat producing one record per line of ``lines`` (librdkafka, the same settings)."""
    settings = [f"-X{k}={v}" for k, v in {"acks": acks, **PRODUCER_PROPS}.items()]
    return [kcat, "-P", "-q", "-b", bootstrap, "-t", topic, "-l", *settings, str(lines)]


def kcat_consumer(kcat: str, bootstrap: str, topic: str, records: int) -> list[str]:
    """kcat reading ``records`` from the beginning, printing one byte per record (so the count
    can be checked) and nothing else.

    librdkafka stops fetching a partition once ``queued.min.messages`` (100,000) of it wait
    to be printed. kcat's producer fills partitions unevenly (measured: 39k-133k of 500k
    records), so with the default a run paused ~0.8 s on whichever partition went over — on
    either broker: 3-broker clusters took 1.1 s with the default and 0.26-0.60 s with a
    million. The figure is then the broker's, not that pause's.
    """
    return [kcat, "-C", "-q", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c",
            str(records), "-f", ".", "-X", "fetch.wait.max.ms=100",
            "-X", "queued.min.messages=1000000"]


def record_lines(path: Path, records: int, record_bytes: int) -> Path:
    """A file of ``records`` lines, each ``record_bytes`` long with its newline (the newline
    is the delimiter kcat strips, so a record is ``record_bytes - 1`` bytes of payload)."""
    line = (b"x" * (record_bytes - 1)) + b"\n"
    with path.open("wb") as out:
        chunk = line * 10_000
        for _ in range(records // 10_000):
            out.write(chunk)
        out.write(line * (records % 10_000))
    return path


@dataclass(frozen=True)
class Usage:
    """What one broker process spent while a scenario ran."""

    pid: int
    cpu_s: float
    peak_rss_mb: float


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class ResourceSampler:
    """CPU-seconds (a delta of /proc stat counters, exact) and peak RSS (sampled every
    ``interval`` s on a thread, so a peak shorter than that can be missed) of broker processes
    over one scenario. A context manager; :attr:`usage` is filled on exit."""

    def __init__(self, pids: list[int], interval: float = 0.1) -> None:
        self.pids = pids
        self.interval = interval
        self.usage: list[Usage] = []
        self._peak = dict.fromkeys(pids, 0.0)
        self._cpu_start: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample_once(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(OSError):  # the broker exited: the scenario fails anyway
                self._peak[pid] = max(self._peak[pid], rss_mb(pid))

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample_once()

    def __enter__(self) -> ResourceSampler:
        self._cpu_start = {pid: cpu_seconds(pid) for pid in self.pids}
        self._sample_once()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample_once()
        self.usage = [Usage(pid, cpu_seconds(pid) - self._cpu_start[pid], self._peak[pid])
                      for pid in self.pids]
