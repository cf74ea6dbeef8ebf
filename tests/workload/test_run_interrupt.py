"""Ctrl-C in the middle of `kafka-harness run`: the run stops, exits 130, keeps the history it
wrote, and leaves nothing of itself running — no broker, ZooKeeper, Toxiproxy or client process,
no listening port, no network namespace.

The signal goes to the run's whole process group, as a terminal's Ctrl-C does, so the workload
clients (which share the group) receive it too; the cluster's processes run in sessions of their
own and are stopped by the runner.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import history
from harness.checker import manifest
from harness.net.ports import is_accepting
from harness.waiting import wait_for
from harness.workload import recorder

INTERRUPTED = 130


def processes_of(run_dir: Path) -> list[str]:
    """Live processes whose working directory or command line is in ``run_dir``."""
    found = []
    marker = str(run_dir)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if state != "Z" and (cwd.startswith(marker) or marker in cmdline):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def listening_addresses(cluster_dir: Path) -> list[tuple[str, int]]:
    """ZooKeeper's, the brokers' and the client proxies' addresses, from their config files."""
    addresses = []
    zoo = (cluster_dir / "zookeeper" / "zoo.cfg").read_text()
    addresses.append(("127.0.0.1", int(re.search(r"clientPort=(\d+)", zoo).group(1))))
    for properties in cluster_dir.glob("broker-*/server.properties"):
        text = properties.read_text()
        addresses += [(host, int(port)) for host, port in
                      re.findall(r"listeners=PLAINTEXT://([\d.]+):(\d+)", text)]
    return addresses


def _nemesis_did(run_dir: Path, what: str) -> bool:
    """Whether the nemesis's journal (flushed row by row while the run goes on) holds an ``ok``
    row of an action starting with ``what``."""
    journal = recorder.journal_path(run_dir / "history", 0)
    if not journal.exists():
        return False
    for line in journal.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # the line being written
            continue
        if row["type"] == "ok" and str(row.get("value") or "").startswith(what):
            return True
    return False


def test_ctrl_c_stops_the_run_keeps_its_history_and_leaves_nothing(tmp_path):
    run_dir = tmp_path / "run"
    out = tmp_path / "run.out"
    with open(out, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "run", "--suites", "none", "--duration", "120",
             "--nemesis", "partition", "--seed", "3", "--engine", "python", "--dir", str(run_dir),
             "--json"],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not list((run_dir / "logs").glob("process-0001-*.log")):
            assert process.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, "the workload never started"
            time.sleep(0.2)
        # The clients produce and consume; the nemesis partitions 3 s after the group is
        # Stable (the warm-up gate): wait for that fault's row in its journal.
        wait_for(lambda: _nemesis_did(run_dir, "partition "), 120, "the nemesis's partition",
                 interval=0.2)
        addresses = listening_addresses(run_dir / "cluster")
        assert processes_of(run_dir)

        started = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=120) == INTERRUPTED, out.read_text()[-3000:]
        stopped_in = time.monotonic() - started
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["exit_code"] == INTERRUPTED and "interrupted" in summary["error"]
    assert summary["valid"] is None  # not checked
    events = history.read_history(run_dir / "history")
    sends = [e for e in events if e.f == "send" and e.type == "ok"]
    assert sends, "the history written before the interrupt was not kept"
    assert any(e.f == "nemesis" for e in events)
    # The history keeps how to make it again, and what the nemesis did before the interrupt.
    kept = manifest.read(run_dir / "history").manifest
    assert kept is not None and kept.seed == 3 and "--seed" in kept.replay
    assert kept.nemesis and kept.nemesis[0].what.startswith("partition ")
    assert processes_of(run_dir) == []
    assert [a for a in addresses if is_accepting(*a)] == []
    assert stopped_in < 60
