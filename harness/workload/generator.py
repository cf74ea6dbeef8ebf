"""The generator: how much load, of what shape, from how many client processes, for how long.

Every client is its own OS process writing its own history file. The generator watches them:
a client that dies before the run ends (crashed, killed, or stopped by a fatal client error) is
replaced by a new process with a new process number — HISTORY.md's rule, so one number's rows
always come from one client's life and its ``seq`` stays meaningful.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.lifecycle import reaper
from harness.workload import client
from harness.workload.consumer import ConsumerSpec
from harness.workload.context import RunContext
from harness.workload.group_protocol import GroupProtocol
from harness.workload.producer import ProducerSpec
from harness.workload.recorder import salvage_process

# A client still running this long after the run's end is stuck (it flushes and purges by then).
_EXIT_GRACE_S = 30.0
# Do not start a replacement that would have less than this to live.
_MIN_REPLACEMENT_LIFE_S = 1.0


@dataclass(frozen=True)
class WorkloadSpec:
    """The load: ``rate`` sends per second across all ``producers``; ``consumers`` in ``mode``
    (group: one group, ``commit`` strategy, ``group_protocol``; assign: each reads every
    partition)."""

    bootstrap: str
    topics: tuple[str, ...]
    producers: int = 2
    consumers: int = 2
    rate: float = 200.0
    keys: int = 0
    partitions: int = 0
    acks: str = "all"
    idempotence: bool = True
    retries: int | None = None
    max_in_flight: int = 5
    linger_ms: int = 5
    consumer_mode: str = "group"
    commit: str = "after"
    group: str = "workload"
    # KIP-345: each consumer is a static member (group.instance.id "<group>-<n>"); the process
    # that replaces a crashed one takes over its id, so a quick return causes no rebalance.
    static_members: bool = False
    producer_config: dict[str, Any] = field(default_factory=dict)
    consumer_config: dict[str, Any] = field(default_factory=dict)
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC

    def __post_init__(self) -> None:
        if self.producers < 0 or self.consumers < 0 or self.producers + self.consumers == 0:
            raise ValueError("need at least one producer or consumer (and no negative counts)")
        if self.static_members and self.consumer_mode != "group":
            raise ValueError("static members need consumer_mode 'group'")
        if self.group_protocol == GroupProtocol.CONSUMER and self.consumer_mode != "group":
            raise ValueError("the consumer group protocol needs consumer_mode 'group'")

    def producer_spec(self) -> ProducerSpec:
        return ProducerSpec(
            bootstrap=self.bootstrap, topics=self.topics, acks=self.acks,
            idempotence=self.idempotence, retries=self.retries, max_in_flight=self.max_in_flight,
            linger_ms=self.linger_ms, keys=self.keys, partitions=self.partitions,
            rate=self.rate / max(1, self.producers), config=dict(self.producer_config),
        )

    def consumer_spec(self, n: int = 0) -> ConsumerSpec:
        config = dict(self.consumer_config)
        if self.static_members:
            config["group.instance.id"] = f"{self.group}-{n}"
        return ConsumerSpec(
            bootstrap=self.bootstrap, topics=self.topics, mode=self.consumer_mode,
            group=self.group, commit=self.commit, config=config,
            group_protocol=self.group_protocol,
        )

    def roles(self) -> list[tuple[str, client.ClientSpec]]:
        return ([("producer", self.producer_spec())] * self.producers
                + [("consumer", self.consumer_spec(n)) for n in range(self.consumers)])


@dataclass
class Client:
    process: int
    role: str
    spec: client.ClientSpec
    popen: subprocess.Popen
    log_path: Path
    ledger_entry: int | None = None  # the reaper's, released once the client is reaped


@dataclass
class Ended:
    process: int
    role: str
    returncode: int
    replaced_by: int | None


class Generator:
    """Starts the clients, replaces the ones that die, waits for the rest to finish."""

    def __init__(self, spec: WorkloadSpec | list[tuple[str, client.ClientSpec]],
                 context: RunContext, log_dir: Path | str) -> None:
        self.roles = spec.roles() if isinstance(spec, WorkloadSpec) else list(spec)
        self.context = context
        self.history_dir = Path(context.history_dir)
        self.log_dir = Path(log_dir)
        self.next_process = context.process
        self.running: dict[int, Client] = {}
        self.ended: list[Ended] = []

    def _launch(self, role: str, spec: client.ClientSpec) -> Client:
        process = self.next_process
        self.next_process += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"process-{process:04d}-{role}.log"
        with log_path.open("wb") as log:
            # A session of its own (spawn's default): a Ctrl-C reaches the harness, which
            # stops them.
            popen, entry = reaper.spawn(
                client.command(role, spec, self.context.with_process(process)),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        started = Client(process, role, spec, popen, log_path, entry)
        self.running[process] = started
        return started

    def start(self) -> None:
        self.history_dir.mkdir(parents=True, exist_ok=True)
        for role, spec in self.roles:
            self._launch(role, spec)

    def check(self) -> list[Ended]:
        """Collect clients that exited; replace each that failed while the run still goes on."""
        ended = []
        for process, running in list(self.running.items()):
            code = running.popen.poll()
            if code is None:
                continue
            del self.running[process]
            reaper.release(running.ledger_entry)
            salvage_process(self.history_dir, process)
            ended_by = None
            if code != 0 and self.context.remaining_s() > _MIN_REPLACEMENT_LIFE_S:
                replacement = self._launch(running.role, _without_planted_crash(running.spec))
                ended_by = replacement.process
            ended.append(Ended(process, running.role, code, ended_by))
        self.ended += ended
        return ended

    def kill(self, process: int) -> None:
        """SIGKILL one client (a client crash); :meth:`check` then replaces it."""
        self.running[process].popen.kill()

    def wait(self, *, interval: float = 0.2) -> list[Ended]:
        """Supervise until the run's end, then until every client has exited (killing any still
        running after a grace period). Returns every client that ended, in order."""
        while self.context.remaining_s() > 0:
            self.check()
            time.sleep(min(interval, max(0.0, self.context.remaining_s())))
        deadline = time.monotonic() + _EXIT_GRACE_S
        while self.running and time.monotonic() < deadline:
            self.check()
            time.sleep(interval)
        self.stop()
        return self.ended

    def stop(self) -> None:
        """Kill whatever still runs and salvage its rows. Safe to call twice."""
        for running in self.running.values():
            running.popen.kill()
        for running in self.running.values():
            running.popen.wait()
            reaper.release(running.ledger_entry)
            self.ended.append(Ended(running.process, running.role, running.popen.returncode, None))
            salvage_process(self.history_dir, running.process)
        self.running.clear()


def _without_planted_crash(spec: client.ClientSpec) -> client.ClientSpec:
    """A planted crash happens once: the client that replaces a crashed one runs clean."""
    if isinstance(spec, ConsumerSpec) and spec.crash_after_commits is not None:
        return replace(spec, crash_after_commits=None)
    return spec
