"""One run, end to end: suites → up → workload + nemesis → heal → wait → final read → check →
report.

This is Jepsen's test lifecycle with the harness's parts: the cluster (behind Toxiproxy when the
proxied backend is available), the generator's client processes, the seeded nemesis schedule, the
final read, and the checker. Everything a run produces stays in its run directory::

    <dir>/suites/       the suites' table (matrix.html/.md/.json), pytest log and JUnit XML
    <dir>/cluster/      ZooKeeper, brokers, Toxiproxy: configs, data, logs
    <dir>/history/      one Parquet file per client process (process 0 is the nemesis) and
                        run-manifest.json: seed, options, the replay command (checker.manifest)
    <dir>/logs/         each client process's output
    <dir>/report/       report.html, report.json, junit.xml
    <dir>/run.json      what ran (options, seed, schedule, clients) and the verdict

The suites (``--suites``; none when the run is used as a library) run first, in a pytest session
of their own against a reference cluster of their own. The exit code is the checker's verdict,
made 1 by a failed suite test: 0 valid, 1 an anomaly the guarantee forbids, 2 bad
options, 3 the infrastructure (cluster, clients, Spark) failed, 130 interrupted (SIGINT/Ctrl-C
or SIGTERM): the clients are stopped, faults lifted and the cluster stopped, and the history
written so far is kept with a ``run.json`` saying the run was interrupted — it is not checked.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console

from harness import history
from harness.checker import manifest, report
from harness.checker.engine import Engine, SparkError, choose, judge, stdout_to_stderr
from harness.checker.result import (
    DEFAULT_GUARANTEE,
    GUARANTEES,
    SCHEMA_VERSION,
    CheckResult,
    ReportData,
)
from harness.cluster.errors import PeerStartError
from harness.cluster.factory import Faults, RunnableCluster, build
from harness.cluster.nodes import ClusterNodes
from harness.cluster.options import (
    DISK_TARGETS,
    Backend,
    ClusterOptions,
    Network,
    TargetName,
    check_options,
)
from harness.cluster.recipe import load_recipe
from harness.cluster.registry import BROKER_KINDS
from harness.cluster.spec import ClusterSpec
from harness.conformance import matrix
from harness.disk.broker_disk import DiskLayer
from harness.lifecycle.interrupts import interrupt_once
from harness.nemesis.disk import layer_for
from harness.nemesis.executor import FaultTarget, Nemesis
from harness.nemesis.schedule import FAULTS, QUIET_S, Step, pacing, plan
from harness.nemesis.txn_clients import client_settings, running_txn_ids
from harness.net.netns_support import unavailable
from harness.run import deadline, replay, resources, target_support, warm_up
from harness.run.deadline import EndPlan
from harness.run.latest import point_latest
from harness.run.read_back import read_back
from harness.run.result import RunResult
from harness.run.supervise import END_FILE, WorkloadClock, supervise
from harness.waiting import ClusterWaitTimeout
from harness.workload import kinds
from harness.workload.broker_apis import lacking_consumer_protocol
from harness.workload.context import RunContext
from harness.workload.generator import Generator, WorkloadSpec
from harness.workload.group_protocol import GroupProtocol
from harness.workload.plans import Plan
from harness.workload.recorder import Recorder

VALID, INVALID, USAGE, INFRASTRUCTURE, INTERRUPTED = 0, 1, 2, 3, 130
NEMESIS_PROCESS = 0
ENGINES = tuple(Engine)
SUITES = tuple(s for s in matrix.SUITES if s != "chaos")  # the run is the chaos part itself
DEFAULT_SUITES = SUITES
_ISR_TIMEOUT_S = 60.0


class RunError(RuntimeError):
    """The run could not be carried out; ``code`` is the exit code to give."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RunOptions:
    duration_s: float = 60.0
    brokers: int = 3
    nemesis: tuple[str, ...] = ("partition", "kill")
    seed: int | None = None
    guarantee: str = DEFAULT_GUARANTEE
    run_dir: Path | None = None
    topic: str = "workload"
    partitions: int = 3
    producers: int = 2
    consumers: int = 2
    rate: float = 100.0
    consumer_mode: str = "group"
    commit: str = "after"
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC  # or KIP-848's: member epochs
    acks: str = "all"
    idempotence: bool = True
    engine: str = Engine.AUTO  # python for a short run's history, spark for a big one
    master: str | None = None
    network: str = Network.PROXY  # Toxiproxy on every link, or namespaces + iptables
    backend: str = Backend.LOCAL  # local processes, or docker containers
    suites: tuple[str, ...] = ()  # suites/ directories run against a cluster of the target first
    target: str = TargetName.REFERENCE  # the broker kind: reference or apache-kafka
    compression: str = "none"  # the producers' compression.type
    # A fixed nemesis schedule (e.g. schedule.repeated) instead of one planned from the seed.
    schedule: tuple[Step, ...] | None = None
    static_members: bool = False  # consumers as KIP-345 static members (group.instance.id)
    recipe: str | None = None  # the recipe file of the recipe target (docs/recipes.md)
    # A soak: faults spaced so brokers live for minutes, and the run fails when a process's
    # RSS or open files grew past resources.GROWTH_LIMIT after warm-up (docs/soak.md).
    soak: bool = False
    # What the clients do; transactional kinds abort abort_p of their transactions on purpose.
    workload: kinds.WorkloadKind = kinds.WorkloadKind.PRODUCE_CONSUME
    abort_p: float = kinds.DEFAULT_ABORT_P
    txn_id_policy: kinds.TxnIdPolicy = kinds.TxnIdPolicy.FRESH

    def validate(self) -> None:
        """Raise RunError(USAGE) naming the bad option and what is allowed."""
        problems = []
        if self.duration_s <= 0:
            problems.append(f"--duration must be > 0, got {self.duration_s}")
        if self.brokers < 1:
            problems.append(f"--brokers must be >= 1, got {self.brokers}")
        if self.guarantee not in GUARANTEES:
            problems.append(f"--guarantee must be one of {', '.join(GUARANTEES)}")
        try:
            recipe = load_recipe(self.recipe) if self.recipe else None
            check_options(self.target, None, max(self.brokers, 1), self.network, self.backend,
                          recipe=recipe)
        except ValueError as exc:
            problems.append(str(exc))
        else:
            if TargetName(self.target) not in {*BROKER_KINDS, TargetName.RECIPE}:
                problems.append(f"a run needs a target the harness can fault "
                                f"({', '.join(BROKER_KINDS)}), not {self.target!r}")
            problems += target_support.transaction_problems(self.workload, recipe, self.recipe)
        if self.engine not in ENGINES:
            problems.append(f"--engine must be one of {', '.join(ENGINES)}")
        unknown = [n for n in self.nemesis if n not in FAULTS]
        if unknown:
            problems.append(f"unknown nemesis fault(s) {unknown}; allowed: {', '.join(FAULTS)}")
        if layer_for(list(self.nemesis)) is not DiskLayer.NONE and self.target not in (
                *DISK_TARGETS, TargetName.RECIPE):
            problems.append(f"disk faults run on {', '.join(DISK_TARGETS)} (or a recipe), "
                            f"not {self.target!r}")
        unknown = [n for n in self.suites if n not in SUITES]
        if unknown:
            problems.append(f"unknown suite(s) {unknown}; allowed: {', '.join(SUITES)}")
        if self.static_members and self.consumer_mode != "group":
            problems.append("static members need --consumer-mode group")
        problems += target_support.group_protocol_problems(
            self.group_protocol, self.consumer_mode, self.target)
        problems += kinds.workload_problems(self.workload, self.txn_id_policy,
                                            abort_p=self.abort_p, producers=self.producers,
                                            consumers=self.consumers, acks=self.acks,
                                            idempotence=self.idempotence,
                                            consumer_mode=self.consumer_mode)
        if self.compression not in COMPRESSIONS:
            problems.append(f"compression must be one of {', '.join(COMPRESSIONS)}, "
                            f"got {self.compression!r}")
        if problems:
            raise RunError(USAGE, "; ".join(problems))


COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")  # librdkafka's compression.type
# A soak's pacing and judgement. Planned as usual, a fault comes every ~10 s and each broker is
# restarted about every 90 s, too soon for a leak to show in one process's life; with 30-60 s
# between faults each broker lives several minutes, sampled every minute after 3 minutes'
# warm-up (the JVM's heap, the page cache and the clients' connections settle first).
SOAK_QUIET_S = (30.0, 60.0)
SOAK_WARMUP_S = 180.0
SOAK_MIN_SPAN_S = 300.0  # a life is judged on at least five minutes after its warm-up
# A JVM's RSS grows as it commits heap up to -Xmx, over many minutes and without a leak: in a
# 30-min soak Kafka's brokers grew 21-47 % per life and ZooKeeper 33 % (docs/soak.md). A soak
# therefore gives the JVMs a fixed heap, touched at start, so RSS shows what grows outside
# it; the user's own settings win.
SOAK_JVM_HEAPS = {"KAFKA_HEAP_OPTS": "-Xms512m -Xmx512m -XX:+AlwaysPreTouch",
                  "ZOOKEEPER_HEAP_OPTS": "-Xms256m -Xmx256m -XX:+AlwaysPreTouch"}


def default_run_dir(seed: int) -> Path:
    return Path(".harness") / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}"


