"""A run's last workload step: every partition read back from its start, after the clients and
the faults are gone, into the history (:mod:`harness.workload.final_read`).

After a transactional workload the read is read_committed, and it first waits (bounded) until
no transaction is left open on any partition; the run says on its console and in ``run.json``
(``final_wait``) what it waited for, how long, and where in vain.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from harness.run.result import RunResult
from harness.workload.final_read import final_read, wait_until_stable
from harness.workload.kinds import Isolation


def read_back(console: Console, result: RunResult, bootstrap: str,
              partitions: list[tuple[str, int]], *, transactional: bool, history_dir: Path,
              run_start_ns: int, first_process: int) -> None:
    """Read ``partitions`` into the history (process numbers from ``first_process``) and put
    what was read, waited for and missed into ``result``."""
    isolation = None
    if transactional:
        isolation = Isolation.READ_COMMITTED
        with console.status("Waiting for open transactions to end…"):
            wait = wait_until_stable(bootstrap, partitions)
        result.final_wait = wait.as_dict()
        console.print(wait.describe(), highlight=False)
        if not wait.stable:
            result.notes.append(wait.describe())
    with console.status("Final read…"):
        reads = final_read(bootstrap, partitions, history_dir, result.run_id, run_start_ns,
                           first_process, isolation=isolation)
    result.final_read = [asdict(r) for r in reads]
    incomplete = [f"{r.topic}/{r.partition}" for r in reads if not r.complete]
    if incomplete:
        result.notes.append(f"final read did not reach the end of {', '.join(incomplete)}")
