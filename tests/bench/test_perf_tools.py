"""The perf benchmark's readers of Kafka's tool output (on lines captured from Kafka 3.9.2's
own tools run against the reference broker), its option checks, and its resource sampler."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_perf import Bench, main, parse_args, profile_path
from perf_report import shapes, summary_rows
from perf_scenarios import (
    SCENARIOS,
    TRANSACTION_MS,
    Isolation,
    Measure,
    Outcome,
    Scenario,
    Target,
    Work,
    median_round,
)
from perf_tools import (
    ResourceSampler,
    ToolOutputError,
    Tools,
    Usage,
    cpu_seconds,
    parse_consumer,
    parse_end_to_end,
    parse_producer,
    record_lines,
)
from rich.console import Console

from harness.waiting import wait_for

PRODUCER_OUTPUT = (
    "99841 records sent, 19968.2 records/sec (1.90 MB/sec), 1402.3 ms avg latency, "
    "2410.0 ms max latency.\n"
    "200000 records sent, 123076.923077 records/sec (11.74 MB/sec), 447.29 ms avg latency, "
    "758.00 ms max latency, 451 ms 50th, 728 ms 95th, 755 ms 99th, 758 ms 99.9th.\n")
CONSUMER_OUTPUT = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
    "2026-11-25 14:49:31:987, 2026-11-25 14:49:35:988, 19.0735, 4.7672, 200000, 49987.5031, "
    "3535, 466, 40.9302, 429184.5494\n")
LATENCY_OUTPUT = (
    'Topic "t2" does not exist. Will create topic with 1 partition(s) and replication factor = 1\n'
    "0\t75.708667\n"
    "Avg latency: 6.0535 ms\n"
    "Percentiles: 50th = 5, 99th = 20, 99.9th = 75\n")


def test_producer_summary_is_the_final_line_not_the_progress_line() -> None:
    figures = parse_producer(PRODUCER_OUTPUT)
    assert figures.records == 200_000
    assert figures.records_per_s == pytest.approx(123076.923077)
    assert figures.mb_per_s == pytest.approx(11.74)
    assert (figures.avg_ms, figures.p50_ms, figures.p99_ms, figures.p999_ms) == (
        447.29, 451, 755, 758)


def test_consumer_figures_come_from_the_named_columns() -> None:
    figures = parse_consumer("some warning\n" + CONSUMER_OUTPUT)
    assert figures.records == 200_000
    assert figures.rebalance_ms == 3535
    assert figures.fetch_ms == 466
    assert figures.fetch_records_per_s == pytest.approx(429184.5494)
    assert figures.fetch_mb_per_s == pytest.approx(40.9302)


def test_end_to_end_latency_summary() -> None:
    figures = parse_end_to_end(LATENCY_OUTPUT)
    assert (figures.avg_ms, figures.p50_ms, figures.p99_ms, figures.p999_ms) == (
        6.0535, 5, 20, 75)


@pytest.mark.parametrize("parse, output", [
    (parse_producer, PRODUCER_OUTPUT.splitlines()[0]),  # progress only: no percentiles
    (parse_consumer, CONSUMER_OUTPUT.splitlines()[0]),  # header without its data line
    (parse_consumer, CONSUMER_OUTPUT.replace("429184.5494", "lots")),
    (parse_end_to_end, "Avg latency: 6.0535 ms\n"),
    (parse_producer, ""),
])
def test_output_without_its_figures_is_an_error_not_a_zero(parse, output) -> None:
    with pytest.raises(ToolOutputError):
        parse(output)


@pytest.mark.parametrize("argv, complaint", [
    (["--records", "5"], "--records must be >= 10"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--targets", "reference,redpanda"], "unknown: redpanda"),
    (["--targets", " , "], "got none"),
    (["--scenarios", "produce-1,produce-9"], "unknown: produce-9"),
    (["--profile", "txn-rf3"], "unknown: txn-rf3"),  # 3 replicas: not on a standalone broker
])
def test_bad_options_exit_2_with_what_is_wrong(argv, complaint, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err


def test_options_keep_the_benchmark_order() -> None:
    args = parse_args(["--targets", "tansu,reference", "--scenarios", "consume-1,produce-1"])
    assert args.targets == [Target.REFERENCE, Target.TANSU]
    assert args.scenarios == ["produce-1", "consume-1"]
    assert args.profile == ["produce-1", "consume-1"]
    assert parse_args(["--profile", "txn-consume,txn-produce"]).profile == [
        "txn-produce", "txn-consume"]  # the writer before its reader


def test_profiles_keep_their_file_names_and_others_are_named_by_scenario() -> None:
    by = {s.name: s for s in SCENARIOS}
    assert [profile_path(by[n]).name for n in ("produce-1", "consume-1", "txn-consume")] == [
        "perf-profile-reference-produce.txt", "perf-profile-reference-consume.txt",
        "perf-profile-reference-txn-consume.txt"]


def test_scenarios_cover_the_issue_and_scale_their_records() -> None:
    names = {s.name for s in SCENARIOS}
    assert len(names) == len(SCENARIOS)
    assert {s.clients for s in SCENARIOS if s.work is Work.PRODUCE} == {1, 3}
    assert {s.clients for s in SCENARIOS if s.work is Work.CONSUME} == {1, 3}
    assert {(s.replicas, s.acks) for s in SCENARIOS if s.work is Work.PRODUCE} >= {
        (1, "1"), (1, "all"), (3, "1"), (3, "all")}
    assert {s.partitions for s in SCENARIOS} == {1, 6}
    assert {s.record_bytes for s in SCENARIOS} == {100, 1024}
    one_kb = next(s for s in SCENARIOS if s.record_bytes == 1024)
    assert one_kb.records(500_000) == 100_000
    assert Scenario("x", Work.LATENCY, "", records_cap=2000).records(500_000) == 2000


def test_transactional_scenarios_and_the_topics_their_consumer_reads() -> None:
    """Transactional produce at RF 1 and RF 3 (acks=all, as idempotence requires), and a
    read_committed consumer of a topic written in the same transactions — never of a plain
    one, whose reads would skip the LSO and control batches the scenario is about."""
    by = {s.name: s for s in SCENARIOS}
    transactional = [s for s in SCENARIOS if s.transactional]
    assert {(s.work, s.replicas) for s in transactional} == {
        (Work.PRODUCE, 1), (Work.PRODUCE, 3), (Work.CONSUME, 1)}
    assert {(s.acks, s.transaction_ms) for s in transactional} == {("all", TRANSACTION_MS)}
    assert [s.name for s in SCENARIOS if s.isolation is Isolation.READ_COMMITTED] == [
        "txn-consume"]
    assert by["txn-consume"].source_key == by["txn-produce"].source_key
    assert by["consume-1"].source_key == by["produce-1"].source_key == \
        by["acks-all-rf1"].source_key  # acks does not change the records
    assert by["consume-1"].source_key not in {by["txn-produce"].source_key,
                                                by["rf3-acks1"].source_key}
    # the producer writing the source comes first, so the consumer reads what it wrote
    names = [s.name for s in SCENARIOS]
    assert names.index("txn-produce") < names.index("txn-consume")


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_tools_run_in_their_transactional_and_read_committed_modes(tmp_path) -> None:
    bench = Bench(Tools("java", "kafka-libs", tmp_path / "log4j"), "kcat", tmp_path, 1000,
                  Console(quiet=True))
    by = {s.name: s for s in SCENARIOS}
    (first,) = bench.commands(by["txn-produce"], "127.0.0.1:9092", "t", 1000)
    (second,) = bench.commands(by["txn-rf3"], "127.0.0.1:9092", "t", 1000)
    assert _option(first, "--transaction-duration-ms") == str(TRANSACTION_MS) == "100"
    assert "acks=all" in first
    # a transactional id of its own per run: one run's producer never fences another's
    assert _option(first, "--transactional-id") != _option(second, "--transactional-id")
    (plain,) = bench.commands(by["acks-all-rf1"], "127.0.0.1:9092", "t", 1000)
    assert "--transactional-id" not in plain and "--transaction-duration-ms" not in plain
    (committed,) = bench.commands(by["txn-consume"], "127.0.0.1:9092", "t", 1000)
    config = Path(_option(committed, "--consumer.config"))
    assert config.read_text() == "isolation.level=read_committed\n"
    (uncommitted,) = bench.commands(by["consume-1"], "127.0.0.1:9092", "t", 1000)
    assert "--consumer.config" not in uncommitted


def test_record_lines_are_the_record_size_with_the_delimiter(tmp_path) -> None:
    path = record_lines(tmp_path / "lines", 10_003, 100)
    data = path.read_bytes()
    assert len(data) == 10_003 * 100
    assert data.count(b"\n") == 10_003


def test_sampler_sees_a_busy_child_spend_cpu_and_memory() -> None:
    busy = subprocess.Popen([sys.executable, "-c",
                             "b = bytearray(64 << 20)\nwhile True: pass"])
    try:
        with ResourceSampler([busy.pid], interval=0.05) as sampler:
            before = cpu_seconds(busy.pid)
            wait_for(lambda: cpu_seconds(busy.pid) - before >= 0.1, 30, "the child to spin")
        (usage,) = sampler.usage
        assert usage.cpu_s >= 0.1
        assert usage.peak_rss_mb >= 60
    finally:
        busy.kill()
        busy.wait()


@pytest.mark.slow
def test_tiny_run_against_the_reference_broker(tmp_path) -> None:
    """Kafka's tools and kcat against a 3-broker reference cluster, end to end: every
    figure parsed, CPU and RSS recorded, the JSON written."""
    output = tmp_path / "perf.json"
    code = main(["--targets", "reference", "--records", "2000", "--no-profile", "--scenarios",
                 "produce-1,rf3-acks-all,consume-1,latency-e2e,kcat-consume,txn-produce,"
                 "txn-consume", "--output", str(output)])
    assert code == 0
    document = json.loads(output.read_text())
    assert document["schema_version"] >= 1
    results = {r["scenario"]: r for r in document["results"]}
    assert set(results) == {"produce-1", "rf3-acks-all", "consume-1", "latency-e2e",
                            "kcat-consume", "txn-produce", "txn-consume"}
    assert results["produce-1"]["records"] == 2000
    assert results["produce-1"]["figures"]["produce records/s"] > 0
    assert results["consume-1"]["figures"]["consume records/s"] > 0
    # Consumers read the first half of their topic, so no partition runs dry while measured
    # (ConsumerPerformance stops after the poll that reaches the count: up to 500 more).
    assert results["consume-1"]["topic_records"] == results["kcat-consume"]["topic_records"] \
        == results["txn-consume"]["topic_records"] == 4000
    assert 2000 <= results["consume-1"]["records"] <= 2500
    # read_committed, of the topic txn-produce wrote in 100 ms transactions and then topped up
    assert results["txn-produce"]["records"] == 2000
    assert 2000 <= results["txn-consume"]["records"] <= 2500
    assert results["kcat-consume"]["records"] == 2000
    assert results["latency-e2e"]["figures"]["p99 latency ms"] > 0
    assert all(len(r["broker_peak_rss_mb"]) == 3 and min(r["broker_peak_rss_mb"]) > 10
               for r in results.values())


def _outcome(scenario: str, target: Target, **figures: float) -> Outcome:
    outcome = Outcome(scenario, target, records=1_000_000,
                      usage=[Usage(1, 2.0, 300.0), Usage(2, 1.0, 400.0)])
    outcome.figures = {Measure[name.upper()]: value for name, value in figures.items()}
    return outcome


def test_summary_judges_the_goal_and_says_what_could_not_apply() -> None:
    kafka, ref, tansu = Target.APACHE_KAFKA, Target.REFERENCE, Target.TANSU
    outcomes = [
        _outcome("produce-1", kafka, produce_rps=200_000),
        _outcome("produce-1", ref, produce_rps=100_000),
        _outcome("produce-1", tansu, produce_rps=300_000),
        _outcome("rf3-acks1", kafka, produce_rps=100_000),
        _outcome("rf3-acks1", ref, produce_rps=120_000),
        Outcome("rf3-acks1", tansu, not_applicable="1 node"),
        _outcome("latency-e2e", kafka, p99_ms=10),
        _outcome("latency-e2e", ref, p99_ms=14),
        Outcome("latency-e2e", tansu, failed="poll() timed out"),
    ]
    targets = [ref, kafka, tansu]
    rows = {row[0].split(":")[0]: row for row in summary_rows(outcomes, targets)}
    assert rows["produce-1"][1:6] == ["100,000", "200,000", "300,000", "0.50×", "1.50×"]
    assert rows["produce-1"][-1].endswith("missed")
    assert rows["produce-1"][6] == "3.00 / 3.00 / 3.00"  # CPU-s per M records, summed
    assert rows["produce-1"][7] == "400 / 400 / 400"      # the largest broker's peak RSS
    assert rows["rf3-acks1"][3] == "n/a" and rows["rf3-acks1"][-1].endswith("met")
    assert rows["latency-e2e"][3] == "failed"
    assert rows["latency-e2e"][-1] == "reference p99 ≤ 1.5× Kafka's: met"  # 1.4×
    shape = shapes(outcomes)["RF 3 / RF 1, acks=1"]
    assert shape == {"reference": 1.2, "apache-kafka": 0.5, "tansu": None}


def test_rounds_report_the_median_round_with_every_rounds_figure() -> None:
    """A consume round that hit one of the tool's 500 ms waits reads half as fast: the median
    of three rounds is the figure, whole (its CPU and RSS too), and the range is shown."""
    consume = next(s for s in SCENARIOS if s.name == "consume-1")
    rounds = [_outcome("consume-1", Target.REFERENCE, consume_rps=rps)
              for rps in (900_000, 450_000, 1_000_000)]
    rounds[0].usage = [Usage(1, 9.0, 100.0)]
    chosen = median_round(consume, rounds)
    assert chosen.figures[Measure.CONSUME_RPS] == 900_000
    assert chosen.usage == [Usage(1, 9.0, 100.0)]
    assert chosen.rounds == [900_000, 450_000, 1_000_000]
    assert chosen.as_json()["round_headlines"] == [900_000, 450_000, 1_000_000]
    two = median_round(consume, rounds[1:])  # an even count: the lower middle
    assert two.figures[Measure.CONSUME_RPS] == 450_000
    failed = Outcome("consume-1", Target.REFERENCE, failed="timed out")
    assert median_round(consume, [rounds[0], failed]) is failed
    row = summary_rows([chosen], [Target.REFERENCE])[0]
    assert row[1] == "900,000 (450,000–1,000,000)"
    with pytest.raises(ValueError):
        median_round(consume, [])
