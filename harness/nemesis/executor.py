"""Carrying out a nemesis schedule against a running cluster, recording each action as history.

Each fault and each heal is a ``nemesis`` operation: an ``invoke`` row when it starts and an
``ok`` row when it is done (``info`` with the error if it could not be done — the cluster's
state is then unknown, which is what ``info`` means). Heals' values start with "heal", which is
how the checker's report draws fault windows.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from harness.cluster.factory import Faults
from harness.cluster.nodes import ClusterNodes
from harness.nemesis import disk as cluster_disks
from harness.nemesis import process as process_faults
from harness.nemesis import roles
from harness.nemesis.schedule import (
    DELAYED_END_TXN,
    DISK_FAULTS,
    NETWORK_FAULTS,
    TXN_COORDINATORS,
    Step,
)
from harness.waiting import ClusterWaitTimeout, wait_for
from harness.workload.recorder import Recorder


@dataclass(frozen=True)
class ToxicFault:
    """A degraded link made of one Toxiproxy toxic on a broker's client link; ``toxicity`` is
    the share of connections it acts on (Toxiproxy draws once per connection and direction)."""

    type: str
    attributes: dict[str, int] = field(hash=False)
    stream: str  # "downstream": the broker's answers; "upstream": the clients' requests
    toxicity: float = 1.0
    label: str = ""  # the toxic's name after "nemesis-"; its type when empty

    @property
    def name(self) -> str:
        return f"nemesis-{self.label or self.type}"

    def account(self) -> str:
        values = ", ".join(f"{k}={v}" for k, v in self.attributes.items())
        share = "" if self.toxicity == 1.0 else f", toxicity {self.toxicity}"
        return f"{self.type} {values} on the {self.stream} stream{share}"


# Faults made of Toxiproxy toxics. Each delays what crosses the link by a known floor, which
# the degraded-network suite checks against the acknowledgements: latency adds at least
# latency - jitter ms to every answer; bandwidth (KB/s) makes a request of n bytes take at
# least n / rate ms to reach the broker.
TOXICS = {
    "latency": ToxicFault("latency", {"latency": 100, "jitter": 50}, "downstream"),
    "bandwidth": ToxicFault("bandwidth", {"rate": 2}, "upstream"),
}
# KAFKA-17754's fault: requests to a transaction coordinator held 4 s, on half the connections.
# Held on every connection, the client's retry of a timed-out EndTxn would wait behind the same
# toxic and land with (or after) the first copy, before the next transaction begins — nothing
# to see. On half of them, the client gives up on a held connection while its copy is still
# held and retries on a new connection, which is spared as often as not (in the runs a retried
# EndTxn got through in about a second while the first copy was held), and the first copy lands
# seconds later: Toxiproxy delivers what it holds after the latency, also when the client has
# closed that connection, and at once when the toxic is removed. Which connections are held is
# Toxiproxy's draw, not the run's seed.
DELAYED_END_TXN_TOXIC = ToxicFault("latency", {"latency": 4000, "jitter": 0}, "upstream",
                                   toxicity=0.5, label=DELAYED_END_TXN)
TOXIC_FAULTS = frozenset({*TOXICS, DELAYED_END_TXN})
ROLE_WAIT_S = 10.0
"""How long a fault on a role waits for a broker to hold it (a partition's leader, a
transaction coordinator whose ``__transaction_state`` partition is being elected or loaded)
before the step is recorded ``info``."""
_PROCESS_FAULT = {"kill": "kill", "pause": "pause", "stop": "stop",
                  "lose-unflushed": "lose_unflushed"}
_PROCESS_HEAL = {"kill": "restart", "pause": "resume", "stop": "restart"}


class FaultTarget:
    """What the schedule's faults act on: the cluster's processes, its proxies (if it has
    them) and the workload's clients."""

    def __init__(self, cluster: ClusterNodes, network: Faults | None = None,
                 crash_client: Callable[[random.Random, str], str | None] | None = None,
                 seed: int = 0, txn_ids: Callable[[], list[str]] | None = None) -> None:
        self.cluster = cluster
        self.network = network
        self.crash_client = crash_client
        self.txn_ids = txn_ids  # the transactional.ids of the running clients, now
        self._rng = random.Random(seed)
        self._resolved: dict[Step, str] = {}
        self._bound: dict[Step, str] = {}  # a role step's role, its client's id bound
        self._coordinators: dict[Step, list[str]] = {}

    def unsupported(self, fault: str) -> str | None:
        """Why this target cannot do ``fault``, or None when it can."""
        if fault in NETWORK_FAULTS and self.network is None:
            return "the cluster has no network fault mechanism"
        if fault in TOXIC_FAULTS and self.network is not None and not self.network.offers_toxics:
            return "the kernel network mechanism has no toxics (use --network proxy)"
        if fault == "crash-client" and self.crash_client is None:
            return "no workload clients to crash"
        if fault == DELAYED_END_TXN and self.txn_ids is None:
            return "no transactional clients (--workload transactions or " \
                   "consume-transform-produce)"
        if fault in DISK_FAULTS:
            return cluster_disks.disk_unsupported(self.cluster, fault)
        return None

    def _network(self, fault: str) -> Faults:
        if self.network is None:
            raise RuntimeError(f"cannot {fault}: the cluster has no network fault mechanism")
        return self.network

    def apply(self, step: Step) -> str:
        """Do the step's fault; returns a short account of what was done."""
        if step.fault == "partition":
            network = self._network(step.fault)
            shape, _, aimed = step.target.partition(" ")
            if shape != "isolate":
                return f"{len(getattr(network, shape)())} directed links cut"
            node = self._node(step, aimed)
            return self._account(step, aimed, node,
                                 f"{len(network.isolate(node))} directed links cut")
        if step.fault == DELAYED_END_TXN:
            return self._delay_coordinators(step)
        if step.fault in TOXICS:
            toxic, node = TOXICS[step.fault], self._node(step)
            self._network(step.fault).add_toxic(f"client->{node}", toxic.type, toxic.attributes,
                                                stream=toxic.stream, name=toxic.name)
            return self._account(step, step.target, node, toxic.account())
        if step.fault == "crash-client":
            if self.crash_client is None:
                raise RuntimeError("cannot crash-client: no workload clients to crash")
            killed = self.crash_client(self._rng, step.target)
            return f"killed {killed or f'no {step.target} (none running)'}"
        if step.fault in DISK_FAULTS:
            node = self._node(step)
            done = cluster_disks.apply_disk_fault(self.cluster, step.fault, node)
            return self._account(step, step.target, node, done)
        node = self._node(step)
        result = process_faults.apply(self.cluster, _PROCESS_FAULT[step.fault], node)
        done = ", ".join(f"{k}={v}" for k, v in result.items() if k != "partitions")
        return self._account(step, step.target, node, done)

    def _delay_coordinators(self, step: Step) -> str:
        """The toxic of :data:`DELAYED_END_TXN_TOXIC` on the client link of every broker that
        coordinates a running client's transactional.id now; the heal lifts it from the same
        brokers. RuntimeError (the step is then ``info``) when none can be named."""
        network = self._network(step.fault)
        if step.target != TXN_COORDINATORS or self.txn_ids is None:
            raise RuntimeError(f"{step.fault} acts on {TXN_COORDINATORS}, not {step.target!r}")
        ids = sorted(self.txn_ids())
        nodes: dict[str, list[str]] = {}
        for txn_id in ids:
            try:
                node = roles.resolve(self.cluster, f"{roles.RoleKind.TXN_COORDINATOR}:{txn_id}")
            except roles.NoHolder:
                continue
            nodes.setdefault(node, []).append(txn_id)
        if not nodes:
            raise RuntimeError(f"no transaction coordinator found for {ids or 'no client'}")
        toxic = DELAYED_END_TXN_TOXIC
        self._coordinators[step] = sorted(nodes)
        for node in sorted(nodes):
            network.add_toxic(f"client->{node}", toxic.type, toxic.attributes,
                              stream=toxic.stream, toxicity=toxic.toxicity, name=toxic.name)
        held = "; ".join(f"{node} (of {', '.join(of)})" for node, of in sorted(nodes.items()))
        return f"{toxic.account()} to {held}"

    def _node(self, step: Step, aimed: str | None = None) -> str:
        """The node a fault acts on: its target (``aimed``, the step's by default) if a node,
        else the broker holding that role now — waiting up to :data:`ROLE_WAIT_S` for one, as
        a role is briefly held by nobody while a restarted broker's partitions elect leaders;
        the heal of the step acts on the same one. The keyless ``txn-coordinator`` is first
        bound to a running client's transactional id, drawn from the seed's generator."""
        if step not in self._resolved:
            role = roles.parse_role(aimed or step.target)
            if role is None:
                self._resolved[step] = aimed or step.target
                return self._resolved[step]
            bound = self._bind(role)
            if bound != role:
                self._bound[step], role = str(bound), bound
            holding = role  # in a tuple, as wait_for takes node id 0 for "not yet"
            try:
                (broker,) = wait_for(lambda: (roles.holder(self.cluster, holding),), ROLE_WAIT_S,
                                     f"a broker holding the role {role}",
                                     retry_on=(roles.NoHolder,))
            except ClusterWaitTimeout as exc:
                raise RuntimeError(f"no broker holds the role {str(role)!r} now") from exc
            self._resolved[step] = self.cluster.spec.node_name(broker)
        return self._resolved[step]

    def _bind(self, role: roles.Role) -> roles.Role:
        """``role``, the keyless ``txn-coordinator`` bound to one running client's id."""
        if role.kind is not roles.RoleKind.TXN_COORDINATOR or role.group:
            return role
        ids = sorted(self.txn_ids()) if self.txn_ids is not None else []
        if not ids:
            raise RuntimeError(f"{role}: no transactional client is running")
        return roles.for_transactional_id(role, self._rng.choice(ids))

    def _account(self, step: Step, aimed: str, node: str, done: str) -> str:
        """What a fault did, saying which node its role was (and the client's id it was
        bound to): ``txn-coordinator:run-…-txn-0-p3 was broker-2: …``."""
        named = self._bound.get(step, aimed)
        return done if node == named else f"{named} was {node}: {done}"

    def heal(self, step: Step) -> str:
        if step.fault == "partition":
            self._network(step.fault).heal()
        elif step.fault == DELAYED_END_TXN:
            for node in self._coordinators.pop(step, []):
                self._network(step.fault).remove_toxic(f"client->{node}",
                                                       DELAYED_END_TXN_TOXIC.name)
        elif step.fault in TOXICS:
            self._network(step.fault).remove_toxic(f"client->{self._node(step)}",
                                                   TOXICS[step.fault].name)
        elif step.fault in _PROCESS_HEAL:
            process_faults.apply(self.cluster, _PROCESS_HEAL[step.fault], self._node(step))
        elif step.fault in DISK_FAULTS:
            return cluster_disks.heal_disk(self.cluster, self._node(step))
        return "healed"

    def heal_all(self) -> str:
        """Lift every fault whatever the schedule got to: network, paused and dead brokers."""
        done = []
        if self.network is not None:
            self.network.clear()
            done.append("network cleared")
        for broker_id in sorted(cluster_disks.disks_of(self.cluster)):
            cluster_disks.heal_disk(self.cluster, f"broker-{broker_id}", restart=False)
            done.append(f"healed broker-{broker_id}'s disk")
        for broker_id in sorted(self.cluster.paused):
            self.cluster.resume(broker_id)
            done.append(f"resumed broker-{broker_id}")
        for broker_id in self.cluster.spec.broker_ids:
            if not self.cluster.broker(broker_id).is_running():
                self.cluster.start_broker(broker_id)
                done.append(f"started broker-{broker_id}")
        return "; ".join(done) or "nothing to heal"


