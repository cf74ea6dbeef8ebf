"""One scenario, three topics: unclean.leader.election.enable off, on, and turned on at runtime.

Kafka's contract (topic config ``unclean.leader.election.enable``, default false since KIP-106):
a partition whose in-sync replicas are all dead may be led by an out-of-sync replica only if
unclean election is enabled for its topic. The setting is per topic and read at election time,
so one run of the scenario checks every setting side by side, on the same brokers at the same
moments — what the issue means by "both settings on the same scenario":

1. four topics with replicas ``[in_sync, out_of_sync]`` (neither the controller's node):
   with ``min.insync.replicas=1`` *off* (false), *on* (true) and *flip* (false, later set to
   true); and *elr* (false) with ``min.insync.replicas=2``, for KIP-966's eligible leader
   replicas where the metadata has them (its ISR falls below the minimum in step 3, and the
   replica that left is kept as one that may lead without loss);
2. *before* — records acknowledged (acks=all) on each while both replicas are in sync;
3. ``out_of_sync`` stops and leaves every ISR;
4. *unreplicated* — records acknowledged by the ISR ``[in_sync]`` alone (*elr* refuses them:
   its ISR is below its minimum);
5. the link between the two replicas is cut and ``out_of_sync`` starts again: it registers
   and lives, but cannot fetch what it missed, so it stays out of every ISR;
6. ``in_sync`` stops: the only in-sync replica is dead, the out-of-sync one alive;
7. *on* elects ``out_of_sync``, and so does *elr* from its ELR; *off* and *flip* stay offline
   and refuse a send;
8. *flip* gets the config set to true (IncrementalAlterConfigs) and elects ``out_of_sync``:
   ZooKeeper's controller on the change itself, a KRaft controller at its next check of
   leaderless partitions (``unclean.leader.election.interval.ms``, waited for);
9. *after* — records written to *on* and *flip*; they take the offsets of the lost ones;
10. the cut heals and ``in_sync`` starts again: *off* (and *flip* if still offline) is led by
    it, with everything it acknowledged;
11. a final read of every topic, and the harness's checker over the whole history.

At most one broker is down at any moment and the controller's node is never touched, so the
same scenario runs where the metadata lives in ZooKeeper and where it lives in a KRaft quorum
of the brokers themselves (combined nodes: two stopped voters of three would leave no quorum
to elect anybody).

Every send goes through the workload's recording producer and every fault is a nemesis row,
so the history (HISTORY.md) says what was acknowledged and the final read what survived; the
checker, not the test, names the lost records. Brokers stop gracefully: what makes the scenario
is which replica holds which records, and a crash would only add a session timeout per step.
Observations that tests judge (a partition's state at each step) are recorded rather than
asserted here, so a broker that gets one setting wrong fails that setting's test only.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from harness import history
from harness.checker.engine import Engine, judge
from harness.checker.result import DEFAULT_GUARANTEE, CheckResult
from harness.cluster.targets import Target
from harness.history import Event
from harness.waiting import wait_for
from harness.workload.context import RunContext
from harness.workload.final_read import final_read
from harness.workload.producer import ProducerSpec, RecordingProducer
from harness.workload.recorder import Recorder

from ..failover.placement import WAIT_S, create_placed_topic, roles, state_of

UNCLEAN = "unclean.leader.election.enable"
UNCLEAN_INTERVAL = "unclean.leader.election.interval.ms"
OFF, ON, FLIP, ELR = "off", "on", "flip", "elr"
INITIAL = {OFF: "false", ON: "true", FLIP: "false", ELR: "false"}
# min.insync.replicas per topic: the elr topic's ISR falls below it when out_of_sync stops, which
# is when KIP-966 keeps the replica that left as an eligible leader replica.
MIN_ISR = {OFF: "1", ON: "1", FLIP: "1", ELR: "2"}
UNREPLICATED_TOPICS = (OFF, ON, FLIP)  # the elr topic refuses acks=all below its min ISR
BEFORE, UNREPLICATED = 5, 4
AFTER = UNREPLICATED + 2  # past the lost offsets, so the final read reads beyond each of them
NEMESIS_PROCESS = 0
MAX_EXAMPLES = 100  # more than the scenario's anomalies: the checker lists every one

State = dict[str, Any]


@dataclass
class TopicStory:
    """What happened to one topic: its acknowledged sends and its partition state per step."""

    setting: str
    topic: str
    before: list[Event] = field(default_factory=list)
    unreplicated: list[Event] = field(default_factory=list)
    alone: State | None = None         # once in_sync is down (step 7)
    refused: Event | None = None       # the send while offline (off, flip)
    below_min_isr: list[Event] = field(default_factory=list)  # elr: sends with ISR < min
    cut_off: State | None = None       # elr: once out_of_sync is back but cut off (step 5)
    elected: State | None = None       # after out_of_sync's election (on, flip)
    after: list[Event] = field(default_factory=list)  # sends after the election (on, flip)
    config: str | None = None          # UNCLEAN as DescribeConfigs answers at the end
    before_return: State | None = None  # just before in_sync starts again (step 10)
    returned: State | None = None      # once in_sync is back
    read_complete: bool = False        # the final read reached the high watermark


@dataclass
class Outcome:
    replicas: list[int]  # [in_sync, out_of_sync]
    history_dir: Path
    stories: dict[str, TopicStory]
    result: CheckResult

    @property
    def in_sync(self) -> int:
        return self.replicas[0]

    @property
    def out_of_sync(self) -> int:
        return self.replicas[1]

    def anomalies_of(self, topic: str) -> dict[str, list[dict[str, Any]]]:
        """The checker's anomalies about ``topic``: name -> every example (none left out)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for name, anomaly in self.result.anomalies.items():
            assert anomaly.count == len(anomaly.examples), \
                f"{name}: {anomaly.count} found but only {len(anomaly.examples)} listed"
            mine = [x for x in anomaly.examples if _about(x, topic)]
            if mine:
                found[name] = mine
        return found