# ---------------------------------------------------------------------------------------------
# The cluster


def _start_cluster(options: RunOptions, run_dir: Path
                   ) -> tuple[RunnableCluster, ClusterNodes, Faults, str]:
    """(what to stop, its nodes — the LocalCluster, or the DockerCluster itself —, its
    network faults, the network mechanism for the report)."""
    cluster_options = ClusterOptions(TargetName(options.target), options.brokers,
                                     Network(options.network), Backend(options.backend),
                                     recipe=load_recipe(options.recipe) if options.recipe
                                     else None)
    spec = ClusterSpec(
        brokers=options.brokers,
        min_insync_replicas=min(2, options.brokers),
        properties={"group.initial.rebalance.delay.ms": 0},
        # Disk faults need each broker's log dir on a disk of the harness's (harness.disk).
        disk=layer_for([*options.nemesis, *(s.fault for s in options.schedule or ())]),
    )
    if cluster_options.network == Network.KERNEL:
        reason = unavailable()
        if reason is not None:
            raise RunError(INFRASTRUCTURE, f"the cluster could not start: {reason}")
    built = build(cluster_options, run_dir / "cluster", spec=spec)
    try:
        built.cluster.start()
    except (PeerStartError, ClusterWaitTimeout, OSError, RuntimeError) as exc:
        raise RunError(INFRASTRUCTURE, f"the cluster could not start: {exc}") from exc
    return built.cluster, built.cluster.cluster, built.faults, built.mechanism


def _process_ids(cluster: ClusterNodes) -> dict[str, int | None]:
    """What a run samples: every broker, ZooKeeper and this process (the workload's
    supervisor and the nemesis)."""
    pids: dict[str, int | None] = {f"broker-{broker_id}": node.pid
                                   for broker_id, node in cluster.brokers.items()}
    if cluster.zookeeper is not None:
        pids["zookeeper"] = cluster.zookeeper.pid
    pids[resources.HARNESS] = os.getpid()
    return pids


def _require_consumer_protocol(cluster: ClusterNodes) -> None:
    """RunError(USAGE) unless every broker offers ConsumerGroupHeartbeat (harness.workload.
    broker_apis): a target the static check could not judge (a recipe's) is refused here."""
    brokers = [(b, n.host, n.port) for b, n in sorted(cluster.brokers.items()) if n.port]
    try:
        lacking = lacking_consumer_protocol(brokers)
    except (OSError, RuntimeError) as exc:
        raise RunError(INFRASTRUCTURE, f"cannot ask the brokers for ApiVersions: {exc}") from exc
    if lacking:
        raise RunError(USAGE, f"--group-protocol consumer needs ConsumerGroupHeartbeat (KIP-848), "
                              f"which broker(s) {', '.join(map(str, lacking))} do not offer")


