"""What the delayed-end-txn fault (KAFKA-17754, docs/scenarios.md) needs of a run's
transactional clients: the settings that make its held requests matter, and the transactional
ids it holds the coordinators of.

The toxic itself is :data:`harness.nemesis.executor.DELAYED_END_TXN_TOXIC`; these are the other
half, which the runner gives the workload when the nemesis has the fault, so a user's one
command (``run --workload transactions --nemesis delayed-end-txn``) sets up both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.nemesis.schedule import DELAYED_END_TXN
from harness.workload.generator import Client
from harness.workload.transactions import TxnProducerSpec, transactional_id
from harness.workload.transform import ProcessorSpec

DELAYED_END_TXN_CLIENT: dict[str, int] = {"socket.timeout.ms": 1000}
"""What a transactional client must be told for the held requests to matter: librdkafka's
timeout of its coordinator requests (EndTxn, AddPartitionsToTxn; ``socket.timeout.ms``, 60 s by
default) well under the 4 s hold, so the client gives up on the held copy, retries it on a new
connection and moves on before the held one lands — as Jepsen's client, which times out fast.
Produce keeps its 5 s ``request.timeout.ms``, longer than the hold, so that a held Produce is
answered late rather than retried: a retried Produce whose first attempt lands later
desynchronises the idempotent producer's sequence numbers (``OUT_OF_ORDER_SEQUENCE_NUMBER``,
fatal) and its purge reports the requeued message ``_PURGE_QUEUE`` — both seen with a 1 s
Produce timeout, and neither is this bug. (The desynchronisation stayed as frequent with 5 s:
docs/scenarios.md, "The client".)"""
DELAYED_END_TXN_SEND_GAP_S = 0.1
DELAYED_END_TXN_END_GAP_S = 0.3
"""And the pace of its transactions: 100 ms between sends and 300 ms before the commit. A held
request is the first the client sends on its coordinator connection after the toxic took it,
so the pause before the commit makes that one an EndTxn about a third of the time (without
it, 1 in 20: the run's other coordinator requests are the AddPartitionsToTxn that precede each
new partition's first send — an estimate from the timings, not a measurement); and the gaps
between sends keep the next transaction open with sends still to come when the late copy
lands, which is when it tears the transaction — sent at once, a transaction is open for a
small part of each cycle and the first run's late copy, if any, fell between transactions
(run r1, docs/scenarios.md)."""


def client_settings(faults: Iterable[str]) -> dict[str, Any]:
    """The :class:`~harness.workload.plans.Plan` settings a run with ``faults`` gives its
    transactional clients: fast timeouts and paced transactions with delayed-end-txn, else
    none."""
    if DELAYED_END_TXN not in set(faults):
        return {}
    return {"txn_config": dict(DELAYED_END_TXN_CLIENT), "send_gap_s": DELAYED_END_TXN_SEND_GAP_S,
            "end_gap_s": DELAYED_END_TXN_END_GAP_S}


def running_txn_ids(running: Mapping[int, Client]) -> list[str]:
    """The transactional.ids of the running transactional clients (producers and processors),
    by process number — what the fault resolves the coordinators of when it is applied."""
    return [transactional_id(client.spec.txn.transactional_id, client.spec.txn.id_policy,
                             process)
            for process, client in list(running.items())
            if isinstance(client.spec, TxnProducerSpec | ProcessorSpec)]