def _about(example: dict[str, Any], topic: str) -> bool:
    return example.get("topic") == topic or any(row.get("topic") == topic
                                                for row in example.get("rows", ()))


def _led_by(leader: int, state: State) -> bool:
    return bool(state["leader"] == leader)


def _settle(cluster: Target, topic: str, accept: Callable[[State], bool],
            wait_s: float = WAIT_S) -> State:
    """The partition's state once ``accept`` holds, or the last one seen after ``wait_s``: the
    tests judge it."""
    deadline = time.monotonic() + wait_s
    while True:
        state = state_of(cluster, topic)
        if accept(state) or time.monotonic() >= deadline:
            return state
        time.sleep(0.1)


class _Recording:
    """The run's history: a nemesis process, and a new producer process per phase."""

    def __init__(self, cluster: Target, history_dir: Path) -> None:
        self.cluster = cluster
        self.history_dir = history_dir
        self.run_id = f"unclean-{uuid.uuid4().hex[:8]}"
        self.run_start_ns = time.monotonic_ns()
        self._next_process = NEMESIS_PROCESS + 1
        history_dir.mkdir(parents=True, exist_ok=True)
        self._open = contextlib.ExitStack()
        self._nemesis = self._open.enter_context(
            Recorder(history_dir, self.run_id, NEMESIS_PROCESS, self.run_start_ns))

    def close(self) -> None:
        self._open.close()

    def _process(self) -> int:
        process, self._next_process = self._next_process, self._next_process + 1
        return process

    def send(self, topics: list[str], each: int, *,
             delivery_timeout_ms: int = 15000) -> dict[str, list[Event]]:
        """``each`` acks=all sends per topic from a new recording producer process; topic ->
        its completion rows in offset order (failed ones last)."""
        process = self._process()
        spec = ProducerSpec(bootstrap=self.cluster.bootstrap, topics=tuple(topics),
                            partitions=1, rate=100.0, max_sends=each * len(topics),
                            delivery_timeout_ms=delivery_timeout_ms,
                            request_timeout_ms=min(5000, delivery_timeout_ms))
        context = RunContext(str(self.history_dir), self.run_id, process, self.run_start_ns,
                             time.monotonic_ns() - self.run_start_ns + int(120e9))
        RecordingProducer(spec, context).run()
        done: dict[str, list[Event]] = defaultdict(list)
        for event in history.read_history(self.history_dir):
            if event.process == process and event.f == "send" and event.type != "invoke":
                done[event.topic or ""].append(event)
        return {topic: sorted(done[topic], key=lambda e: (e.offset is None, e.offset or 0))
                for topic in topics}

    def send_acknowledged(self, topics: list[str], each: int) -> dict[str, list[Event]]:
        done = self.send(topics, each)
        failed = [(e.topic, e.value, e.type, e.error) for events in done.values()
                  for e in events if e.type != "ok"]
        assert not failed, f"acks=all sends not acknowledged: {failed}"
        return done

    def fault(self, what: str, action: Callable[[], object]) -> None:
        """Do ``action``, recorded as a nemesis invoke/ok pair named ``what``."""
        op = self._nemesis.next_op()
        self._nemesis.record("invoke", "nemesis", op, value=what)
        action()
        self._nemesis.record("ok", "nemesis", op, value=what)

    def final_read(self, topics: list[str]) -> dict[str, bool]:
        """Read every topic's partition from the start to its high watermark into the history;
        topic -> whether the read got there."""
        self.close()
        reads = final_read(self.cluster.bootstrap, [(topic, 0) for topic in topics],
                           self.history_dir, self.run_id, self.run_start_ns,
                           self._next_process, timeout_s=WAIT_S)
        return {read.topic: read.complete for read in reads}


