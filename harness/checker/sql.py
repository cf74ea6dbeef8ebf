"""Spark SQL text for the checker: the expressions and queries harness.checker.spark runs.

Plain strings, so they live outside the Spark engine (the only modules importing pyspark), read
as the definitions they implement, and cost the JVM one parse instead of hundreds of column
objects.
Validation messages are rendered from harness.history's templates, so the Spark checker and the
pure reader name a bad history in the same words.
"""

from __future__ import annotations

import string
from typing import Any

from harness import history
from harness.checker.result import EXAMPLE_FIELDS, EXAMPLE_ORDER

IS_READ = "(f = 'poll' AND type = 'ok')"
# An ok send with a position; rules.has_position says why both must be known.
IS_KNOWN = "(f = 'send' AND type = 'ok' AND partition >= 0 AND coalesce(`offset` >= 0, false))"
# The consumer protocol's exclusivity (rules._ownerships): what starts an ownership, what voids
# one (the member learnt it had lost the partition), and which reads it judges.
IS_ASSIGN = "(f = 'assign')"
IS_LOST = "(f = 'revoke' AND type = 'info')"
IS_CONSUMER_PROTOCOL = f"coalesce(group_protocol = '{history.CONSUMER_PROTOCOL}', false)"
# A value some value rule may report: unread, sent twice, read though failed or never sent,
# observed at two places. Columns are those of sql.value_aggregates and PLACES.
VALUE_OF_NOTE = (
    "(op IS NOT NULL AND NOT counted_read) OR invokes > 1"
    " OR (read AND (failed OR g1a OR invokes = 0)) OR (invokes > 0 AND places > 1)"
)
# Two independent 64-bit hashes of a value (xxhash64 under two seeds: the leading constant
# only changes the seed). The observed rows carry these instead of the string: two distinct
# values at one offset agreeing on all 128 bits is far rarer than a hardware fault.
VALUE_KEY = ("xxhash64(value) AS v0", "xxhash64(1, value) AS v1")
# Per observed (topic, partition, offset): whether two or more values were observed there
# (some hash of them varies), and whether any was read.
TPO_AGGREGATES = (
    "min(v0) != max(v0) OR min(v1) != max(v1) AS several",
    "max(read) AS read",
    # Transactions (spark_rules_txn.annotate): whether a counting poll read the offset, and
    # whether a committed value was observed there.
    "max(read AND counts) AS counted",
    "max(vcommitted) AS committed_here",
)
# Per value, what the Terms need (rules_txn.Transactions): its transaction, whether its send
# completed ok, when it completed, and the transactions of the read_committed polls that read it
# (null among them: one outside every transaction).
TXN_VALUE_AGGREGATES = (
    "max(CASE WHEN f = 'send' THEN txn END) AS vtxn",
    "coalesce(max(f = 'send' AND type = 'ok'), false) AS sent_ok",
    "max(CASE WHEN f = 'send' AND type != 'invoke' THEN time_ns END) AS done_ns",
    f"coalesce(max({IS_READ} AND rc AND txn IS NULL), false) AS rc_plain",
    f"min(CASE WHEN {IS_READ} AND rc THEN txn END) AS rc_txn_min",
    f"max(CASE WHEN {IS_READ} AND rc THEN txn END) AS rc_txn_max",
)
# Whether a read_committed poll outside the value's transaction read it.
SEEN_OUTSIDE = "rc_plain OR coalesce(rc_txn_min != vtxn OR rc_txn_max != vtxn, false) AS outside"
STRINGS = {"value", "group", "cycle"}
ARRAYS = {"processes", "txns"}  # topics travel as numbers (their rank among topic names)
FIELDS = list(dict.fromkeys(f for fields in EXAMPLE_FIELDS.values() for f in fields))
# What names an example's context rows: ops, a value, an observed or group-read offset, rows.
SELECTORS = {
    "sel_ops": "array<bigint>",
    "sel_value": "string",
    "sel_tpo": "struct<topic:bigint,partition:bigint,offset:bigint>",
    "sel_rows": "array<struct<process:bigint,seq:bigint>>",
    "sel_gtpo": "struct<group:string,topic:bigint,partition:bigint,offset:bigint>",
}
F_CODES = {f: 1 << i for i, f in enumerate(sorted(history.FUNCTIONS))}  # bit order = name order


def literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(int(value))


class Sql(str):
    """A SQL expression, as opposed to a literal, among message parts."""


def message(template: str, **parts: str | Any) -> str:
    """A history.py template as a concat() of literals and, for parts given as Sql, columns."""
    pieces = []
    for text, name, _, _ in string.Formatter().parse(template):
        if text:
            pieces.append(literal(text))
        if name is not None:
            part = parts[name]
            pieces.append(
                f"CAST({part} AS STRING)" if isinstance(part, Sql) else literal(str(part))
            )
    return f"concat({', '.join(pieces)})"


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(literal(v) for v in values)


def _row_checks() -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """history.row_problem's checks as (condition, message) pairs, in its order: those every
    row passes, then those of each f."""
    checks = [("_problem IS NOT NULL", "_problem")]
    checks += [
        (f"`{c.name}` IS NULL", literal(history.NULL.format(column=c.name)))
        for c in history.COLUMNS
        if c.required
    ]
    for name, known in history.ENUMERATED:
        text = message(history.UNKNOWN, column=name, value=Sql(name), allowed=history.allowed(name))
        checks.append((f"{name} IS NOT NULL AND NOT ({name} IN ({_quoted(known)}))", text))
    needs: dict[str, list[tuple[str, str]]] = {}
    for f, types, fields in history.ROW_NEEDS:
        for name in fields:
            missing = f"`{name}` IS NULL" + (
                f" OR `{name}` < 0" if name in history.NON_NEGATIVE else ""
            )
            if types != history.TYPES:
                missing = f"type IN ({_quoted(types)}) AND ({missing})"
            text = literal(history.needs_message(f, types, name))
            needs.setdefault(f, []).append((missing, text))
    return checks, needs


def row_problem() -> str:
    """history.row_problem, in its order; a row's needs are looked up by f first, so a valid
    row (nearly every row) costs a handful of comparisons, not dozens."""
    checks, needs = _row_checks()

    def first(pairs: list[tuple[str, str]]) -> str:
        return ", ".join(f"CASE WHEN {c} THEN {m} END" for c, m in pairs)

    by_f = " ".join(f"WHEN {literal(f)} THEN coalesce({first(c)})" for f, c in needs.items())
    return f"coalesce({first(checks)}, CASE f {by_f} END)"


def row_is_bad() -> str:
    """Whether history.row_problem finds a problem in the row: row_problem without building
    its message, for counting bad rows in a scan of every row."""
    checks, needs = _row_checks()

    def any_(pairs: list[tuple[str, str]]) -> str:
        return " OR ".join(f"({c})" for c, _ in pairs)

    by_f = " ".join(f"WHEN {literal(f)} THEN {any_(c)}" for f, c in needs.items())
    return f"coalesce({any_(checks)} OR CASE f {by_f} ELSE false END, false)"


def f_code() -> str:
    """`f` as one bit, so an operation's f values are a bitwise OR."""
    return "CASE f " + " ".join(f"WHEN '{f}' THEN {c}" for f, c in F_CODES.items()) + " END"


def f_name(bits: str, lowest: bool) -> str:
    """The alphabetically first (or last) f among the bits: min(f) or max(f) of an operation."""
    order = sorted(F_CODES.items(), key=lambda item: item[1], reverse=not lowest)
    return "CASE " + " ".join(f"WHEN ({bits} & {c}) != 0 THEN '{f}'" for f, c in order) + " END"


