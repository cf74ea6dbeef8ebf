"""The nemesis operations of a history, paired fault with heal, for the report.

A history says what its nemesis did only in ``nemesis`` rows: an ``invoke`` row whose value
describes the action and a completion row (``ok``, or ``info`` with the error when the outcome is
unknown). The harness's nemesis (harness/nemesis/schedule.py, executor.py) describes a fault as
``"<fault> <target>"`` (``"kill broker-2"``, ``"partition halves"``) and its heal as
``"heal <fault> <target>"``, and ends a run with ``"heal all"``. Histories made elsewhere may
describe their faults in their own words; the only rule the checker relies on is the contract's:
a value starting with ``heal`` ends a fault. So a heal naming an open fault ends that one, and
any other heal (``"heal"``, ``"heal all"``) ends every open fault; a first word that is not one
of the harness's fault names makes the fault's kind ``other``.

Kept out of the engines: the report needs these few rows, not the checker, and both engines
hand them over the same way (:class:`NemesisRow`), so their reports cannot disagree about them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

HEAL_PREFIX = "heal"


class FaultKind(StrEnum):
    """What a fault does: the harness nemesis' fault names (schedule.FAULTS), a heal that ends
    every open fault, or a fault the harness does not name."""

    PARTITION = "partition"
    KILL = "kill"
    PAUSE = "pause"
    STOP = "stop"
    LOSE_UNFLUSHED = "lose-unflushed"
    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    CRASH_CLIENT = "crash-client"
    DISK_FULL = "disk-full"
    DISK_ERRORS = "disk-errors"
    DELAYED_END_TXN = "delayed-end-txn"
    OTHER = "other"
    HEAL = "heal"


class Outcome(StrEnum):
    """How one nemesis operation ended, from its completion row."""

    OK = "ok"
    FAIL = "fail"
    UNKNOWN = "info"  # could not be done, or not known to be done: the cluster's state is unknown
    PENDING = "no completion"  # the history ends before the operation's completion row


class NemesisRow(NamedTuple):
    """One ``nemesis`` row as either engine reads it."""

    time_ns: int
    op: int
    type: str
    value: str | None
    error: str | None = None


# The columns of NemesisRow, for an engine to select from the history (f = 'nemesis').
COLUMNS = NemesisRow._fields


@dataclass(frozen=True)
class Action:
    """One nemesis operation: when it was invoked, when it completed, and how."""

    op: int
    description: str
    started_ns: int
    ended_ns: int | None
    outcome: Outcome
    error: str | None


@dataclass(frozen=True)
class NemesisOp:
    """A fault and the heal that ended it, or (kind HEAL) a heal that ended every open fault."""

    action: Action
    kind: FaultKind
    target: str
    heal: Action | None  # None: the history ends with the fault still on

    @property
    def label(self) -> str:
        """The fault and its target, as the report names it."""
        return self.action.description or str(self.kind)


@dataclass(frozen=True)
class FaultWindow:
    """When a fault was on: from its invoke row to its heal's completion (else the heal's invoke,
    else the end of the history)."""

    start_ns: int
    end_ns: int
    what: str
    kind: FaultKind = FaultKind.OTHER
    target: str = ""


def classify(description: str) -> tuple[FaultKind, str]:
    """(kind, target) of a fault's description: ``"kill broker-2"`` → (KILL, "broker-2")."""
    first, _, rest = description.strip().partition(" ")
    try:
        kind = FaultKind(first.lower())
    except ValueError:
        return FaultKind.OTHER, description.strip()
    if kind is FaultKind.HEAL:
        return FaultKind.OTHER, description.strip()
    return kind, rest.strip()


def _is_heal(description: str) -> bool:
    return description.lower().startswith(HEAL_PREFIX)


def _actions(rows: Iterable[NemesisRow]) -> list[Action]:
    """One Action per op that has an invoke row, in (invoke time, op) order."""
    invokes: dict[int, NemesisRow] = {}
    completions: dict[int, NemesisRow] = {}
    for row in sorted(rows, key=lambda r: (r.time_ns, r.op)):
        if row.type == "invoke":
            invokes.setdefault(row.op, row)
        else:
            completions.setdefault(row.op, row)
    actions = []
    for op, invoke in invokes.items():
        done = completions.get(op)
        actions.append(Action(
            op=op,
            description=(invoke.value or "").strip(),
            started_ns=invoke.time_ns,
            ended_ns=done.time_ns if done is not None else None,
            outcome=Outcome(done.type) if done is not None else Outcome.PENDING,
            error=done.error if done is not None else None,
        ))
    return sorted(actions, key=lambda a: (a.started_ns, a.op))


def operations(rows: Iterable[NemesisRow]) -> list[NemesisOp]:
    """The history's faults, each paired with the heal that ended it, and the heals that ended
    every open fault, in the order they were invoked."""
    ops: list[NemesisOp] = []
    open_faults: list[int] = []  # indexes into ops
    for action in _actions(rows):
        if not _is_heal(action.description):
            kind, target = classify(action.description)
            open_faults.append(len(ops))
            ops.append(NemesisOp(action, kind, target, None))
            continue
        named = action.description[len(HEAL_PREFIX):].strip()
        match = next((i for i in reversed(open_faults) if ops[i].label == named), None)
        closed = [match] if match is not None and named else list(open_faults)
        for i in closed:
            ops[i] = NemesisOp(ops[i].action, ops[i].kind, ops[i].target, action)
            open_faults.remove(i)
        if match is None or not named:
            ops.append(NemesisOp(action, FaultKind.HEAL, named or "every fault", None))
    return ops


def windows(ops: Iterable[NemesisOp], end_ns: int) -> list[FaultWindow]:
    """The fault windows of ``ops`` (heals have none), in the order the faults started."""
    out = []
    for op in ops:
        if op.kind is FaultKind.HEAL:
            continue
        if op.heal is None:
            end = max(end_ns, op.action.started_ns)
        else:
            end = op.heal.ended_ns if op.heal.ended_ns is not None else op.heal.started_ns
        out.append(FaultWindow(op.action.started_ns, end, op.label, op.kind, op.target))
    return out
