"""The perf benchmark's tables: one per scenario (every figure, each target, the ratio to Apache
Kafka, the goal) and a summary (each scenario's headline figure, broker CPU per million
records and peak RSS), as rich tables or Markdown for docs/benchmarks.md."""

from __future__ import annotations

from collections.abc import Sequence

from bench_common import print_results
from perf_scenarios import SCENARIOS, Measure, Outcome, Scenario, Target

GOALS = {
    "reference_over_kafka_throughput_min": 1.0,  # every throughput scenario
    "reference_over_kafka_p99_max": 1.5,         # latency scenarios
}


def _by_scenario(outcomes: Sequence[Outcome]) -> dict[str, dict[Target, Outcome]]:
    table: dict[str, dict[Target, Outcome]] = {}
    for outcome in outcomes:
        table.setdefault(outcome.scenario, {})[outcome.target] = outcome
    return table


def _figure(outcome: Outcome | None, measure: Measure) -> float | None:
    if outcome is None or outcome.not_applicable or outcome.failed:
        return None
    return outcome.figures.get(measure)


def ratio(value: float | None, kafka: float | None) -> float | None:
    return value / kafka if value is not None and kafka else None


def goal(scenario: Scenario, row: dict[Target, Outcome]) -> tuple[str, bool | None]:
    """The goal for ``scenario``'s headline and whether this run met it (None: not measurable
    here, e.g. a target missing)."""
    measure = scenario.headline
    got = ratio(_figure(row.get(Target.REFERENCE), measure),
                _figure(row.get(Target.APACHE_KAFKA), measure))
    if measure.throughput:
        limit = GOALS["reference_over_kafka_throughput_min"]
        return f"reference ≥ {limit:g}× Kafka", (None if got is None else got >= limit)
    limit = GOALS["reference_over_kafka_p99_max"]
    return f"reference p99 ≤ {limit:g}× Kafka's", (None if got is None else got <= limit)


def ratios(outcomes: Sequence[Outcome]) -> dict[str, dict[str, object]]:
    """Per scenario: reference / apache-kafka of the headline, and whether the goal was met."""
    result: dict[str, dict[str, object]] = {}
    for scenario in SCENARIOS:
        row = _by_scenario(outcomes).get(scenario.name)
        if not row:
            continue
        measure = scenario.headline
        text, met = goal(scenario, row)
        result[scenario.name] = {
            "measure": str(measure),
            "ratio": ratio(_figure(row.get(Target.REFERENCE), measure),
                           _figure(row.get(Target.APACHE_KAFKA), measure)),
            "goal": text, "met": met}
    return result


SHAPES = (
    # (label, numerator scenario, denominator scenario, what Kafka's published benchmark saw)
    ("3 producers / 1 producer", "produce-3", "produce-1", "≈ linear (3×)"),
    ("RF 3 / RF 1, acks=1", "rf3-acks1", "produce-1", "falls sub-linearly"),
    ("RF 3 / RF 1, acks=all", "rf3-acks-all", "acks-all-rf1", "falls sub-linearly"),
    ("1 partition / 6 partitions", "partitions-1", "produce-1", ""),
    ("3 consumers / 1 consumer", "consume-3", "consume-1", ""),
    ("produce while consuming / produce alone", "produce-consume", "produce-1",
     "1.22 M / 1.28 M ≈ 0.95×"),
    ("100 ms transactions / none, RF 1, acks=all", "txn-produce", "acks-all-rf1", ""),
    ("100 ms transactions / none, RF 3, acks=all", "txn-rf3", "rf3-acks-all", ""),
    ("read_committed of a transactional topic / consume-1", "txn-consume", "consume-1", ""),
)


def shapes(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float | None]]:
    """How each target's throughput scales: one headline figure over another, per target."""
    by = _by_scenario(outcomes)
    result: dict[str, dict[str, float | None]] = {}
    for label, top, bottom, _ in SHAPES:
        measure = next(s.headline for s in SCENARIOS if s.name == top)
        result[label] = {str(t): ratio(_figure(by.get(top, {}).get(t), measure),
                                       _figure(by.get(bottom, {}).get(t), measure))
                         for t in Target}
    return result


def shape_rows(outcomes: Sequence[Outcome], targets: Sequence[Target]) -> list[list[str]]:
    computed = shapes(outcomes)
    return [[label, *(_ratio_text(computed[label][str(t)]) for t in targets), theirs]
            for label, _, _, theirs in SHAPES]


def _number(value: float | None) -> str:
    """Thousands without decimals; below 100 one decimal, below 10 two (CPU-s, latency)."""
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _ratio_text(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else "—"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "missed", None: "—"}[met]


