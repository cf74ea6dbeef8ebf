"""The pure-Python reference rules, one definition of docs/history.md at a time."""

from __future__ import annotations

import pytest

from harness.checker import rules, synth
from harness.checker.result import (
    ANOMALIES,
    GUARANTEES,
    MAX_EXAMPLES,
    ROWS_PER_EXAMPLE,
    fault_windows,
)
from harness.history import read_history

from .histories import Builder, allowed_only, clean, side_by_side, zoo


def counts(b: Builder, guarantee: str = "at-least-once") -> dict[str, int]:
    result = rules.check_events(b.events, guarantee)
    return {name: a.count for name, a in result.anomalies.items() if a.count}


def test_zoo_has_each_anomaly_once():
    b, expected = zoo(transactional=True)
    assert counts(b) == expected


def test_histories_side_by_side_are_judged_as_apart():
    """What the Spark property tests rely on: every anomaly of the zoo (transactions included)
    found once per copy, none made by one copy's rows meeting another's."""
    b, expected = zoo(transactional=True)
    assert counts(side_by_side([b, b, b])) == {name: 3 * n for name, n in expected.items()}


def test_clean_history_is_valid_under_every_guarantee():
    for guarantee in GUARANTEES:
        result = rules.check_events(clean().events, guarantee)
        assert result.valid and counts(clean(), guarantee) == {}


@pytest.mark.parametrize(
    "guarantee,valid", [("at-least-once", True), ("exactly-once", False), ("at-most-once", False)]
)
def test_guarantee_decides_validity(guarantee, valid):
    b, expected = allowed_only()
    result = rules.check_events(b.events, guarantee)
    assert counts(b) == {k: v for k, v in expected.items() if v}
    assert result.valid is valid
    assert set(result.failing) == {
        n for n in expected if expected[n] and n in GUARANTEES[guarantee]
    }


def test_unseen_never_fails_a_run():
    assert all("unseen" not in failing for failing in GUARANTEES.values())


def test_lost_needs_a_later_read_else_unseen():
    b = Builder()
    b.send(1, "a", 0)
    b.send(1, "b", 1)
    b.poll(2, [(0, "a")])
    assert counts(b) == {"unseen": 1}
    b.poll(3, [(2, "c-from-elsewhere")])
    assert counts(b) == {"lost_write": 1, "phantom_read": 1}


def test_ok_send_without_offset_is_only_counted_in_stats():
    b = Builder()
    b.send(1, "a", None)
    b.send(1, "b", 5, partition=-1)
    result = rules.check_events(b.events)
    assert counts(b) == {}
    assert result.stats["sends_ok_unknown_offset"] == 2


def test_duplicate_counts_values_and_inconsistent_counts_offsets():
    b = Builder()
    b.send(1, "a", 0)
    b.send(1, "b", 0)
    b.poll(2, [(0, "a"), (1, "a"), (2, "a"), (3, "b")])
    result = rules.check_events(b.events)
    assert counts(b) == {"duplicate": 2, "inconsistent_offset": 1}
    assert [e["value"] for e in result.anomalies["duplicate"].examples] == ["a", "b"]


def test_aborted_and_phantom_count_distinct_values():
    b = Builder()
    b.send(1, "a", None, outcome="fail")
    b.send(1, "p", None, outcome=None)  # pending: invoked, so never a phantom
    b.poll(2, [(0, "a"), (1, "x"), (2, "p")])
    b.poll(3, [(0, "a"), (1, "x")])
    assert counts(b) == {"aborted_read": 1, "phantom_read": 1}


def test_nonmonotonic_send_follows_invoke_order():
    b = Builder()
    first = b.row(1, 100, "invoke", "send", topic="t", value="a")
    b.row(1, 101, "invoke", "send", topic="t", value="b")
    b.row(1, 101, "ok", "send", topic="t", partition=0, offset=0, value="b")
    b.row(1, 100, "ok", "send", topic="t", partition=0, offset=1, value="a")
    b.poll(2, [(0, "b"), (1, "a")])
    assert first.seq == 0
    result = rules.check_events(b.events)
    assert counts(b) == {"nonmonotonic_send": 1}
    example = result.anomalies["nonmonotonic_send"].examples[0]
    assert (example["previous_op"], example["op"]) == (100, 101)
    assert len(example["rows"]) == 4


def test_runs_end_at_assign_or_revoke():
    b = Builder()
    for offset in range(3):
        b.send(1, f"v{offset}", offset)
    b.poll(2, [(2, "v2")])
    b.assignment("revoke", 2)
    b.assignment("assign", 2)
    b.poll(2, [(0, "v0"), (1, "v1")])
    assert counts(b) == {}
    b.poll(2, [(0, "v0")])
    assert counts(b) == {"nonmonotonic_poll": 1}
    b.assignment("assign", 2, partition=1)  # another partition's assignment ends nothing here
    b.poll(2, [(0, "v0")])
    assert counts(b) == {"nonmonotonic_poll": 2}


def test_poll_skip_needs_an_observed_offset_between():
    b = Builder()
    b.send(1, "a", 0)
    b.send(1, "c", 5)
    b.poll(2, [(0, "a"), (5, "c")])  # a gap nobody observed anything in: transactions, compaction
    assert counts(b) == {}
    b.send(3, "b", 3)
    result = rules.check_events(b.events)
    assert counts(b) == {"poll_skip": 1, "lost_write": 1}
    assert result.anomalies["poll_skip"].examples[0]["observed_between"] == 1