def op_problem() -> tuple[str, str]:
    """history.op_problem over an operation's aggregates (bits, invokes, completions, value
    hashes), and whether it is to be found at the op's first completion row."""
    low, high = Sql(f_name("bits", lowest=True)), Sql(f_name("bits", lowest=False))
    op, invokes, completions = Sql("op"), Sql("invokes"), Sql("completions")
    mixed = "(bits & (bits - 1)) != 0"
    no_invoke = f"({low} IN ({_quoted(history.INVOKED)}) AND invokes = 0 AND completions > 0)"
    send = f"({low} = 'send')"
    one_completion = f"({low} IN ({_quoted(history.ONE_COMPLETION)}))"
    differ = "(value_min0 != value_max0 OR value_min1 != value_max1)"
    cases = [
        (mixed, message(history.OP_MIXED_F, op=op, low=low, high=high)),
        (no_invoke, message(history.OP_NO_INVOKE, f=low, op=op)),
        ("invokes > 1", message(history.OP_INVOKES, op=op, invokes=invokes)),
        (
            f"{one_completion} AND completions > 1",
            message(history.OP_COMPLETIONS, f=low, op=op, completions=completions),
        ),
        (f"{send} AND {differ}", message(history.OP_VALUES, op=op)),
    ]
    problem = "CASE " + " ".join(f"WHEN {c} THEN {m}" for c, m in cases) + " END"
    return problem, f"{no_invoke} AND NOT ({mixed})"


def _cell(column: str, wanted: bool, type_: str) -> str:
    return f"CAST({f'`{column}`' if wanted else 'NULL'} AS {type_})"


def _kind(column: str) -> str:
    if column in STRINGS:
        return "string"
    return "array<bigint>" if column in ARRAYS else "bigint"


def instance(name: str, columns: set[str]) -> list[str]:
    """Select expressions turning one anomaly's instance rows (with `columns`) into the shared
    shape: name, a sort key (one (string, number) pair per ordering field, so one ordering
    serves every anomaly), every example field of every anomaly, and every selector."""
    keys, fields = EXAMPLE_ORDER[name], EXAMPLE_FIELDS[name]
    key = ", ".join(
        f"named_struct('s', {_cell(k, k in STRINGS, 'string')}, "
        f"'l', {_cell(k, k not in STRINGS, 'bigint')})"
        for k in keys
    )
    values = ", ".join(f"'{f}', {_cell(f, f in fields, _kind(f))}" for f in FIELDS)
    selects = ", ".join(f"'{s}', {_cell(s, s in columns, t)}" for s, t in SELECTORS.items())
    return [
        f"'{name}' AS name",
        f"array({key}) AS key",
        f"named_struct({values}) AS fields",
        f"named_struct({selects}) AS `select`",
    ]


def context(selections: list[dict[str, Any]]) -> tuple[str, str]:
    """A filter cheap enough to scan everything with (membership tests on single columns), and
    the array of example numbers each row it lets through belongs to."""
    tags, ops, values, offsets, seqs = [], set(), set(), set(), set()
    for ident, select in enumerate(selections):
        parts = []
        if select["sel_ops"]:
            ops.update(select["sel_ops"])
            parts.append(f"op IN ({', '.join(map(literal, select['sel_ops']))})")
        if select["sel_value"] is not None:
            values.add(select["sel_value"])
            parts.append(f"(value = {literal(select['sel_value'])} AND f IN ('send', 'poll'))")
        for key, source in (("sel_tpo", f"({IS_READ} OR {IS_KNOWN})"), ("sel_gtpo", IS_READ)):
            if select[key]:
                offsets.add(select[key]["offset"])
                match = [f"`{c}` = {literal(v)}" for c, v in select[key].items()]
                parts.append("(" + " AND ".join([source, *match]) + ")")
        for ref in select["sel_rows"] or ():
            seqs.add(ref["seq"])
            parts.append(f"(process = {literal(ref['process'])} AND seq = {literal(ref['seq'])})")
        tags.append(f"CASE WHEN {' OR '.join(parts)} THEN {ident} END")
    candidates = [
        f"`{column}` IN ({', '.join(map(literal, sorted(found)))})"
        for column, found in (("op", ops), ("value", values), ("offset", offsets), ("seq", seqs))
        if found
    ]
    return " OR ".join(candidates), f"filter(array({', '.join(tags)}), t -> t IS NOT NULL)"


