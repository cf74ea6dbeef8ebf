"""`kafka-harness run` with the nemesis faults the unit tests only schedule: latency, stop,
lose-unflushed and crash-client, each in a short real run whose history must show the action and
whose verdict must be what the guarantee says.

Seed 149 over 16 s schedules both faults of each pair, each held about 3 s, all healed by 12.1 s
(asserted first, from the pure schedule): the shortest run that has both, since the plan needs
3 s before the first fault, two faults of at least 3 s, 2 s between them and 3 s of tail — so
each run is short: about 25 s on an idle machine with the Python checker (seed 1 needed 20 s).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import history
from harness.nemesis.schedule import plan
from harness.net.netns_support import unavailable
from harness.run.deadline import EXTENDED

from .test_run import kafka_harness

SEED = 149
DURATION_S = 16


def _run(run_dir: Path, faults: tuple[str, ...], *extra: str) -> dict:
    done = kafka_harness("run", "--suites", "none",
                         "--duration", str(DURATION_S), "--nemesis", ",".join(faults),
                         "--seed", str(SEED), "--engine", "python", "--dir", str(run_dir),
                         "--json", *extra, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _nemesis_rows(run_dir: Path) -> dict[str, list[str]]:
    """Nemesis action -> the types of its rows (invoke, ok, info), in order."""
    rows: dict[str, list[str]] = {}
    for event in history.read_history(run_dir / "history"):
        if event.f == "nemesis":
            assert event.process == 0
            rows.setdefault(event.value, []).append(event.type)
    return rows


@pytest.mark.parametrize("faults", [("latency", "crash-client"), ("stop", "lose-unflushed")],
                         ids="+".join)
def test_each_fault_is_a_nemesis_row_and_at_least_once_holds(tmp_path, faults):
    steps = plan(SEED, faults, DURATION_S, 3)
    assert {step.fault for step in steps} == set(faults)
    run_dir = tmp_path / "run"

    result = _run(run_dir, faults)

    assert result["valid"] is True and result["exit_code"] == 0
    assert result["guarantee"] == "at-least-once"
    # A stop's heal restarts a broker: the workload goes on after it (harness/run/deadline.py).
    assert [n for n in result["notes"] if not n.startswith(EXTENDED)] == [], result["notes"]
    assert all("error" not in done for done in result["nemesis"]), result["nemesis"]
    rows = _nemesis_rows(run_dir)
    for step in steps:
        assert rows[step.description] == ["invoke", "ok"], rows
        assert rows[step.heal] == ["invoke", "ok"], rows
    assert rows["heal all"] == ["invoke", "ok"]
    assert all(read["complete"] for read in result["final_read"])
    assert result["stats"]["sends_ok"] > 0

    if "crash-client" in faults:
        crashed = [c for c in result["clients"] if c["returncode"] == -9]
        assert len(crashed) == 1, result["clients"]
        victim, replacement = crashed[0]["process"], crashed[0]["replaced_by"]
        assert replacement is not None and replacement > victim
        killed = next(d for d in result["nemesis"] if d["what"] == "crash-client client")
        assert killed["result"] == f"killed process {victim}"
        writers = {event.process for event in history.read_history(run_dir / "history")}
        assert {victim, replacement} <= writers
    if "lose-unflushed" in faults:
        lost = next(d for d in result["nemesis"] if d["what"].startswith("lose-unflushed"))
        assert "pid=" in lost["result"]


@pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")
def test_a_kernel_network_run_partitions_with_iptables_and_skips_latency_with_a_note(tmp_path):
    run_dir = tmp_path / "run"
    before = set(_namespaces())
    result = _run(run_dir, ("partition", "latency"), "--network", "kernel")

    assert result["cluster"] == "kernel" and result["valid"] is True
    assert result["notes"] == ["skipped fault latency: the kernel network mechanism has no "
                               "toxics (use --network proxy)"]
    partitions = [d for d in result["nemesis"] if d["what"].startswith("partition ")]
    assert partitions and all("error" not in d for d in partitions)
    assert all(d["result"].endswith("directed links cut") for d in partitions)
    rows = _nemesis_rows(run_dir)
    assert all(rows[d["what"]] == ["invoke", "ok"] for d in partitions)
    assert set(_namespaces()) <= before  # the run's namespaces are gone


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]