def test_commit_regression_orders_by_time_and_ignores_failures_and_null_groups():
    b = Builder()
    b.commit(1, 5, time_ns=100)
    b.commit(2, 7, time_ns=300)
    b.commit(3, 6, time_ns=200)
    b.commit(1, 1, time_ns=400, outcome="fail")
    b.commit(1, 0, time_ns=500, group=None)
    assert counts(b) == {}
    b.commit(1, 4, time_ns=600)
    b.commit(1, 2, time_ns=700, partition=1)
    assert counts(b) == {"commit_regression": 1}


def test_group_exclusivity_counts_group_generation_partition():
    b = Builder()
    b.send(1, "a", 0)
    b.send(1, "b", 1)
    for process in (2, 3, 4):
        b.poll(process, [(0, "a")], group="g", generation=1)
    b.poll(2, [(1, "b")], group="g", generation=1)  # 2 reads on after 3 and 4 began: overlap
    b.poll(5, [(0, "a")], group="g", generation=2)
    b.poll(6, [(0, "a")], group="g", generation=-1)  # unknown generation: not compared
    # A hand-over inside one generation (KIP-345: a static member's replacement takes its
    # assignment without a rebalance): 7 stops reading before 8 starts. Not an anomaly.
    b.poll(7, [(0, "a")], group="g", generation=3)
    b.poll(7, [(1, "b")], group="g", generation=3)
    b.poll(8, [(1, "b")], group="g", generation=3)
    result = rules.check_events(b.events)
    assert counts(b)["group_exclusivity"] == 1
    example = result.anomalies["group_exclusivity"].examples[0]
    assert (example["process_count"], example["processes"]) == (3, [2, 3, 4])
    assert [r["process"] for r in example["rows"]] == [2, 3, 4]


def test_redelivery_needs_distinct_polls_of_one_group():
    b = Builder()
    b.send(1, "a", 0)
    b.poll(2, [(0, "a"), (0, "a")], group="g")  # one poll: not a redelivery
    b.poll(3, [(0, "a")], group="h")
    b.poll(4, [(0, "a")])
    b.poll(5, [(0, "a")])
    assert counts(b) == {"nonmonotonic_poll": 1}
    b.poll(6, [(0, "a")], group="h")
    assert counts(b) == {"nonmonotonic_poll": 1, "redelivery": 1}


def test_examples_are_the_first_few_with_bounded_context():
    b = Builder()
    for i in range(MAX_EXAMPLES + 3):
        b.send(1, f"v{i:02d}", 100 + i)
    for i in range(ROWS_PER_EXAMPLE + 4):
        b.poll(2 + i, [(0, "ghost")])
    result = rules.check_events(b.events)
    unseen = result.anomalies["unseen"]
    assert unseen.count == MAX_EXAMPLES + 3
    assert [e["offset"] for e in unseen.examples] == [100 + i for i in range(MAX_EXAMPLES)]
    phantom = result.anomalies["phantom_read"].examples[0]["rows"]
    assert len(phantom) == ROWS_PER_EXAMPLE
    assert phantom == sorted(phantom, key=lambda r: (r["process"], r["seq"]))


def test_stats():
    b, _ = zoo()
    stats = rules.check_events(b.events).stats
    assert stats["sends"] == stats["sends_ok"] + stats["sends_fail"] + stats["sends_info"]
    assert (stats["sends_fail"], stats["sends_ok_unknown_offset"], stats["nemesis_ops"]) == (
        1,
        1,
        2,
    )
    assert stats["commits_ok"] == 3 and stats["commits_failed"] == 1
    assert stats["first_time_ns"] < stats["last_time_ns"]


def test_json_shape():
    b, _ = zoo()
    shape = rules.check_events(b.events).to_json()
    assert list(shape) == ["schema_version", "valid", "guarantee", "anomalies", "stats"]
    assert list(shape["anomalies"]) == list(ANOMALIES)
    assert all(set(a) == {"count", "examples"} for a in shape["anomalies"].values())


def test_fault_windows_close_at_heal():
    nemesis = [
        (10, 1, "invoke", "partition"),
        (11, 1, "ok", "partition"),
        (20, 2, "invoke", "kill 2"),
        (30, 3, "invoke", "heal"),
        (40, 4, "invoke", "pause 1"),
    ]
    windows = [(w.start_ns, w.end_ns, w.what) for w in fault_windows(nemesis, 99)]
    assert windows == [(10, 30, "partition"), (20, 30, "kill 2"), (40, 99, "pause 1")]


def test_synthetic_history_plants_exact_counts(tmp_path):
    rates = {name: 0.001 for name in synth.PLANTED}
    made = synth.generate(
        tmp_path, synth.Spec(rows=40_000, partitions=3, rates=rates, unseen=0.01), chunk=1024
    )
    result = rules.check_events(read_history(tmp_path))
    assert {k: a.count for k, a in result.anomalies.items()} == made.expected
    assert all(made.expected[name] for name in synth.PLANTED)
    assert abs(made.rows - 40_000) < 2_000 and len(made.files) > 1
