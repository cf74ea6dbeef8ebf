"""The nemesis schedule: which faults, on what, when, and when each is healed — from a seed.

A pure function of (seed, faults, duration, brokers), so a failing run is replayed by passing its
seed again, and a test can check the schedule without a cluster. Faults come one at a time, as in
Jepsen's Kafka test: a quiet interval, a fault held for a while, its heal, another quiet interval;
the last heal is due ``tail_s`` before the workload ends so the cluster can settle under load.

:func:`repeated` is the other shape, Kafka's own system tests' (``replication_test.py``,
``network_degrade_test.py``): one fault — a process fault or a degraded link — on one *role*,
the leader of a partition or the controller, again and again.
A role is named in the step (``"leader of workload-0"``, ``"controller"``) and resolved to a
broker only when the fault is applied, because the leader moves with every fault.

:func:`plan` can aim too: given ``targets`` (nodes or roles), its faults that act on one node
take them in turn, and a partition isolates them — so a short run faults every role it names
(the transactions suite's chaos: the leaders and :data:`TXN_COORDINATOR`).

``delayed-end-txn`` is KAFKA-17754's fault (docs/scenarios.md): a request of one transaction —
an EndTxn above all — held on the way to its transaction coordinator past the client's request
timeout, so the client retries it on a new connection, commits and begins its next transaction
while the first copy is still in flight; under Kafka's transaction version 1 the producer epoch
is the same, and the late copy ends the *next* transaction. Its target is
:data:`TXN_COORDINATORS`, resolved when applied: the transaction ids of the running clients
are only known then.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

# Fault name -> what the step does; the heal of each is fixed by the fault (see Step.heal).
FAULTS = {
    "partition": "cut the network into a shape (isolate a node, halves, ring, bridge)",
    "kill": "SIGKILL a broker; heal starts it again",
    "pause": "SIGSTOP a broker; heal sends SIGCONT",
    "stop": "gracefully stop a broker (controlled shutdown); heal starts it again",
    "lose-unflushed": "kill a broker, cut its logs to the last flush, start it (heals itself)",
    "latency": "add latency (jitter) on one broker's client link; heal removes it",
    "bandwidth": "limit one broker's client link (the clients' requests) to a few KB/s; heal "
                 "removes it",
    "crash-client": "SIGKILL one workload client (any, or a consumer or producer); the generator "
                    "replaces it",
    "disk-full": "fill a broker's log dir's disk (a size-limited tmpfs) to the last byte; heal "
                 "frees it and starts the broker again if it halted",
    "disk-errors": "reads and writes under a broker's log dir fail with EIO (a FUSE filesystem); "
                   "heal stops the errors and starts the broker again if it halted",
    "delayed-end-txn": "hold the clients' requests (EndTxn, AddPartitionsToTxn, Produce) to the "
                       "transaction coordinators of the running transactional clients longer "
                       "than their request timeout, on a share of the connections, so a late "
                       "copy can land in the next transaction (KAFKA-17754); heal removes it",
}
DELAYED_END_TXN = "delayed-end-txn"
TXN_COORDINATORS = "txn-coordinators"
"""The target of :data:`DELAYED_END_TXN`: every broker that is the transaction coordinator of a
running transactional client when the fault is applied."""
NETWORK_FAULTS = frozenset({"partition", "latency", "bandwidth", DELAYED_END_TXN})
_SHAPES = ("isolate", "halves", "ring", "bridge")
PROCESS_FAULTS = frozenset({"kill", "pause", "stop", "lose-unflushed"})
DISK_FAULTS = frozenset({"disk-full", "disk-errors"})
# Faults with one target — a node, a role (leader, controller), or for crash-client the kind
# of client (CLIENT_ROLES) — which :func:`repeated` and :func:`rolling` can schedule.
NODE_FAULTS = PROCESS_FAULTS | DISK_FAULTS | {"latency", "bandwidth", "crash-client"}
CLIENT_ROLES = ("client", "consumer", "producer")  # "client": any workload client
# The faults :func:`plan` aims at its ``targets``: those acting on one node, and a partition
# (isolating it). crash-client and delayed-end-txn have targets of their own kind.
AIMED_FAULTS = (NODE_FAULTS - {"crash-client"}) | {"partition"}
CONTROLLER = "controller"
LEADER_OF = "leader of "
TXN_COORDINATOR = "txn-coordinator"
"""The role of one running transactional client's transaction coordinator, the client picked
when the fault is applied (:mod:`harness.nemesis.roles`): a schedule cannot name an id made
when a client process starts."""


def leader_of(topic: str, partition: int) -> str:
    """The role target naming the leader of ``topic``'s ``partition`` at the time of a fault
    (resolved by :mod:`harness.nemesis.roles`)."""
    return f"{LEADER_OF}{topic}-{partition}"


@dataclass(frozen=True)
class Step:
    at_s: float  # seconds after the run started
    heal_at_s: float
    fault: str
    target: str  # a node, a partition shape ("halves", "isolate broker-2"), or "client"

    @property
    def description(self) -> str:
        return f"{self.fault} {self.target}"

    @property
    def heal(self) -> str:
        """The heal's description; starts with "heal" (the checker's fault windows end there)."""
        return f"heal {self.description}"

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "description": self.description}


def parse_faults(text: str) -> tuple[str, ...]:
    """``"partition,kill"`` → ("partition", "kill"); ``"none"`` or "" → (); unknown names raise
    ValueError naming the allowed ones."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if names in ((), ("none",)):
        return ()
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise ValueError(f"unknown nemesis fault(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(FAULTS)} or none")
    return names


