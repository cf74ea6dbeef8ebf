"""The history contract (docs/history.md): its schema, readers, writers and validation.

Workloads write histories, the checker reads them, and anyone may hand the checker a history made
elsewhere, so the checks that make a history well-formed live here once: the pure-Python reader
applies them row by row and the Spark checker builds the same checks, in the same order and with the
same messages, from the tables below. A malformed history is rejected with the file and row named
instead of producing anomaly counts nobody can trust.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

TYPES = ("invoke", "ok", "fail", "info")
FUNCTIONS = ("send", "poll", "commit", "assign", "revoke", "nemesis", "txn")
# The consumer group protocols (the group_protocol column): a null one is classic, which is all
# a history written before the column existed can be.
GROUP_PROTOCOLS = ("classic", "consumer")
CONSUMER_PROTOCOL = "consumer"
# A poll's isolation level (the isolation column): a null one is read_uncommitted, Kafka's default.
ISOLATIONS = ("read_committed", "read_uncommitted")
READ_COMMITTED = "read_committed"
COMPLETIONS = ("ok", "fail", "info")
# Operations whose completion rows must follow an invoke row of the same op.
INVOKED = ("send", "poll", "nemesis", "txn")
# Operations with at most one completion row (a transaction with none is `info`).
ONE_COMPLETION = ("send", "txn")
# Columns whose null means "not known", stored as -1 as the contract says.
UNKNOWN_AS_MINUS_ONE = ("partition", "generation")

_INT_RANGES = {"int64": (-(2**63), 2**63 - 1), "int32": (-(2**31), 2**31 - 1)}
_ARROW_TYPES = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32()}
# Narrower types a Parquet writer may have used that widen without loss (pandas, other tools).
_WIDENS_TO = {
    "string": (pa.string(), pa.large_string()),
    "int64": (pa.int8(), pa.int16(), pa.int32(), pa.int64()),
    "int32": (pa.int8(), pa.int16(), pa.int32()),
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "string" | "int64" | "int32"
    required: bool  # null is a malformed row


COLUMNS: tuple[Column, ...] = (
    Column("run_id", "string", True),
    Column("process", "int64", True),
    Column("seq", "int64", True),
    Column("op", "int64", True),
    Column("time_ns", "int64", True),
    Column("type", "string", True),
    Column("f", "string", True),
    Column("topic", "string", False),
    Column("partition", "int32", False),
    Column("offset", "int64", False),
    Column("key", "string", False),
    Column("value", "string", False),
    Column("group", "string", False),
    Column("member", "string", False),
    Column("generation", "int32", False),
    Column("error", "string", False),
)
"""The contract's columns: every history file has each of them."""
OPTIONAL_COLUMNS: tuple[Column, ...] = (
    Column("group_protocol", "string", False),
    # Transactions (docs/history.md, "Transactions"): the op of the producer transaction a send,
    # poll or commit was made in; a poll's isolation level; the input value a
    # consume-transform-produce step derived a send from.
    Column("txn", "int64", False),
    Column("isolation", "string", False),
    Column("derived_from", "string", False),
)
"""Columns added to the contract later: a file may lack one (every history written before it
was added does), and a missing one reads as null, which means what the contract meant before."""
EVENT_COLUMNS = COLUMNS + OPTIONAL_COLUMNS
COLUMN_NAMES = tuple(c.name for c in EVENT_COLUMNS)  # an Event's fields, in order


def _schema(columns: tuple[Column, ...]) -> pa.Schema:
    return pa.schema(
        [pa.field(c.name, _ARROW_TYPES[c.kind], nullable=not c.required) for c in columns]
    )


ARROW_SCHEMA = _schema(COLUMNS)  # what every history file has
EVENT_SCHEMA = _schema(EVENT_COLUMNS)  # what the harness writes: the optional columns too

# What a row of a given f and type must carry for the rules to mean anything. "partition" and
# "offset" must also be >= 0. Checked in this order, after required columns and ENUMERATED.
ROW_NEEDS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("send", TYPES, ("topic", "value")),
    ("poll", ("ok",), ("topic", "partition", "offset", "value")),
    ("commit", ("ok",), ("topic", "partition", "offset")),
    ("assign", TYPES, ("topic", "partition")),
    ("revoke", TYPES, ("topic", "partition")),
)
NON_NEGATIVE = ("partition", "offset")


