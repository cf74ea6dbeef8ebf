"""A judged run with disk faults as its nemesis: the leader of a workload partition gets a full
disk, the leader of another a failing one; each halts (as Apache Kafka does with its only log dir
failed) or, on KRaft, may keep running with the dir offline; the heal frees its disk and starts
it again, the nemesis rows are in the history, and
the checker finds the run VALID — nothing acknowledged was lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.disk.mounts import mounts_under
from harness.history import read_history
from harness.nemesis.schedule import leader_of, repeated
from harness.run.runner import Run, RunOptions

pytestmark = pytest.mark.slow  # a three-broker cluster, two halts, the checker: ~60 s idle


# The second fault starts once the first one's heal has restarted its broker: a KRaft node
# takes about 15 s to serve again (it replays the metadata log and waits to be unfenced).
@pytest.mark.parametrize(("target", "second_s"), [("reference", 14), ("apache-kafka-kraft", 30)])
def test_a_run_under_disk_faults_is_valid_and_records_them(tmp_path: Path, target: str,
                                                           second_s: int):
    schedule = (repeated("disk-full", leader_of("workload", 0), 1, start_s=3, held_s=8,
                         quiet_s=0)
                + repeated("disk-errors", leader_of("workload", 1), 1, start_s=second_s,
                           held_s=8, quiet_s=0))
    options = RunOptions(duration_s=second_s + 12, nemesis=("disk-full", "disk-errors"), seed=1,
                         schedule=tuple(schedule), engine="python", consumers=1,
                         run_dir=tmp_path / "run", target=target)
    result = Run(options, Console(stderr=True)).execute()
    where = f"run directory {result.dir}"
    assert mounts_under(tmp_path) == [], "a disk of the harness's is still mounted"
    failed = [step for step in result.nemesis if "error" in step]
    assert not failed, f"faults that could not be applied: {failed}; {where}"
    heals = [step["result"] for step in result.nemesis if step["what"].startswith("heal disk")]
    # ZooKeeper-mode brokers halt on their only failed log dir; a KRaft broker may take the
    # dir offline and keep running instead (KIP-858): the heal restarts it either way.
    assert len(heals) == 2 and all(
        "had stopped (exit code 1) and was started again" in h
        or (target == "apache-kafka-kraft" and "had taken its log dir offline" in h)
        for h in heals), \
        f"each faulted broker should have failed and been restarted: {heals}; {where}"
    assert result.valid, f"the checker found anomalies {result.anomalies}; {where}"
    assert result.stats["sends_ok"] > 0
    rows = [(e.type, e.value) for e in read_history(Path(result.dir) / "history")
            if e.f == "nemesis"]
    for step in schedule:
        for value in (step.description, step.heal):
            assert ("invoke", value) in rows and ("ok", value) in rows, (value, rows)