def _target(rng: random.Random, fault: str, brokers: int, aim: str | None = None) -> str:
    """The step's target; ``aim`` (a node or a role) overrides what is drawn, and the draws are
    made all the same, so the seed's sequence — the faults' times and kinds — stays as it is."""
    broker = f"broker-{rng.randint(1, brokers)}"
    if fault == "partition":
        shape = rng.choice(_SHAPES if brokers >= 3 else ("isolate",))
        if aim is not None:
            return f"isolate {aim}"
        return f"isolate {broker}" if shape == "isolate" else shape
    if aim is not None:
        return aim
    if fault == "crash-client":
        return "client"
    if fault == DELAYED_END_TXN:
        return TXN_COORDINATORS
    return broker


QUIET_S = (2.0, 5.0)  # plan's default range of quiet seconds between one heal and the next fault
FAULT_S = (3.0, 8.0)  # plan's default range of seconds a fault is held
# delayed-end-txn alone: short windows close together. Each window re-draws which connections
# Toxiproxy holds (one roll per connection when the toxic is added), and each draw is a chance
# that a client's EndTxn is held, retried on a spared connection and delivered late — at the
# 4 s latency or at the heal, which flushes what the toxic holds: a window of 2.5-4 s outlasts
# the client's 1 s timeout and retry, so the late copy lands after the client moved on.
DELAYED_END_TXN_FAULT_S = (2.5, 4.0)
DELAYED_END_TXN_QUIET_S = (0.5, 1.5)


def pacing(faults: tuple[str, ...] | list[str], quiet_s: tuple[float, float] = QUIET_S
           ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(fault_s, quiet_s) for :func:`plan`: delayed-end-txn's own when it is the only fault,
    else the defaults (``quiet_s`` as given: a soak's is longer)."""
    if tuple(faults) == (DELAYED_END_TXN,):
        return DELAYED_END_TXN_FAULT_S, DELAYED_END_TXN_QUIET_S
    return FAULT_S, quiet_s


def plan(seed: int, faults: tuple[str, ...] | list[str], duration_s: float, brokers: int, *,
         start_s: float = 3.0, quiet_s: tuple[float, float] = QUIET_S,
         fault_s: tuple[float, float] = FAULT_S, tail_s: float = 3.0,
         targets: tuple[str, ...] = ()) -> list[Step]:
    """The schedule for one run; empty when no faults are asked for or there is no room.
    With ``targets`` the :data:`AIMED_FAULTS` take them in turn (the first such fault the
    first target, and so on round), instead of a broker drawn from the seed; without, the
    same seed plans the same schedule as before targets existed."""
    rng = random.Random(seed)
    steps: list[Step] = []
    if not faults or brokers < 1:
        return steps
    kinds = sorted(faults)
    t = start_s
    last_heal = duration_s - tail_s
    aimed = 0
    while True:
        held = rng.uniform(*fault_s)
        if t + held > last_heal:
            break
        fault = rng.choice(kinds)
        aim = None
        if targets and fault in AIMED_FAULTS:
            aim, aimed = targets[aimed % len(targets)], aimed + 1
        steps.append(Step(round(t, 3), round(t + held, 3), fault,
                          _target(rng, fault, brokers, aim)))
        t += held + rng.uniform(*quiet_s)
    return steps


def repeated(fault: str, target: str, times: int, *, start_s: float, held_s: float,
             quiet_s: float) -> list[Step]:
    """``fault`` on ``target`` (a node or a role) ``times`` times: held ``held_s`` each time
    (0 bounces it: the heal follows at once), ``quiet_s`` between a heal and the next fault."""
    _check_targeted(fault, target)
    steps = []
    at = start_s
    for _ in range(times):
        steps.append(Step(round(at, 3), round(at + held_s, 3), fault, target))
        at += held_s + quiet_s
    return steps


def rolling(fault: str, targets: list[str], *, start_s: float, quiet_s: float) -> list[Step]:
    """``fault`` bounced (healed at once) on each of ``targets`` in turn, ``quiet_s`` apart: a
    rolling restart, as Kafka's consumer system test bounces its brokers."""
    for target in targets:
        _check_targeted(fault, target)
    return [Step(round(start_s + i * quiet_s, 3), round(start_s + i * quiet_s, 3), fault, target)
            for i, target in enumerate(targets)]


def _check_targeted(fault: str, target: str) -> None:
    if fault not in NODE_FAULTS:
        raise ValueError(f"repeated faults act on one node ({', '.join(sorted(NODE_FAULTS))}"
                         f"), not {fault!r}")
    if (fault == "crash-client") != (target in CLIENT_ROLES):
        raise ValueError(f"crash-client targets one of {', '.join(CLIENT_ROLES)}, other faults "
                         f"a node or a role; got {fault!r} on {target!r}")
