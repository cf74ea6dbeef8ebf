"""Group exclusivity under KIP-848's consumer protocol, in both engines, and the group_protocol
column that says which protocol a row's group spoke (absent in older histories).

Under the consumer protocol each member has its own epoch and the coordinator gives a partition
to a new member only after its previous owner revoked it: two members reading one partition at
overlapping times is the anomaly whatever their epochs, a hand-over is not, and neither is a
fenced member that reads on until it learns it lost the partition.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from harness import history
from harness.checker import rules
from harness.checker import spark as engine
from harness.history import HistoryError, read_history

from .histories import Builder

KIP848 = {"group": "g", "group_protocol": "consumer"}


def _sent(b: Builder, count: int) -> None:
    for offset in range(count):
        b.send(1, f"v{offset}", offset)


def _read(b: Builder, process: int, offset: int, epoch: int, time_ns: int) -> None:
    b.poll(process, [(offset, f"v{offset}")], generation=epoch, time_ns=time_ns, **KIP848)


def overlap(*, lost: bool = False, protocol: str | None = "consumer") -> Builder:
    """Member 2 (epoch 2) reads the partition before and after member 3 (epoch 3) starts
    reading it: 3 got it before 2 had revoked it. With `lost`, 2 then learns it was fenced."""
    b = Builder()
    _sent(b, 3)
    fields = {"group": "g", "group_protocol": protocol}
    b.assignment("assign", 2, **fields)
    b.poll(2, [(0, "v0")], generation=2, time_ns=10_000, **fields)
    b.assignment("assign", 3, **fields)
    b.poll(3, [(2, "v2")], generation=3, time_ns=10_500, **fields)
    b.poll(2, [(1, "v1")], generation=2, time_ns=11_000, **fields)
    if lost:
        b.assignment("revoke", 2, type_="info", **fields)
    return b


def handover() -> Builder:
    """2 reads, revokes; 3 gets the partition at a newer epoch and reads; then 2 gets it back
    and reads again (a process's ownerships are apart, not one span from first to last)."""
    b = Builder()
    _sent(b, 5)
    b.assignment("assign", 2, **KIP848)
    _read(b, 2, 0, epoch=2, time_ns=10_000)
    _read(b, 2, 1, epoch=2, time_ns=10_100)
    b.assignment("revoke", 2, **KIP848)
    b.assignment("assign", 3, **KIP848)
    _read(b, 3, 2, epoch=3, time_ns=10_200)
    _read(b, 3, 3, epoch=3, time_ns=10_300)
    b.assignment("revoke", 3, **KIP848)
    b.assignment("assign", 2, **KIP848)
    _read(b, 2, 4, epoch=4, time_ns=10_400)
    return b


def counts(b: Builder) -> dict[str, int]:
    result = rules.check_events(b.events)
    return {name: a.count for name, a in result.anomalies.items() if a.count}


def test_two_members_reading_one_partition_at_once_is_flagged_whatever_their_epochs():
    """Keyed by epoch (2 and 3) the two reads would never meet: the rule keys by the partition."""
    result = rules.check_events(overlap().events)
    assert counts(overlap()) == {"group_exclusivity": 1}
    (example,) = result.anomalies["group_exclusivity"].examples
    assert {k: v for k, v in example.items() if k != "rows"} == {
        "group": "g", "generation": -1, "topic": "t", "partition": 0,
        "process_count": 2, "processes": [2, 3]}
    assert [(r["process"], r["offset"]) for r in example["rows"]] == [(2, 0), (3, 2)]
    assert all(r["group_protocol"] == "consumer" for r in example["rows"])


def test_the_same_reads_under_the_classic_protocol_are_two_generations():
    """Without the column (a history written before it) the classic rule judges, per
    generation: 2 in generation 2 and 3 in generation 3 do not share one."""
    assert counts(overlap(protocol=None)) == {}
    assert counts(overlap(protocol="classic")) == {}


def test_a_clean_handover_and_a_partition_given_back_are_not_flagged():
    assert counts(handover()) == {}


def test_a_fenced_member_reading_on_until_it_learns_it_lost_the_partition_is_not_flagged():
    """KIP-848 gives a fenced member's partitions away without its revocation; librdkafka
    fetches on until its next heartbeat is refused, then calls on_lost (an info revoke)."""
    assert counts(overlap(lost=True)) == {}


def test_a_lost_ownership_excuses_only_itself():
    """After the lost revoke, 2 is assigned the partition again; reading it while 3 still does
    is an anomaly again."""
    b = overlap(lost=True)
    b.send(1, "v3", 3)
    b.send(1, "v4", 4)
    b.assignment("assign", 2, **KIP848)
    _read(b, 2, 3, epoch=5, time_ns=11_100)
    _read(b, 3, 4, epoch=3, time_ns=11_200)  # 3 reads on past 2's new first read
    (example,) = rules.check_events(b.events).anomalies["group_exclusivity"].examples
    assert example["processes"] == [2, 3]
    assert [(r["process"], r["offset"]) for r in example["rows"]] == [(2, 3), (3, 2)]


@pytest.mark.parametrize("build", [overlap, handover, lambda: overlap(lost=True)],
                         ids=["overlap", "handover", "fenced"])
def test_spark_judges_the_consumer_protocol_as_the_reference_does(spark, tmp_path, build):
    b = build()
    b.write(tmp_path, split=True)
    assert engine.check(spark, tmp_path).to_json() == rules.check_events(b.events).to_json()


def _old(events: list[history.Event]) -> list[dict]:
    """Rows as a history written before the group_protocol column existed has them."""
    rows = [e.as_dict() for e in events]
    for row in rows:
        del row["group_protocol"]
    return rows


def test_a_history_without_the_column_reads_as_classic_in_both_engines(spark, tmp_path):
    b = overlap(protocol=None)
    rows = _old(b.events)
    half = len(rows) // 2
    table = history.events_table(b.events[:half]).drop_columns(["group_protocol"])
    pq.write_table(table, tmp_path / "a.parquet")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[half:]))
    assert pq.read_schema(tmp_path / "a.parquet").get_field_index("group_protocol") < 0

    assert read_history(tmp_path) == b.events
    expected = rules.check_events(b.events).to_json()
    assert engine.check(spark, tmp_path).to_json() == expected


def test_an_unknown_group_protocol_is_a_malformed_row_in_both_engines(spark, tmp_path):
    rows = [e.as_dict() for e in overlap().events]
    rows[5]["group_protocol"] = "CONSUMER"
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(HistoryError) as reference:
        read_history(tmp_path)
    assert str(reference.value).endswith(
        "h.jsonl row 6: unknown group_protocol 'CONSUMER' (allowed: classic, consumer)")
    with pytest.raises(HistoryError) as found:
        engine.check(spark, tmp_path)
    assert str(found.value) == str(reference.value)