def timeline(first: int, width: int) -> str:
    """Per time bucket: acked and failed sends, records read, send latency (mean and p99)."""
    bucket = f"CAST((time_ns - {first}) DIV {width} AS BIGINT)"
    return f"""
    WITH counts AS (
      SELECT {bucket} AS bucket,
             sum(CASE WHEN f = 'send' AND type = 'ok' THEN 1 ELSE 0 END) AS sends_ok,
             sum(CASE WHEN f = 'send' AND type IN ('fail', 'info') THEN 1 ELSE 0 END) AS bad,
             sum(CASE WHEN {IS_READ} THEN 1 ELSE 0 END) AS reads
      FROM history GROUP BY 1),
    sends AS (
      SELECT min(CASE WHEN type = 'invoke' THEN time_ns END) AS start,
             max(CASE WHEN type = 'ok' THEN time_ns END) AS time_ns
      FROM history WHERE f = 'send' GROUP BY op),
    latency AS (
      SELECT {bucket} AS bucket, avg((time_ns - start) / 1e6) AS mean,
             percentile_approx((time_ns - start) / 1e6, 0.99) AS p99
      FROM sends WHERE start IS NOT NULL AND time_ns IS NOT NULL GROUP BY 1)
    SELECT c.bucket, sends_ok, bad, reads, mean, p99
    FROM counts c LEFT JOIN latency l ON c.bucket = l.bucket ORDER BY c.bucket"""


def txn_timeline(first: int, width: int) -> str:
    """Per bucket: the transactions that began and ended in it (at their completion row, else
    their invoke row), committed, aborted and unknown as the Terms say (timeline.txn_timeline):
    committed is ok, or info (or no completion) and read by a read_committed poll outside it."""
    return f"""
    WITH begun AS (
      SELECT op AS txn, min(time_ns) AS start_ns FROM history
      WHERE f = 'txn' AND type = 'invoke' GROUP BY op),
    ends AS (
      SELECT op AS txn, max(type) AS outcome, max(time_ns) AS end_ns FROM history
      WHERE f = 'txn' AND type <> 'invoke' GROUP BY op),
    written AS (
      SELECT value, max(txn) AS vtxn FROM history
      WHERE f = 'send' AND txn IS NOT NULL GROUP BY value),
    seen AS (
      SELECT DISTINCT w.vtxn AS txn FROM history h JOIN written w ON h.value = w.value
      WHERE h.f = 'poll' AND h.type = 'ok' AND h.isolation = '{history.READ_COMMITTED}'
        AND coalesce(h.txn <> w.vtxn, true)),
    fates AS (
      SELECT CAST((coalesce(end_ns, start_ns) - {first}) DIV {width} AS BIGINT) AS bucket,
             coalesce(outcome = 'ok', false)
               OR (coalesce(outcome, 'info') = 'info' AND s.txn IS NOT NULL) AS committed,
             coalesce(outcome = 'fail', false) AS aborted
      FROM begun b LEFT JOIN ends e ON b.txn = e.txn LEFT JOIN seen s ON b.txn = s.txn)
    SELECT bucket, count_if(committed) AS committed,
           count_if(aborted) AS aborted,
           count_if(NOT committed AND NOT aborted) AS unknown
    FROM fates GROUP BY bucket ORDER BY bucket"""


def txn_rows(txns: list[int], limit: int) -> str:
    """The rows of each of `txns` (its f=txn rows, and the rows whose txn it is), the first
    `limit` of each by time_ns, process, seq, each with its transaction as `of_txn`."""
    listed = ", ".join(str(int(t)) for t in txns)
    of = f"CASE WHEN f = 'txn' AND op IN ({listed}) THEN op ELSE txn END"
    return f"""
    SELECT * FROM (
      SELECT *, row_number() OVER (PARTITION BY of_txn ORDER BY time_ns, process, seq) AS k
      FROM (SELECT *, {of} AS of_txn FROM history) WHERE of_txn IN ({listed}))
    WHERE k <= {limit}"""


def nemesis(limit: int) -> str:
    return (
        "SELECT time_ns, op, type, value, error FROM history WHERE f = 'nemesis' "
        f"ORDER BY time_ns, op LIMIT {limit}"
    )