def _client_bootstrap(handle: RunnableCluster) -> str:
    return handle.bootstrap  # ProxiedCluster: the client proxies; NetnsCluster: the brokers


def _create_topic(bootstrap: str, cluster: ClusterNodes, topic: str, partitions: int,
                  replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)
    except KafkaException as exc:
        raise RunError(INFRASTRUCTURE, f"cannot create topic {topic}: {exc}") from exc
    cluster.wait_for(lambda: all(cluster.leader(topic, p) is not None for p in range(partitions)),
                     30, f"leaders for every partition of {topic}")


def _wait_for_isr(cluster: ClusterNodes, topics: tuple[str, ...], partitions: int,
                  replication: int, notes: list[str]) -> None:
    def recovered() -> bool:
        for topic in topics:
            for p in range(partitions):
                state = cluster.partition_state(topic, p)
                if state is None or state["leader"] < 0 or len(state["isr"]) < replication:
                    return False
        return True

    try:
        cluster.wait_for(recovered, _ISR_TIMEOUT_S,
                         f"full ISRs for every partition of {', '.join(topics)}")
    except ClusterWaitTimeout as exc:
        notes.append(f"ISR did not fully recover before the final read: {exc}")


# ---------------------------------------------------------------------------------------------
# The checker


def check_history(history_dir: Path, guarantee: str, engine: str = Engine.AUTO,
                  master: str | None = None) -> tuple[CheckResult, ReportData]:
    """Judge a run's history with the checker ``kafka-harness check`` uses (or its pure-Python
    reference rules, for small histories and tests)."""
    try:
        size = sum(p.stat().st_size for p in history.history_files(history_dir))
        result, data = judge(history_dir, guarantee, engine, master=master, history_bytes=size)
    except history.HistoryError as exc:
        # The workload wrote it: a malformed history here is the harness failing, not the user.
        raise RunError(INFRASTRUCTURE, f"the run's history is malformed: {exc}") from exc
    except SparkError as exc:
        raise RunError(INFRASTRUCTURE, str(exc)) from exc
    assert data is not None  # judge gathers it unless told not to
    return result, data


# ---------------------------------------------------------------------------------------------
# The run


