"""`kafka-harness run --group-protocol consumer` end to end: KIP-848's consumer protocol on three
Apache Kafka 4.4 KRaft nodes under a broker kill, judged valid, its history carrying member
epochs; and refused, before anything starts, where it cannot run.

The run is a separate process that starts and stops its own cluster, as a user's run does; it
takes about 40 s on an idle machine with the Python checker.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from harness import history
from harness.checker import manifest
from harness.run.deadline import EXTENDED

from .test_run import kafka_harness

SEED = 1
DURATION_S = 15
PARTITIONS = 3


def test_a_kip848_run_on_kafka_4_is_valid_and_its_history_holds_member_epochs(tmp_path):
    run_dir = tmp_path / "run"
    done = kafka_harness("run", "--target", "apache-kafka-kraft", "--brokers", "3",
                         "--suites", "none", "--duration", str(DURATION_S),
                         "--group-protocol", "consumer", "--nemesis", "kill",
                         "--seed", str(SEED), "--engine", "python", "--dir", str(run_dir),
                         "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["valid"] is True
    # A kill's heal restarts a broker: the workload goes on after it (harness/run/deadline.py).
    assert [n for n in result["notes"] if not n.startswith(EXTENDED)] == [], result["notes"]
    assert any(step["what"].startswith("kill broker-") for step in result["nemesis"])
    assert all(read["complete"] for read in result["final_read"])

    events = history.read_history(run_dir / "history")
    group_rows = [e for e in events if e.group is not None]
    assert {e.group_protocol for e in group_rows} == {"consumer"}
    reads = [e for e in group_rows if e.f == "poll" and e.type == "ok"]
    assert reads and all(e.generation > 0 and e.member for e in reads)
    assigned: dict[int, set[int]] = defaultdict(set)
    for e in group_rows:
        if e.f == "assign":
            assert e.generation > 0, e
            assigned[e.process].add(e.partition)
    assert set().union(*assigned.values()) == set(range(PARTITIONS))
    final = [e for e in events if e.f == "poll" and e.group is None]
    assert final and all(e.group_protocol is None and e.generation == -1 for e in final)

    written = manifest.read(run_dir / "history").manifest
    assert written is not None and written.options["group_protocol"] == "consumer"
    assert "--group-protocol consumer" in " ".join(written.replay)


def _refused(tmp_path: Path, *options: str) -> dict:
    run_dir = tmp_path / "run"
    done = kafka_harness("run", "--suites", "none", "--group-protocol", "consumer",
                         "--dir", str(run_dir), "--json", *options, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert not run_dir.exists()  # refused before the run made anything
    return json.loads(done.stdout)


def test_the_consumer_protocol_is_refused_on_the_reference_broker_before_the_run(tmp_path):
    refused = _refused(tmp_path, "--target", "reference")
    assert refused["exit_code"] == 2
    assert refused["error"] == (
        "--group-protocol consumer needs ConsumerGroupHeartbeat (KIP-848, API key 68), which "
        "--target reference lacks: the reference broker has Kafka 3.9's group coordinator "
        "(--target apache-kafka-kraft has it)")


def test_the_consumer_protocol_is_refused_for_assign_mode_consumers(tmp_path):
    refused = _refused(tmp_path, "--target", "apache-kafka-kraft", "--consumer-mode", "assign")
    assert refused["error"] == ("--group-protocol consumer needs --consumer-mode group: "
                                "assign-mode consumers join no group")