# Messages for malformed rows, as templates so the Spark checker can build the very same text
# from columns (see harness.checker.spark) and both engines name a bad history identically.
NULL = "column '{column}' is null but required"
UNKNOWN = "unknown {column} '{value}' (allowed: {allowed})"
OP_MIXED_F = "op {op} mixes f '{low}' and '{high}'"
OP_NO_INVOKE = "completion row of {f} op {op} has no invoke row"
OP_INVOKES = "op {op} has {invokes} invoke rows"
OP_COMPLETIONS = "{f} op {op} has {completions} completion rows"
OP_VALUES = "send op {op} has rows with different values"
SEQ_REUSED = "process {process} has seq {seq} on {rows} rows (seq must increase strictly)"
VALUE_REUSED = "send value '{value}' is used by {sends} sends (send values must be unique)"


def needs_message(f: str, types: tuple[str, ...], column: str) -> str:
    rows = f"{f} row" if types == TYPES else f"{f} {'/'.join(types)} row"
    article = "an" if column[0] in "aeiou" else "a"
    bound = " >= 0" if column in NON_NEGATIVE else ""
    return f"{rows} needs {article} {column}{bound}"


# Columns with a fixed set of values, checked in this order (a null is checked, if at all, as a
# required column's).
ENUMERATED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("type", TYPES),
    ("f", FUNCTIONS),
    ("group_protocol", GROUP_PROTOCOLS),
    ("isolation", ISOLATIONS),
)


def allowed(column: str) -> str:
    return ", ".join(dict(ENUMERATED)[column])


@dataclass(frozen=True, slots=True)
class Event:
    """One history row, with the contract's column names and defaults for the optional ones."""

    run_id: str
    process: int
    seq: int
    op: int
    time_ns: int
    type: str
    f: str
    topic: str | None = None
    partition: int = -1
    offset: int | None = None
    key: str | None = None
    value: str | None = None
    group: str | None = None
    member: str | None = None
    generation: int = -1
    error: str | None = None
    group_protocol: str | None = None
    txn: int | None = None
    isolation: str | None = None
    derived_from: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(COLUMN_NAMES, astuple(self), strict=True))


@dataclass(frozen=True)
class Location:
    file: str
    row: int | None = None  # 1-based: the line of a JSONL file, the row of a Parquet file

    def __str__(self) -> str:
        return self.file if self.row is None else f"{self.file} row {self.row}"


class HistoryError(ValueError):
    """A history the checker refuses to judge; says where, so the writer can be fixed."""

    def __init__(self, location: Location, message: str) -> None:
        super().__init__(f"{location}: {message}")
        self.location = location
        self.message = message


# ---------------------------------------------------------------------------------------------
# Files


def history_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The history's files in a fixed order (by name), so "the first bad row" means one row."""
    root = Path(directory)
    if not root.is_dir():
        raise HistoryError(Location(str(root)), "not a directory")
    files = sorted(
        p
        for p in root.iterdir()
        if p.suffix in (".parquet", ".jsonl") and not p.name.startswith((".", "_")) and p.is_file()
    )
    if not files:
        raise HistoryError(Location(str(root)), "no *.parquet or *.jsonl files")
    return files