def _cell(outcome: Outcome | None, value: str) -> str:
    if outcome is None:
        return "not run"
    if outcome.failed:
        return "failed"
    return "n/a" if outcome.not_applicable else value


def _compared(targets: Sequence[Target]) -> list[Target]:
    """The targets that get a ratio column: every other one, when Kafka ran."""
    return ([t for t in targets if t is not Target.APACHE_KAFKA]
            if Target.APACHE_KAFKA in targets else [])


def scenario_rows(scenario: Scenario, row: dict[Target, Outcome],
                  targets: Sequence[Target]) -> list[list[str]]:
    measures = [m for m in Measure if any(m in o.figures for o in row.values())]
    rows = []
    for measure in measures:
        kafka = _figure(row.get(Target.APACHE_KAFKA), measure)
        cells = [_cell(row.get(t), _number(_figure(row.get(t), measure)))
                 for t in targets]
        ratios_ = [_ratio_text(ratio(_figure(row.get(t), measure), kafka))
                   for t in _compared(targets)]
        text, met = goal(scenario, row) if measure is scenario.headline else ("", None)
        rows.append([measure.value, *cells, *ratios_,
                     f"{text}: {_verdict(met)}" if text else ""])
    cpu = [_cell(row.get(t), _number(row[t].cpu_s_per_million) if t in row else "")
           for t in targets]
    rss = [_cell(row.get(t), " / ".join(f"{m:,.0f}" for m in row[t].peak_rss_mb)
                 if t in row else "") for t in targets]
    padding = [""] * len(_compared(targets))
    rows.append(["broker CPU-s per M records (sum over brokers)", *cpu, *padding, ""])
    rows.append(["peak RSS per broker, MB", *rss, *padding, ""])
    return rows


def headers(versions: dict[Target, str], targets: Sequence[Target]) -> list[str]:
    names = [f"{t} {versions[t]}" if t is Target.APACHE_KAFKA and t in versions else str(t)
             for t in targets]
    return ["measure", *names, *(f"{t} / kafka" for t in _compared(targets)), "goal"]


def _with_rounds(outcome: Outcome, measure: Measure) -> str:
    """The median round's figure and, when there were several rounds, their range."""
    text = _number(_figure(outcome, measure))
    if len(outcome.rounds) > 1:
        text += f" ({_number(min(outcome.rounds))}–{_number(max(outcome.rounds))})"
    return text


def summary_rows(outcomes: Sequence[Outcome], targets: Sequence[Target]) -> list[list[str]]:
    """One row per scenario: its headline figure per target, ratios to Kafka, CPU-s per M
    records and the largest broker's peak RSS per target, and the goal's verdict."""
    by = _by_scenario(outcomes)
    rows = []
    for scenario in SCENARIOS:
        row = by.get(scenario.name)
        if not row:
            continue
        measure = scenario.headline
        kafka = _figure(row.get(Target.APACHE_KAFKA), measure)
        cells = [_cell(row.get(t), _with_rounds(row[t], measure) if t in row else "")
                 for t in targets]
        ratios_ = [_ratio_text(ratio(_figure(row.get(t), measure), kafka))
                   for t in _compared(targets)]
        cpu = " / ".join(_cell(row.get(t), _number(row[t].cpu_s_per_million) if t in row
                               else "") for t in targets)
        rss = " / ".join(_cell(row.get(t), f"{max(row[t].peak_rss_mb, default=0):,.0f}"
                               if t in row else "") for t in targets)
        text, met = goal(scenario, row)
        rows.append([f"{scenario.name}: {scenario.what} — {measure.value}", *cells, *ratios_,
                     cpu, rss, f"{text}: {_verdict(met)}"])
    return rows


def print_report(versions: dict[Target, str], outcomes: Sequence[Outcome], records: int,
                 load: str, markdown: bool) -> None:
    targets = [t for t in Target if any(o.target is t for o in outcomes)]
    by = _by_scenario(outcomes)
    for scenario in SCENARIOS:
        row = by.get(scenario.name)
        if row:
            print_results(f"{scenario.name}: {scenario.what}",
                          scenario_rows(scenario, row, targets), markdown,
                          headers(versions, targets))
            if markdown:
                print()
    names = "/".join(str(t) for t in targets)
    summary_headers = [*headers(versions, targets)[:-1],
                       f"broker CPU-s per M records ({names})",
                       f"peak RSS of the largest broker, MB ({names})", "goal"]
    print_results(f"Summary: {records:,} records per client at 100 B; {load}",
                  summary_rows(outcomes, targets), markdown, summary_headers)
    if markdown:
        print()
    print_results("Shapes: throughput of one scenario over another, per target",
                  shape_rows(outcomes, targets), markdown,
                  ["ratio", *(str(t) for t in targets),
                   "Kafka's published benchmark (3 × 8 vCPU)"])
