"""Entry point of one client process: ``python -m harness.workload.client JSON``.

The JSON names the role (``producer``, ``consumer``, ``txn-producer`` or ``processor``), its spec
and the run context; see
:func:`command` for the one place that builds it. A separate interpreter per client means a
SIGKILL takes exactly one client, as a crash would, and the GIL is not shared between them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from harness.workload.consumer import ConsumerSpec
from harness.workload.consumer import run as run_consumer
from harness.workload.context import RunContext
from harness.workload.producer import ProducerSpec
from harness.workload.producer import run as run_producer
from harness.workload.transactions import TxnProducerSpec, TxnSettings
from harness.workload.transactions import run as run_txn_producer
from harness.workload.transform import ProcessorSpec
from harness.workload.transform import run as run_processor

ClientSpec = ProducerSpec | ConsumerSpec | TxnProducerSpec | ProcessorSpec
"""What one client process is told to be (each role's spec)."""

# role → (its spec class, the function that runs it with a spec of that class)
ROLES: dict[str, tuple[type, Callable[[Any, RunContext], int]]] = {
    "producer": (ProducerSpec, run_producer),
    "consumer": (ConsumerSpec, run_consumer),
    "txn-producer": (TxnProducerSpec, run_txn_producer),
    "processor": (ProcessorSpec, run_processor),
}


def command(role: str, spec: ClientSpec, context: RunContext) -> list[str]:
    document = {"role": role, "spec": asdict(spec), "context": asdict(context)}
    return [sys.executable, "-m", "harness.workload.client", json.dumps(document)]


def _as_spec(cls: type, data: dict[str, Any]) -> Any:
    """JSON has lists where the specs hold tuples (they are frozen and hashable), and dicts
    where they hold a dataclass."""
    values = {}
    for spec_field in fields(cls):
        value = data[spec_field.name]
        if spec_field.name == "topics":
            value = tuple(value)
        elif spec_field.name == "assignment":
            value = tuple((topic, partition) for topic, partition in value)
        elif spec_field.name == "txn":  # a transactional client's settings, a dataclass too
            value = TxnSettings(**value)
        values[spec_field.name] = value
    return cls(**values)


def main(argv: list[str]) -> int:
    document = json.loads(argv[0])
    spec_class, run = ROLES[document["role"]]
    return run(_as_spec(spec_class, document["spec"]), RunContext(**document["context"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