def check_parquet_schema(path: Path) -> list[str]:
    """Reject a Parquet file whose footer lacks a column or declares a type the contract
    forbids; returns the optional columns it lacks."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise HistoryError(Location(str(path)), f"not a readable Parquet file ({exc})") from exc
    absent = []
    for column in EVENT_COLUMNS:
        index = schema.get_field_index(column.name)
        if index < 0 and column in OPTIONAL_COLUMNS:
            absent.append(column.name)
            continue
        if index < 0:
            raise HistoryError(Location(str(path)), f"missing column '{column.name}'")
        found = schema.field(index).type
        if found not in _WIDENS_TO[column.kind]:
            raise HistoryError(
                Location(str(path)),
                f"column '{column.name}' has type {found}, expected {column.kind}",
            )
    return absent


# ---------------------------------------------------------------------------------------------
# JSONL rows: one decoder, used by the pure reader and inside Spark executors.


def _type_problem(column: Column, value: Any) -> str | None:
    if value is None:
        return None
    if column.kind == "string":
        if isinstance(value, str):
            return None
    elif isinstance(value, int) and not isinstance(value, bool):
        low, high = _INT_RANGES[column.kind]
        if low <= value <= high:
            return None
        return f"column '{column.name}' value {value} does not fit {column.kind}"
    shown = json.dumps(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"column '{column.name}' must be {column.kind}, got {shown}"


def decode_json_line(line: str) -> tuple[tuple[Any, ...] | None, str | None]:
    """One JSONL line to column values (in EVENT_COLUMNS order), or why it is not a row.

    Every column of the contract must be present (null where the contract allows it), an
    optional one (OPTIONAL_COLUMNS) may be missing and is then null; other keys are ignored.
    Returns (None, None) for a blank line.
    """
    if not line.strip():
        return None, None
    try:
        obj = json.loads(line)
    except ValueError as exc:
        reason = getattr(exc, "msg", str(exc))
        return None, f"not valid JSON ({reason})"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    values: list[Any] = []
    for column in EVENT_COLUMNS:
        if column.name not in obj and column in OPTIONAL_COLUMNS:
            values.append(None)
            continue
        if column.name not in obj:
            return None, f"missing column '{column.name}'"
        value = obj[column.name]
        problem = _type_problem(column, value)
        if problem:
            return None, problem
        values.append(value)
    return tuple(values), None


def decode_json_row(line: str | None) -> tuple[Any, ...] | None:
    """The Spark form of decode_json_line: the columns then the problem; None for a blank line."""
    values, problem = decode_json_line(line or "")
    if values is None:
        return None if problem is None else (None,) * len(EVENT_COLUMNS) + (problem,)
    return values + (None,)


# ---------------------------------------------------------------------------------------------
# Row, op, process and value checks


def row_problem(values: dict[str, Any]) -> str | None:
    """The first thing wrong with one decoded row, in the order Spark checks it too."""
    for column in COLUMNS:
        if column.required and values[column.name] is None:
            return NULL.format(column=column.name)
    for name, known in ENUMERATED:
        if values[name] is not None and values[name] not in known:
            return UNKNOWN.format(column=name, value=values[name], allowed=allowed(name))
    for f, types, fields in ROW_NEEDS:
        if values["f"] != f or values["type"] not in types:
            continue
        for name in fields:
            value = values[name]
            if value is None or (name in NON_NEGATIVE and value < 0):
                return needs_message(f, types, name)
    return None


def op_problem(
    op: int, f_values: set[str], invokes: int, completions: int, send_values: set[str]
) -> tuple[str, bool] | None:
    """What is wrong with one operation's rows in one process; the flag says to name its first
    completion row (a completion without an invoke) rather than its first row."""
    low, high = min(f_values), max(f_values)
    checks = (
        (low != high, OP_MIXED_F, False),
        (low in INVOKED and invokes == 0 and completions > 0, OP_NO_INVOKE, True),
        (invokes > 1, OP_INVOKES, False),
        (low in ONE_COMPLETION and completions > 1, OP_COMPLETIONS, False),
        (low == "send" and len(send_values) > 1, OP_VALUES, False),
    )
    for failed, template, at_completion in checks:
        if failed:
            message = template.format(
                op=op, low=low, high=high, f=low, invokes=invokes, completions=completions
            )
            return message, at_completion
    return None


@dataclass
class _OpFacts:
    first: tuple[int, int]
    first_completion: tuple[int, int] | None = None
    f_values: set[str] = field(default_factory=set)
    send_values: set[str] = field(default_factory=set)
    invokes: int = 0
    completions: int = 0


def _check_events(
    events: Sequence[Event], where: Sequence[tuple[int, int]], files: list[str]
) -> None:
    """Checks across rows: each operation's rows (per process: a completion must follow its
    invoke in the same client), each process's seqs, each send's value. Of several problems the
    one with the smallest key is reported (process and op, process and seq, value), at its first
    row, which is what the Spark checker can find without sorting the whole history."""

    def fail(position: tuple[int, int], message: str) -> HistoryError:
        return HistoryError(Location(files[position[0]], position[1]), message)

    ops: dict[tuple[int, int], _OpFacts] = {}
    seqs: dict[tuple[int, int], list[tuple[int, int]]] = {}
    values: dict[str, list[tuple[int, int]]] = {}
    for event, position in zip(events, where, strict=True):
        facts = ops.get((event.process, event.op))
        if facts is None:
            facts = ops[(event.process, event.op)] = _OpFacts(position)
        facts.f_values.add(event.f)
        if event.type == "invoke":
            facts.invokes += 1
        else:
            facts.completions += 1
            if facts.first_completion is None:
                facts.first_completion = position
        # Rows passed row_problem, so a send row always has its value.
        if event.f == "send" and event.value is not None:
            facts.send_values.add(event.value)
            if event.type == "invoke":
                values.setdefault(event.value, []).append(position)
        seqs.setdefault((event.process, event.seq), []).append(position)

    for key in sorted(ops):
        facts = ops[key]
        found = op_problem(
            key[1], facts.f_values, facts.invokes, facts.completions, facts.send_values
        )
        if found:
            message, at_completion = found
            at = facts.first_completion if at_completion else facts.first
            raise fail(at or facts.first, message)
    for (process, seq), positions in sorted(seqs.items()):
        if len(positions) > 1:
            raise fail(
                positions[0], SEQ_REUSED.format(process=process, seq=seq, rows=len(positions))
            )
    for value, positions in sorted(values.items()):
        if len(positions) > 1:
            raise fail(positions[0], VALUE_REUSED.format(value=value, sends=len(positions)))


# ---------------------------------------------------------------------------------------------
# Reading


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    absent = check_parquet_schema(path)
    table = pq.read_table(path, columns=[n for n in COLUMN_NAMES if n not in absent])
    table = _with_absent_columns(table).cast(EVENT_SCHEMA, safe=True)
    for index, row in enumerate(table.to_pylist(), start=1):
        yield index, row, None


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
        for number, line in enumerate(handle, start=1):
            values, problem = decode_json_line(line)
            if values is None and problem is None:
                continue
            yield (
                number,
                None if values is None else dict(zip(COLUMN_NAMES, values, strict=True)),
                problem,
            )


def read_history(directory: str | os.PathLike[str]) -> list[Event]:
    """Read and validate a whole history into memory; for tests and small histories."""
    files = history_files(directory)
    names = [str(p) for p in files]
    events: list[Event] = []
    where: list[tuple[int, int]] = []
    for index, path in enumerate(files):
        rows = _parquet_rows(path) if path.suffix == ".parquet" else _jsonl_rows(path)
        for number, values, problem in rows:
            if values is not None and not problem:
                problem = row_problem(values)
            if problem or values is None:
                raise HistoryError(Location(names[index], number), problem or "undecodable row")
            for column in UNKNOWN_AS_MINUS_ONE:
                if values[column] is None:
                    values[column] = -1
            events.append(Event(**values))
            where.append((index, number))
    _check_events(events, where, names)
    return events


def _with_absent_columns(table: pa.Table) -> pa.Table:
    """The table with every optional column it lacks added as nulls, columns in Event order."""
    for column in OPTIONAL_COLUMNS:
        if column.name not in table.column_names:
            kind = _ARROW_TYPES[column.kind]
            table = table.append_column(pa.field(column.name, kind),
                                        pa.nulls(table.num_rows, kind))
    return table.select(list(COLUMN_NAMES))


# ---------------------------------------------------------------------------------------------
# Writing: files appear complete or not at all.


def events_table(events: Iterable[Event]) -> pa.Table:
    columns: list[list[Any]] = [[] for _ in EVENT_COLUMNS]
    for event in events:
        for values, value in zip(columns, astuple(event), strict=True):
            values.append(value)
    return pa.Table.from_arrays(
        [
            pa.array(values, type=spec.type)
            for values, spec in zip(columns, EVENT_SCHEMA, strict=True)
        ],
        schema=EVENT_SCHEMA,
    )


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


class ParquetHistoryWriter:
    """Appends events to one Parquet file in row groups, so memory stays bounded for any run
    length; the file only appears under its name once closed without error."""

    def __init__(self, path: str | os.PathLike[str], *, row_group_size: int = 65536) -> None:
        self.path = Path(path)
        self._tmp = _temporary(self.path)
        self._row_group_size = row_group_size
        self._pending: list[Event] = []
        self._writer = pq.ParquetWriter(self._tmp, EVENT_SCHEMA)

    def write(self, event: Event) -> None:
        self._pending.append(event)
        if len(self._pending) >= self._row_group_size:
            self._flush()

    def write_table(self, table: pa.Table) -> None:
        """Append a table with the contract's columns (ARROW_SCHEMA) and any optional ones."""
        self._flush()
        self._writer.write_table(
            _with_absent_columns(table).cast(EVENT_SCHEMA), row_group_size=self._row_group_size
        )

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(events_table(self._pending))
            self._pending = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._writer.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ParquetHistoryWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_parquet(path: str | os.PathLike[str], events: Iterable[Event], *,
                  row_group_size: int = 65536) -> None:
    with ParquetHistoryWriter(path, row_group_size=row_group_size) as writer:
        for event in events:
            writer.write(event)


def write_jsonl(path: str | os.PathLike[str], events: Iterable[Event]) -> None:
    target = Path(path)
    tmp = _temporary(target)
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            for event in events:
                handle.write(json.dumps(event.as_dict(), separators=(",", ":")) + "\n")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
