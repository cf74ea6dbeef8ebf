"""The history contract: schema, readers, writers, and the rejection of malformed histories."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import history
from harness.history import Event, HistoryError, read_history, write_jsonl, write_parquet

CONTRACT = [  # docs/history.md, column by column
    ("run_id", "string"),
    ("process", "int64"),
    ("seq", "int64"),
    ("op", "int64"),
    ("time_ns", "int64"),
    ("type", "string"),
    ("f", "string"),
    ("topic", "string"),
    ("partition", "int32"),
    ("offset", "int64"),
    ("key", "string"),
    ("value", "string"),
    ("group", "string"),
    ("member", "string"),
    ("generation", "int32"),
    ("error", "string"),
]


def _events() -> list[Event]:
    return [
        Event("r", 1, 0, 1, 10, "invoke", "send", "t", value="a", key="k"),
        Event("r", 1, 1, 1, 20, "ok", "send", "t", 0, 0, value="a", key="k"),
        Event("r", 2, 0, 2, 30, "invoke", "poll", group="g", member="m", generation=3),
        Event("r", 2, 1, 2, 40, "ok", "poll", "t", 0, 0, value="a", group="g", generation=3),
        Event("r", 2, 2, 3, 50, "ok", "commit", "t", 0, 1, group="g"),
        Event("r", 0, 0, 4, 60, "invoke", "nemesis", value="kill 1"),
        Event("r", 0, 1, 4, 70, "info", "nemesis", value="kill 1", error="TIMEOUT"),
    ]


def _rows(events: list[Event]) -> list[dict]:
    return [e.as_dict() for e in events]


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _error(directory: Path) -> HistoryError:
    with pytest.raises(HistoryError) as caught:
        read_history(directory)
    return caught.value


def test_schema_is_the_contract():
    assert [(f.name, str(f.type)) for f in history.ARROW_SCHEMA] == CONTRACT
    required = {f.name for f in history.ARROW_SCHEMA if not f.nullable}
    assert required == {"run_id", "process", "seq", "op", "time_ns", "type", "f"}
    # What the harness writes: the contract, then the columns added to it later (nullable:
    # a history written before one was added lacks it).
    assert [(f.name, str(f.type), f.nullable) for f in history.EVENT_SCHEMA] == [
        *((name, kind, name not in required) for name, kind in CONTRACT),
        ("group_protocol", "string", True),
        ("txn", "int64", True), ("isolation", "string", True), ("derived_from", "string", True)]


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_round_trip(tmp_path, suffix):
    write = write_parquet if suffix == "parquet" else write_jsonl
    write(tmp_path / f"h.{suffix}", _events())
    assert read_history(tmp_path) == _events()
    assert [p.name for p in tmp_path.iterdir()] == [f"h.{suffix}"]


def test_reads_every_file_in_name_order_and_ignores_others(tmp_path):
    write_jsonl(tmp_path / "b.jsonl", _events()[4:])
    write_parquet(tmp_path / "a.parquet", _events()[:4])
    (tmp_path / "notes.txt").write_text("not history")
    (tmp_path / "_SUCCESS").write_text("")
    assert read_history(tmp_path) == _events()


def test_unknown_partition_and_generation_read_as_minus_one(tmp_path):
    rows = _rows(_events())
    rows[2]["generation"] = None
    rows[5]["partition"] = None
    _write_rows(tmp_path / "h.jsonl", rows)
    events = read_history(tmp_path)
    assert events[2].generation == -1 and events[5].partition == -1


def test_extra_columns_and_narrower_integers_are_accepted(tmp_path):
    table = history.events_table(_events())
    table = table.set_column(1, "process", pa.array([e.process for e in _events()], pa.int32()))
    table = table.append_column("note", pa.array(["x"] * table.num_rows))
    pq.write_table(table, tmp_path / "h.parquet")
    assert read_history(tmp_path) == _events()


def test_writer_leaves_nothing_behind_on_failure(tmp_path):
    with pytest.raises(RuntimeError), history.ParquetHistoryWriter(tmp_path / "h.parquet") as w:
        w.write(_events()[0])
        raise RuntimeError("workload crashed")
    assert list(tmp_path.iterdir()) == []


def test_writer_writes_in_row_groups(tmp_path):
    with history.ParquetHistoryWriter(tmp_path / "h.parquet", row_group_size=2) as writer:
        for event in _events():
            writer.write(event)
    assert pq.ParquetFile(tmp_path / "h.parquet").num_row_groups == 4
    assert read_history(tmp_path) == _events()


def test_directory_problems(tmp_path):
    assert "not a directory" in str(_error(tmp_path / "missing"))
    assert "no *.parquet or *.jsonl files" in str(_error(tmp_path))


def test_parquet_missing_column(tmp_path):
    pq.write_table(history.events_table(_events()).drop_columns(["seq"]), tmp_path / "h.parquet")
    error = _error(tmp_path)
    assert error.location == history.Location(str(tmp_path / "h.parquet"))
    assert error.message == "missing column 'seq'"


def test_parquet_wrong_type(tmp_path):
    table = history.events_table(_events())
    table = table.set_column(3, "op", pa.array([1.0] * table.num_rows))
    pq.write_table(table, tmp_path / "h.parquet")
    assert (
        str(_error(tmp_path))
        == f"{tmp_path / 'h.parquet'}: column 'op' has type double, expected int64"
    )


def test_unreadable_parquet(tmp_path):
    (tmp_path / "h.parquet").write_text("not parquet")
    assert "not a readable Parquet file" in str(_error(tmp_path))


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ("missing:seq", "missing column 'seq'"),
        ('process:"5"', "column 'process' must be int64, got \"5\""),
        ("process:1.5", "column 'process' must be int64, got 1.5"),
        ("process:true", "column 'process' must be int64, got true"),
        ("topic:5", "column 'topic' must be string, got 5"),
        ("partition:3000000000", "column 'partition' value 3000000000 does not fit int32"),
    ],
)
def test_jsonl_bad_line_is_named(tmp_path, line, message):
    rows = [json.dumps(r) for r in _rows(_events())]
    if ":" in line and not line.startswith("{"):
        column, _, value = line.partition(":")
        row = _rows(_events())[3]
        if column == "missing":
            del row[value]
        else:
            row[column] = json.loads(value)
        line = json.dumps(row)
    rows.insert(3, line)
    (tmp_path / "h.jsonl").write_text("\n".join(rows) + "\n")
    error = _error(tmp_path)
    assert error.location == history.Location(str(tmp_path / "h.jsonl"), 4)
    assert error.message.startswith(message)


def test_blank_lines_are_skipped_but_counted(tmp_path):
    rows = _rows(_events())
    rows[4]["type"] = "okay"
    text = "\n".join(json.dumps(r) for r in rows[:2]) + "\n\n   \n"
    text += "\n".join(json.dumps(r) for r in rows[2:]) + "\n"
    (tmp_path / "h.jsonl").write_text(text)
    assert str(_error(tmp_path)) == (
        f"{tmp_path / 'h.jsonl'} row 7: unknown type 'okay' (allowed: invoke, ok, fail, info)"
    )


@pytest.mark.parametrize(
    "index,change,message",
    [
        (0, {"seq": None}, "column 'seq' is null but required"),
        (
            5,
            {"f": "crash"},
            "unknown f 'crash' (allowed: send, poll, commit, assign, revoke, nemesis, txn)",
        ),
        (3, {"offset": None}, "poll ok row needs an offset >= 0"),
        (3, {"partition": -1}, "poll ok row needs a partition >= 0"),
        (0, {"value": None}, "send row needs a value"),
        (4, {"topic": None}, "commit ok row needs a topic"),
    ],
)
def test_bad_row_is_named(tmp_path, index, change, message):
    rows = _rows(_events())
    rows[index].update(change)
    _write_rows(tmp_path / "h.jsonl", rows)
    error = _error(tmp_path)
    assert (error.location.row, error.message) == (index + 1, message)


def test_completion_without_invoke_names_the_completion(tmp_path):
    rows = _rows(_events())
    del rows[0]  # the send's invoke
    write_parquet(tmp_path / "h.parquet", [Event(**r) for r in rows])
    error = _error(tmp_path)
    assert error.location == history.Location(str(tmp_path / "h.parquet"), 1)
    assert error.message == "completion row of send op 1 has no invoke row"


@pytest.mark.parametrize(
    "rows,where,message",
    [
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 1, 1, 1, 2, "invoke", "send", "t", value="a"),
            ],
            1,
            "op 1 has 2 invoke rows",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 1, 1, 1, 2, "ok", "send", "t", 0, 0, value="a"),
                Event("r", 1, 2, 1, 3, "info", "send", "t", value="a"),
            ],
            1,
            "send op 1 has 2 completion rows",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 1, 1, 1, 2, "ok", "send", "t", 0, 0, value="b"),
            ],
            1,
            "send op 1 has rows with different values",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "poll"),
                Event("r", 1, 1, 1, 2, "ok", "commit", "t", 0, 0),
            ],
            1,
            "op 1 mixes f 'commit' and 'poll'",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 1, 0, 2, 2, "invoke", "send", "t", value="b"),
            ],
            1,
            "process 1 has seq 0 on 2 rows (seq must increase strictly)",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 2, 0, 2, 2, "invoke", "send", "t", value="a"),
            ],
            1,
            "send value 'a' is used by 2 sends (send values must be unique)",
        ),
        (
            [
                Event("r", 1, 0, 1, 1, "invoke", "send", "t", value="a"),
                Event("r", 2, 0, 1, 2, "ok", "send", "t", 0, 0, value="a"),
            ],
            2,
            "completion row of send op 1 has no invoke row",
        ),
    ],
)
def test_bad_operation_is_named(tmp_path, rows, where, message):
    write_parquet(tmp_path / "h.parquet", rows)
    error = _error(tmp_path)
    assert (error.location.row, error.message) == (where, message)