class Run:
    def __init__(self, options: RunOptions, console: Console | None = None) -> None:
        options.validate()
        self.options = options
        self.console = console or Console(stderr=True)
        self.seed = options.seed if options.seed is not None else random.randrange(2**31)
        self.run_id = f"run-{uuid.uuid4().hex[:12]}"
        self.dir = Path(options.run_dir or default_run_dir(self.seed)).resolve()
        self.history_dir = self.dir / "history"
        self.replication = min(3, options.brokers)
        self.result = RunResult(self.run_id, str(self.dir), self.seed, INFRASTRUCTURE, None,
                                "none", options.guarantee)

    def run_manifest(self) -> manifest.RunManifest:
        """How to make this run again (seed, options, the replay command) and what its nemesis
        reported doing so far; kept next to the history for the report and for ``check``."""
        argv, caveats = replay.replay_command(self.options, self.seed)
        options = json.loads(json.dumps(asdict(self.options), default=str))
        accounts = [manifest.NemesisAccount(str(done["what"]), done.get("result"),
                                            done.get("error")) for done in self.result.nemesis]
        return manifest.RunManifest(self.run_id, self.seed, self.options.seed is not None,
                                    options, argv, caveats, accounts)

    def _say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def execute(self) -> RunResult:
        """Carry out the run; never raises for a failure of the cluster, clients or checker
        (the result's exit code and error say what failed). An interrupt (SIGINT, SIGTERM)
        stops everything the run started, writes ``run.json`` (exit code 130) and is re-raised
        as KeyboardInterrupt, so a caller such as pytest stops too; :func:`run` turns it into
        the exit code."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.options.run_dir is None:  # a run of the runs directory: now its newest
            point_latest(self.dir)
        self.history_dir.mkdir(exist_ok=True)
        manifest.write(self.history_dir, self.run_manifest())  # first, so any history has one
        try:
            with interrupt_once():
                suites_code = self._suites() if self.options.suites else VALID
                self._execute()
            if self.result.exit_code == VALID:
                self.result.exit_code = suites_code
        except RunError as exc:
            self.result.exit_code = exc.code
            self.result.error = str(exc)
            self._say(f"[red]error:[/] {exc}")
        except KeyboardInterrupt:
            # Every finally below has run: clients stopped, faults lifted, cluster stopped.
            self.result.exit_code = INTERRUPTED
            self.result.error = "interrupted: the run was stopped before its end and not checked"
            self._say(f"[yellow]interrupted:[/] everything the run started was stopped; the "
                      f"history so far is in {self.history_dir}")
            self._write_summary()
            raise
        self._write_summary()
        return self.result

    def _suites(self) -> int:
        """The suites against a cluster of the run's target of their own (one pytest session, as
        ``kafka-harness matrix`` runs it); their table is ``suites/matrix.html``. Returns the
        exit code they give: 0 all passed, 1 a test failed, 3 they could not be run."""
        runs, files = matrix.run_matrix((self.options.target,), self.options.suites,
                                        self.dir / "suites", say=self._say,
                                        backend=Backend(self.options.backend),
                                        recipe=Path(self.options.recipe) if self.options.recipe
                                        else None)
        suites = runs[0]
        self.result.suites = {
            "names": list(self.options.suites), "counts": dict(suites.counts()),
            "failed": [t["nodeid"] for t in suites.tests if t["outcome"] in ("failed", "error")],
            "wall_s": suites.wall_s, "files": files, "log": suites.log, "junit": suites.junit}
        self.result.report += [files["html"], suites.junit]
        for nodeid in self.result.suites["failed"]:
            self._say(f"[red]suite test failed:[/] {nodeid}")
        return matrix.exit_code(runs, frozenset({self.options.target}))

    def _execute(self) -> None:
        options = self.options
        if options.soak:
            for name, value in SOAK_JVM_HEAPS.items():
                os.environ.setdefault(name, value)  # the brokers and ZooKeeper inherit it
        with self.console.status(f"Starting ZooKeeper and {options.brokers} broker(s)…"):
            handle, cluster, network, kind = _start_cluster(options, self.dir)
        self.result.cluster = kind
        try:
            if options.group_protocol == GroupProtocol.CONSUMER:
                _require_consumer_protocol(cluster)
            bootstrap = _client_bootstrap(handle)
            self._say(f"cluster ({kind}) up: bootstrap {bootstrap}; run dir {self.dir}")
            topics = kinds.workload_topics(kinds.WorkloadKind(options.workload), options.topic)
            for topic in topics:
                _create_topic(bootstrap, cluster, topic, options.partitions, self.replication)
            first_final = self._workload(bootstrap, cluster, network)
            with self.console.status("Waiting for every partition's ISR to recover…"):
                _wait_for_isr(cluster, topics, options.partitions, self.replication,
                              self.result.notes)
            read_back(self.console, self.result, bootstrap,
                      [(t, p) for t in topics for p in range(options.partitions)],
                      transactional=kinds.WorkloadKind(options.workload).transactional,
                      history_dir=self.history_dir, run_start_ns=self._run_start_ns,
                      first_process=first_final)
        finally:
            with self.console.status("Stopping the cluster…"):
                handle.stop()
        self._judge()

    def _workload(self, bootstrap: str, cluster: ClusterNodes, network: Faults | None) -> int:
        """Clients and nemesis for the run's duration, then heal; returns the next free
        process number."""
        options = self.options
        workload = WorkloadSpec(
            bootstrap=bootstrap, topics=(options.topic,), producers=options.producers,
            consumers=options.consumers, rate=options.rate, acks=options.acks,
            idempotence=options.idempotence, consumer_mode=options.consumer_mode,
            commit=options.commit, group=f"{self.run_id}-group",
            static_members=options.static_members,
            producer_config={"compression.type": options.compression},
            group_protocol=GroupProtocol(options.group_protocol),
        )
        clients = Plan(kinds.WorkloadKind(options.workload), workload, options.topic,
                       options.partitions, self.run_id, options.abort_p,
                       kinds.TxnIdPolicy(options.txn_id_policy), self.seed,
                       **client_settings([*options.nemesis,
                                          *(s.fault for s in options.schedule or ())]))
        try:
            clients.prepare()
        except ClusterWaitTimeout as exc:
            raise RunError(INFRASTRUCTURE, f"no coordinator answered: {exc}") from exc
        roles = clients.roles()
        groups = warm_up.groups_of(roles)
        self._run_start_ns = time.monotonic_ns()
        clock = WorkloadClock(self.dir / END_FILE, EndPlan.of(
            options.duration_s, [], shift_s=warm_up.TIMEOUT_S if groups else 0.0))
        context = RunContext(str(self.history_dir), self.run_id, NEMESIS_PROCESS + 1,
                             self._run_start_ns, int(options.duration_s * 1e9), str(clock.path))
        generator = Generator(roles, context, self.dir / "logs")

        def crash_client(rng: random.Random, role: str) -> str | None:
            running = sorted(process for process, client in generator.running.items()
                             if role in ("client", client.role))
            if not running:
                return None
            victim = rng.choice(running)
            generator.kill(victim)
            return f"process {victim}"

        transactional = kinds.WorkloadKind(options.workload).transactional
        target = FaultTarget(cluster, network, crash_client, self.seed,
                             txn_ids=(lambda: running_txn_ids(generator.running))
                             if transactional else None)
        faults = tuple(f for f in options.nemesis if target.unsupported(f) is None)
        for fault in options.nemesis:
            if fault not in faults:
                self.result.notes.append(f"skipped fault {fault}: {target.unsupported(fault)}")
        fault_s, quiet_s = pacing(faults, SOAK_QUIET_S if options.soak else QUIET_S)
        steps = (plan(self.seed, faults, options.duration_s, options.brokers, quiet_s=quiet_s,
                      fault_s=fault_s)
                 if options.schedule is None else
                 [step for step in options.schedule if target.unsupported(step.fault) is None])
        recorder = Recorder(self.history_dir, self.run_id, NEMESIS_PROCESS, self._run_start_ns)
        nemesis = Nemesis([], target, recorder)  # the schedule's, once the groups are warm
        sampler = resources.ResourceSampler(lambda: _process_ids(cluster))
        try:
            sampler.start()
            generator.start()
            clock.plan = EndPlan.of(options.duration_s, steps,  # no faults: nothing to gate
                                    self._warm_up(bootstrap, groups if steps else [], generator))
            self.result.schedule = [s.as_dict() for s in clock.plan.shifted(steps)]
            nemesis = Nemesis(clock.plan.shifted(steps), target, recorder)
            nemesis.start()
            self._supervise(generator, nemesis, clock)
            with self.console.status("Healing every fault…"):
                nemesis.finish()
            with self.console.status("Waiting for the clients to finish…"):
                generator.wait()
        finally:
            self._resources(sampler.stop())
            generator.stop()
            nemesis.halt()  # only reached early on an error or an interrupt: no heal needed
            recorder.close()
            # Also after an error or an interrupt: run.json and the manifest say what was done.
            self.result.nemesis = nemesis.done
            self.result.clients = [asdict(e) for e in generator.ended]
        return generator.next_process

    def _resources(self, samples: list[resources.Sample]) -> None:
        """``resources.json`` for every run; for a soak also the judgement, which fails the
        run (exit 1, like an anomaly) when a process grew past the limit or nothing lived
        long enough to be judged."""
        judgement = (resources.judge(samples, warmup_s=SOAK_WARMUP_S,
                                     min_span_s=SOAK_MIN_SPAN_S)
                     if self.options.soak else None)
        resources.write(self.dir / "resources.json", samples, judgement)
        if judgement is None:
            return
        self.result.resources = judgement.as_dict()
        for line in resources.summary_lines(judgement):
            self._say(f"soak: {line}")
        if not judgement.passed:
            what = (", ".join(f"{life.node} (pid {life.pid})" for life in judgement.grown)
                    or "nothing lived long enough after warm-up to be judged")
            self.result.notes.append(f"soak failed: grew past "
                                     f"{judgement.limit:.0%}: {what}")

    def _warm_up(self, bootstrap: str, groups: list[warm_up.GroupWant],
                 generator: Generator) -> float:
        """Wait for the run's consumer groups to be Stable and assigned (harness.run.warm_up);
        returns how long after the run's start that was: the schedule's shift."""
        with self.console.status("Waiting for the consumer groups to be Stable…"):
            note = warm_up.wait_until_warm(bootstrap, groups, self.options.partitions,
                                           generator.check)
        if note is not None:
            self.result.notes.append(note)
        return round((time.monotonic_ns() - self._run_start_ns) / 1e9, 3) if groups else 0.0

    def _supervise(self, generator: Generator, nemesis: Nemesis, clock: WorkloadClock) -> None:
        """Until the workload's end, which the runner moves while the schedule is not done;
        the run's ``workload_end`` (and a note, if the end moved) say how it went."""
        with self.console.status("") as status:
            supervise(generator, nemesis, clock, status.update)
        self.result.workload_end = deadline.account(clock.plan, clock.end_s,
                                                    nemesis.schedule_done_s)
        note = deadline.extension_note(clock.plan, clock.end_s, nemesis.schedule_done_s)
        if note is not None:
            self.result.notes.append(note)

    def _judge(self) -> None:
        options = self.options
        choice = choose(self.history_dir, options.engine, master=options.master)
        with self.console.status(f"Checking the history ({choice.summary})…"), \
                stdout_to_stderr():
            result, data = check_history(self.history_dir, options.guarantee, choice.engine,
                                         options.master)
        written = report.write_reports(self.dir / "report", result, data, str(self.history_dir),
                                       manifest.Provenance(self.run_manifest()), choice.to_json())
        report.print_summary(self.console, result, str(self.history_dir), judged_by=choice.summary)
        self.result.valid = result.valid
        soak_failed = bool(self.result.resources) and not self.result.resources["passed"]
        self.result.exit_code = VALID if result.valid and not soak_failed else INVALID
        self.result.anomalies = {name: a.count for name, a in result.anomalies.items()}
        self.result.stats = dict(result.stats)
        self.result.engine = choice.to_json()
        self.result.report += [str(p) for p in written]

    def _write_summary(self) -> None:
        manifest.write(self.history_dir, self.run_manifest())  # now with the nemesis' accounts
        result = self.result.as_dict()
        summary = {"schema_version": result.pop("schema_version"),
                   "options": {k: (str(v) if isinstance(v, Path) else v)
                               for k, v in asdict(self.options).items()},
                   **result}
        path = self.dir / "run.json"
        tmp = path.with_name(".run.json.tmp")
        tmp.write_text(json.dumps(summary, indent=1, default=str))
        os.replace(tmp, path)


def run(options: RunOptions, *, as_json: bool = False) -> int:
    """`kafka-harness run`: carry out one run, print the verdict; returns the exit code."""
    console = Console(stderr=True)
    try:
        runner = Run(options, console)
    except RunError as exc:
        console.print(f"[red]error:[/] {exc}", highlight=False)
        if as_json:
            print(json.dumps({"schema_version": SCHEMA_VERSION, "error": str(exc),
                              "exit_code": exc.code}))
        return exc.code
    try:
        result = runner.execute()
    except KeyboardInterrupt:
        result = runner.result  # stopped and summarised: exit 130, the history kept
    if as_json:
        print(json.dumps(result.as_dict(), default=str))
    else:
        verdict = {VALID: "[green]VALID[/]", INVALID: "[red]INVALID[/]",
                   INTERRUPTED: "[yellow]INTERRUPTED[/]"}.get(
            result.exit_code, "[red]FAILED[/]")
        console.print(f"run {result.run_id} (seed {result.seed}): {verdict}; "
                      f"everything is in {result.dir}", highlight=False)
        for note in result.notes:
            console.print(f"[yellow]note:[/] {note}", highlight=False)
    return result.exit_code