def neighborhoods(anchors: list[tuple[str, int, int]], around: int, points: int) -> str:
    """Observed rows of each anchor's partition within `around` offsets of it, the first
    `points` of each by time."""
    near = " OR ".join(
        f"(topic = {literal(t)} AND partition = {p} AND `offset` BETWEEN {o - around} AND "
        f"{o + around})"
        for t, p, o in anchors
    )
    tags = ", ".join(
        f"CASE WHEN topic = {literal(t)} AND partition = {p} AND `offset` BETWEEN "
        f"{o - around} AND {o + around} THEN {i} END"
        for i, (t, p, o) in enumerate(anchors)
    )
    return f"""
    SELECT anchor, time_ns, `offset`, process, read FROM (
      SELECT *, row_number() OVER (PARTITION BY anchor ORDER BY time_ns, `offset`) AS k FROM (
        SELECT time_ns, `offset`, process, {IS_READ} AS read,
               explode(filter(array({tags}), t -> t IS NOT NULL)) AS anchor
        FROM history WHERE ({IS_READ} OR {IS_KNOWN}) AND ({near})))
    WHERE k <= {points}"""


# ---------------------------------------------------------------------------------------------
# The rules' projections, aggregates and windows, applied by harness.checker.spark_rules

_TPO = ("topic", "partition", "offset")
_TP = "topic, `partition`"
# An ok commit of a group that counts (one in a transaction that did not commit does not).
_COMMIT = "(f = 'commit' AND type = 'ok' AND `group` IS NOT NULL AND counts)"


def _count(condition: str) -> str:
    return f"sum(CASE WHEN {condition} THEN 1 ELSE 0 END)"


def by_process() -> list[str]:
    """What the per-process rules read of every row, as numbers: the f bit, whether it is an
    invoke, two independent hashes of a send's value (a send's rows must carry one value),
    the position of a known send, and the fields of an ok commit of a group."""
    return [
        "process",
        "seq",
        "op",
        f"{f_code()} AS code",
        "type = 'invoke' AS invoke",
        "CASE WHEN f = 'send' THEN xxhash64(value) END AS h0",
        "CASE WHEN f = 'send' THEN hash(value) END AS h1",
        *[f"CASE WHEN {IS_KNOWN} OR {_COMMIT} THEN `{c}` END AS `{c}`" for c in _TPO],
        f"{IS_KNOWN} AS known",
        f"CASE WHEN {_COMMIT} THEN `group` END AS `group`",
        f"CASE WHEN {_COMMIT} THEN time_ns END AS time_ns",
    ]


def op_aggregates() -> list[str]:
    """Per (process, op) of by_process: all numeric, so Spark hashes instead of sorting."""
    return [
        "bit_or(code) AS bits",
        f"{_count('invoke')} AS invokes",
        f"{_count('NOT invoke')} AS completions",
        *[f"{m}(h{i}) AS value_{m}{i}" for m in ("min", "max") for i in range(2)],
        f"min(CASE WHEN invoke AND code = {F_CODES['send']} THEN seq END) AS seq",
        *[f"max(CASE WHEN known THEN `{c}` END) AS `{c}`" for c in _TPO],
        "max(known) AS sent",
    ]


def value_aggregates() -> list[str]:
    """Per value: sent, failed, read, the range of places it was observed at, where acked."""
    observed, sent = f"({IS_READ} OR {IS_KNOWN})", "f = 'send' AND type = 'invoke'"
    return [
        f"{_count(sent)} AS invokes",
        "max(f = 'send' AND type = 'fail') AS failed",
        f"max({IS_READ}) AS read",
        f"max({IS_READ} AND counts) AS counted_read",
        "max(vcommitted) AS committed",
        f"max({IS_READ} AND rc AND vtxn_fail) AS g1a",
        *[f"min(CASE WHEN {observed} THEN `{c}` END) AS `{c}_min`" for c in _TPO],
        *[f"max(CASE WHEN {observed} THEN `{c}` END) AS `{c}_max`" for c in _TPO],
        *[f"max(CASE WHEN {IS_KNOWN} THEN `{c}` END) AS `{c}`" for c in (*_TPO, "op")],
    ]


