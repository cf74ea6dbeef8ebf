"""SIGTERM to a pytest run (a cancelled CI job, `timeout`) leaves none of the target's processes:
the plugin turns it into the interrupt Ctrl-C is, so the target is closed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SLOW_TEST = '''
import json
import os
import pathlib
import time


def test_waits(kafka_target):
    nodes = kafka_target.nodes
    pids = [b.pid for b in nodes.brokers.values()] + [nodes.zookeeper.pid,
                                                       kafka_target.cluster.server_pid]
    # Written whole, then renamed into place: the test reads the file once it exists.
    done = pathlib.Path(os.environ["PIDS_FILE"])
    partial = done.with_suffix(".partial")
    partial.write_text(json.dumps(pids))
    partial.replace(done)
    time.sleep(120)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_to_pytest_closes_the_target(tmp_path: Path):
    (tmp_path / "test_slow.py").write_text(SLOW_TEST)
    pids_file = tmp_path / "pids.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_slow.py", "--kafka-target", "reference",
         "--kafka-brokers", "1", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, env={**os.environ, "PIDS_FILE": str(pids_file)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not pids_file.exists() and time.monotonic() < deadline:
            assert process.poll() is None, process.stdout.read()
            time.sleep(0.2)
        pids = [pid for pid in json.loads(pids_file.read_text()) if pid]
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, output  # pytest's "interrupted"
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in pids if _alive(pid)] == [], output
