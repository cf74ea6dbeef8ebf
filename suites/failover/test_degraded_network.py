"""A degraded network — latency, then a bandwidth limit — on the link between the clients and a
partition's leader, as a suite test judged by the checker.

Kafka's ``network_degrade_test.py`` shows that its traffic shaping takes effect; Jepsen-style,
this test asks what the degradation must not do: with acks=all, RF 3 and min.insync.replicas 2,
a slow link loses nothing acknowledged and the run stays valid. That the fault really held is
checked from the history, against floors the toxics guarantee whatever the machine's load:

* latency (``harness.nemesis.executor.TOXICS``: 100 ± 50 ms on the broker's answers) — every
  send to the degraded leader, made and acknowledged while the toxic held, took at least
  latency - jitter;
* bandwidth (2 KB/s on the clients' requests) — such sends took, on average, at least the time
  61 bytes take at that rate: every Produce request carries a record batch, and a batch's header
  alone is 61 bytes. On average, not each: Toxiproxy's bandwidth toxic sleeps each chunk's
  bytes/rate but takes what its timer overslept off the next chunk's sleep, so on a loaded
  machine one request may pass sooner than its floor (CI: 21.6 ms against 30 ms, one of 100)
  while a connection's chunks together wait at least their bytes/rate.

The faults need Toxiproxy's toxics, so the proxy network mechanism.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cluster.options import Network
from harness.cluster.targets import Target
from harness.history import Event
from harness.nemesis.executor import TOXICS
from harness.nemesis.schedule import leader_of, repeated
from harness.plugin.options import kafka_options

from .judged import FaultWindow, fault_windows, history, judged_run

TOPIC = "degraded"
START_S, HELD_S, QUIET_S, TAIL_S = 5.0, 6.0, 2.0, 4.0
BATCH_HEADER_BYTES = 61  # a v2 record batch's fixed header [protocol guide, Record Batch]
MIN_MEASURED = 10  # sends measured inside each window, or the floor proves nothing

pytestmark = [pytest.mark.requires_faults, pytest.mark.requires_multi_broker]


def _floor_ms(fault: str) -> float:
    attributes = TOXICS[fault].attributes
    if fault == "latency":
        return attributes["latency"] - attributes["jitter"]
    return BATCH_HEADER_BYTES / attributes["rate"]  # rate KB/s = bytes per ms


def _acknowledged_inside(events: list[Event], window: FaultWindow, partition: int
                         ) -> list[float]:
    """Milliseconds from send to acknowledgement of each send to `partition` that was made
    and acknowledged while `window` held."""
    invoked = {(e.process, e.op): e for e in events if e.f == "send" and e.type == "invoke"}
    took = []
    for e in events:
        if e.f != "send" or e.type != "ok" or e.partition != partition:
            continue  # the partitioner picks the partition: only the ok row names it
        start = invoked[(e.process, e.op)]
        if window.holds(start.time_ns, e.time_ns):
            took.append((e.time_ns - start.time_ns) / 1e6)
    return took


def test_a_slow_link_to_the_leader_delays_acks_and_loses_nothing(
        kafka_target: Target, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Latency and then a bandwidth limit on the clients' link to a partition's leader slow every acknowledgement by at least what the toxic guarantees, and acks=all loses nothing acknowledged [Kafka system test network_degrade_test.py; Kafka docs, Design: Replication]."""  # noqa: E501
    if kafka_options(request.config).network != Network.PROXY:
        pytest.skip("needs Toxiproxy's latency and bandwidth toxics (--kafka-network proxy)")
    role = leader_of(TOPIC, 0)
    schedule = [*repeated("latency", role, 1, start_s=START_S, held_s=HELD_S, quiet_s=0),
                *repeated("bandwidth", role, 1, start_s=START_S + HELD_S + QUIET_S,
                          held_s=HELD_S, quiet_s=0)]
    result = judged_run(kafka_target, request, tmp_path / "degraded", schedule, TAIL_S, topic=TOPIC)
    events = history(result)
    windows = fault_windows(events)
    assert [w.description.split()[0] for w in windows] == ["latency", "bandwidth"], windows
    for window in windows:
        fault = window.description.split()[0]
        took = _acknowledged_inside(events, window, partition=0)
        assert len(took) >= MIN_MEASURED, \
            f"only {len(took)} sends to partition 0 made and acknowledged during {fault}; " \
            f"run directory {result.dir}"
        floor = _floor_ms(fault)
        if fault == "bandwidth":  # a floor on the mean (the module's docstring says why)
            mean = sum(took) / len(took)
            assert mean >= floor, f"acknowledgements during bandwidth took {mean:.1f} ms on " \
                                  f"average, under its {floor:.0f} ms floor: the toxic did not " \
                                  f"hold; run directory {result.dir}"
            continue
        quick = sorted(t for t in took if t < floor)
        assert not quick, f"{len(quick)} of {len(took)} acknowledgements during {fault} came " \
                          f"sooner than its {floor:.0f} ms floor (fastest {quick[:3]} ms): " \
                          f"the toxic did not hold; run directory {result.dir}"