def run(request: pytest.FixtureRequest, cluster: Target, admin: Any, root: Path) -> Outcome:
    """Steps 1-10 above, the history judged by the checker's automatic engine (a few hundred
    rows: the Python one, held equal to Spark's by the checker's property test, with no JVM to
    start)."""
    who = roles(cluster)
    replicas = [who.first, who.second]
    in_sync, out_of_sync = replicas
    stories = {setting: TopicStory(setting, create_placed_topic(
        request, cluster, admin, [replicas],
        {UNCLEAN: INITIAL[setting], "min.insync.replicas": MIN_ISR[setting]},
        prefix=f"{setting}-"))
        for setting in INITIAL}
    topics = [story.topic for story in stories.values()]
    # Where the metadata has eligible leader replicas (KIP-966: KRaft from Kafka 4.x).
    has_elr = "elr" in state_of(cluster, stories[ELR].topic)
    # Asked while every broker serves: asked of out_of_sync after its restart behind the cut,
    # DescribeConfigs went unanswered for 30 s in 1 run of 5 on Kafka 4.4.
    check_s = _unclean_check_s(admin, in_sync)
    nodes = cluster.require_nodes()
    faults = cluster.require_faults()
    recording = _Recording(cluster, root / "history")
    try:
        for story, events in zip(stories.values(), recording.send_acknowledged(
                topics, BEFORE).values(), strict=True):
            story.before = events
        recording.fault(f"stop broker {out_of_sync}", lambda: nodes.stop_broker(out_of_sync))
        wait_for(lambda: all(state_of(cluster, t)["isr"] == [in_sync] for t in topics), WAIT_S,
                 f"broker {out_of_sync} to leave the ISRs")
        unreplicated = [stories[setting] for setting in UNREPLICATED_TOPICS]
        for story, events in zip(unreplicated, recording.send_acknowledged(
                [s.topic for s in unreplicated], UNREPLICATED).values(), strict=True):
            story.unreplicated = events
        stories[ELR].below_min_isr = recording.send([stories[ELR].topic], 1,
                                                    delivery_timeout_ms=3000)[stories[ELR].topic]
        apart = {f"broker-{in_sync}": [f"broker-{out_of_sync}"],
                 f"broker-{out_of_sync}": [f"broker-{in_sync}"]}
        recording.fault(f"cut broker {in_sync} from broker {out_of_sync}",
                        lambda: faults.partition(apart))
        recording.fault(f"start broker {out_of_sync}", lambda: nodes.start_broker(out_of_sync))
        stories[ELR].cut_off = state_of(cluster, stories[ELR].topic)
        recording.fault(f"stop broker {in_sync}", lambda: nodes.stop_broker(in_sync))

        for story in stories.values():
            wanted = out_of_sync if story.setting == ON or (story.setting == ELR and has_elr) \
                else -1
            story.alone = _settle(cluster, story.topic, functools.partial(_led_by, wanted))
        offline = [stories[OFF], stories[FLIP]]
        refused = recording.send([s.topic for s in offline], 1, delivery_timeout_ms=3000)
        for story in offline:
            story.refused = refused[story.topic][0]

        flip = stories[FLIP].topic
        resource = ConfigResource(ResourceType.TOPIC, flip, incremental_configs=[
            ConfigEntry(UNCLEAN, "true", incremental_operation=AlterConfigOpType.SET)])
        recording.fault(f"set {UNCLEAN}=true on {flip}",
                        lambda: admin.incremental_alter_configs([resource])[resource]
                        .result(WAIT_S))
        elected = [stories[ON], stories[FLIP], *([stories[ELR]] if has_elr else [])]
        for story in elected:
            story.elected = _settle(cluster, story.topic, lambda s: s["leader"] == out_of_sync,
                                    WAIT_S + check_s)
        for story, events in zip(elected, recording.send([s.topic for s in elected],
                                                         AFTER, delivery_timeout_ms=5000
                                                         ).values(), strict=True):
            story.after = events
        for story in stories.values():
            story.config = _config(admin, story.topic)

        # Offline until in_sync returns: off, and flip where ELR kept it offline (KIP-966).
        waiting = [s for s in stories.values() if s.setting == OFF or (
            s.elected is not None and s.elected["leader"] == -1)]
        for story in waiting:
            story.before_return = state_of(cluster, story.topic)
        recording.fault("heal", faults.heal)
        recording.fault(f"start broker {in_sync}", lambda: nodes.start_broker(in_sync))
        for story in waiting:
            story.returned = _settle(cluster, story.topic, lambda s: s["leader"] == in_sync)
        for topic, complete in recording.final_read(topics).items():
            next(s for s in stories.values() if s.topic == topic).read_complete = complete
    finally:
        recording.close()
    result, _ = judge(recording.history_dir, DEFAULT_GUARANTEE, Engine.AUTO, report=False,
                      max_examples=MAX_EXAMPLES)
    return Outcome(replicas, recording.history_dir, stories, result)


def _unclean_check_s(admin: Any, broker: int) -> float:
    """How long a KRaft controller may take to act on unclean election turned on at runtime:
    its unclean.leader.election.interval.ms, as ``broker`` describes it (a combined node's own
    setting; the harness's KRaft clusters set 1 s, Kafka's default is 5 minutes). 0 where the
    broker has no such key: ZooKeeper's controller elects on the change itself."""
    value = _described(admin, ConfigResource(ResourceType.BROKER, str(broker)), UNCLEAN_INTERVAL)
    return 0.0 if value is None else int(value) / 1000


def _config(admin: Any, topic: str) -> str | None:
    return _described(admin, ConfigResource(ResourceType.TOPIC, topic), UNCLEAN)


def _described(admin: Any, resource: ConfigResource, key: str) -> str | None:
    """``key``'s value as DescribeConfigs gives it for ``resource``; None if not listed."""
    [entries] = [future.result(WAIT_S) for future in admin.describe_configs([resource]).values()]
    entry = entries.get(key)
    return None if entry is None else entry.value