class Nemesis(threading.Thread):
    """Runs a schedule in the background; :meth:`finish` stops it and heals everything."""

    def __init__(self, steps: list[Step], target: FaultTarget, recorder: Recorder) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.steps = steps
        self.target = target
        self.recorder = recorder
        self.done: list[dict[str, Any]] = []
        # When the last step's heal was done (seconds after the run's start), None until then:
        # the runner keeps the workload going while it is None (harness.run.deadline).
        self.schedule_done_s: float | None = None
        self._stop_event = threading.Event()

    def _wait_until(self, at_s: float) -> bool:
        """Sleep until ``at_s`` after the run's start; False if asked to stop first."""
        delay = at_s - self.recorder.now_ns() / 1e9
        return not self._stop_event.wait(max(0.0, delay))

    def _do(self, description: str, action: Callable[[], str]) -> bool:
        op = self.recorder.next_op()
        started = time.monotonic()
        self.recorder.record("invoke", "nemesis", op, value=description)
        entry: dict[str, Any] = {"what": description, "at_s": self.recorder.now_ns() / 1e9}
        try:
            entry["result"] = action()
        except Exception as exc:  # noqa: BLE001 - the outcome is unknown and recorded as such
            entry["error"] = f"{type(exc).__name__}: {exc}"
            self.recorder.record("info", "nemesis", op, value=description,
                                 error=type(exc).__name__)
        else:
            self.recorder.record("ok", "nemesis", op, value=description)
        entry["took_s"] = round(time.monotonic() - started, 3)
        self.done.append(entry)
        return "error" not in entry

    def run(self) -> None:
        for step in self.steps:
            if not self._wait_until(step.at_s):
                return
            self._do(step.description, partial(self.target.apply, step))
            self._wait_until(step.heal_at_s)
            self._do(step.heal, partial(self.target.heal, step))
        self.schedule_done_s = self.recorder.now_ns() / 1e9

    def halt(self) -> None:
        """Stop the schedule (a step in progress completes) and lift nothing: for a run that
        is being abandoned, whose cluster is stopped next."""
        self._stop_event.set()
        if self.is_alive():
            self.join()

    def finish(self) -> None:
        """Stop the schedule (a step in progress completes), then lift every fault."""
        self.halt()
        self._do("heal all", self.target.heal_all)