# At how many places a value was observed: two or more iff some position component varies.
PLACES = (
    "CASE WHEN offset_min IS NULL THEN 0 WHEN "
    + " AND ".join(f"`{c}_min` = `{c}_max`" for c in _TPO)
    + " THEN 1 ELSE 2 END AS places"
)


def lags(over: str, *columns: str) -> list[str]:
    """Each column's value in the row before, as previous_<column>."""
    return ["*", *[f"lag(`{c}`) OVER ({over}) AS previous_{c}" for c in columns]]


SEND_ORDER = f"PARTITION BY process, {_TP} ORDER BY seq"
READ_ORDER = SEND_ORDER  # a process's reads of a t/p, by seq
OFFSET_RANK = f"dense_rank() OVER (PARTITION BY {_TP} ORDER BY `offset`) AS rank"
# Per observed t/p/o (one row each): how many offsets of the t/p at or below it hold an observed
# committed value.
COMMITTED_RANK = (
    f"sum(CASE WHEN committed_here THEN 1 ELSE 0 END) OVER (PARTITION BY {_TP} ORDER BY `offset` "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS crank"
)
# The observed offsets strictly between a pair of reads: for two read_committed reads only
# those holding a committed value (rules._read_pairs).
OBSERVED_BETWEEN = (
    "CASE WHEN rc AND previous_rc THEN crank - CAST(committed_here AS INT) - previous_crank "
    "ELSE rank - previous_rank - 1 END AS observed_between"
)
COMMIT_ORDER = f"PARTITION BY `group`, {_TP} ORDER BY time_ns, process, seq"
# Which ownership of its t/p a process's row belongs to: how many assign rows of it came first.
OWNERSHIP = (
    f"sum(CASE WHEN assigned THEN 1 ELSE 0 END) OVER ({READ_ORDER} "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS owned"
)


def row_refs(*pairs: tuple[str, str]) -> str:
    """The rows an example names, as (process, seq) structs."""
    refs = ", ".join(f"named_struct('process', {p}, 'seq', {s})" for p, s in pairs)
    return f"array({refs}) AS sel_rows"


def stats() -> list[str]:
    """The history's totals as harness.checker.rules counts them, and its bad rows."""

    def count(f: str, *types: str) -> str:
        return _count(f"f = {literal(f)} AND type IN ({_quoted(types)})")

    return [
        "count(1) AS rows",
        f"{count('send', 'invoke')} AS sends",
        f"{count('send', 'ok')} AS sends_ok",
        f"{count('send', 'fail')} AS sends_fail",
        f"{count('send', 'info')} AS sends_info",
        f"{_count(IS_KNOWN)} AS known",
        f"{count('poll', 'invoke')} AS polls",
        f"{count('poll', 'ok')} AS records_read",
        f"{count('commit', 'ok')} AS commits_ok",
        f"{count('commit', 'fail', 'info')} AS commits_failed",
        f"{count('assign', *history.TYPES)} AS assigns",
        f"{count('revoke', *history.TYPES)} AS revokes",
        f"{count('nemesis', 'invoke')} AS nemesis_ops",
        "min(time_ns) AS first_time_ns",
        "max(time_ns) AS last_time_ns",
        f"{_count(row_is_bad())} AS bad_rows",
    ]


# The names sql.stats() gives, and how per-topic stats combine into the history's: a count of
# no topics is 0, as count(1) over no rows is; a sum or extreme over none stays null.
STATS_NAMES = [expression.rsplit(" AS ", 1)[1] for expression in stats()]
STATS_COMBINED = [
    "min(first_time_ns) AS first_time_ns" if name == "first_time_ns"
    else "max(last_time_ns) AS last_time_ns" if name == "last_time_ns"
    else f"coalesce(sum({name}), 0) AS {name}" if name == "rows"
    else f"sum({name}) AS {name}"
    for name in STATS_NAMES
]
STATS_DERIVED = [
    "*",
    "sends - sends_ok - sends_fail - sends_info AS sends_pending",
    "sends_ok - known AS sends_ok_unknown_offset",
]
