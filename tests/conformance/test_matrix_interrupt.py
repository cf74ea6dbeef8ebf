"""An interrupted matrix stops the session it started, and that session closes its target.

The interrupt reaches only the matrix process here (as SIGTERM to `kafka-harness run`, turned
into an interrupt, would): the session must be told, or it would run on for up to half an hour
with its brokers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.waiting import wait_for

from ..processes import interruptible_python

WAITING_SUITE = '''
import json
import os
import pathlib
import time


def test_waits(kafka_target):
    nodes = kafka_target.nodes
    pids = [b.pid for b in nodes.brokers.values()] + [nodes.zookeeper.pid]
    # Written whole, then renamed into place: the test reads the file once it exists.
    done = pathlib.Path(os.environ["PIDS_FILE"])
    partial = done.with_suffix(".partial")
    partial.write_text(json.dumps(pids))
    partial.replace(done)
    time.sleep(120)
'''

MATRIX = '''
import sys
from pathlib import Path

from harness.conformance import matrix

matrix.run_matrix(("reference",), ("protocol",), Path(sys.argv[2]), where=Path(sys.argv[1]))
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stack(pid: int) -> str:
    """Every thread's Python stack of `pid` (py-spy, a dev dependency), for a failure message."""
    spy = Path(sys.executable).with_name("py-spy")
    done = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True,
                          text=True, timeout=60, check=False)
    return done.stdout or done.stderr


def test_an_interrupted_matrix_closes_the_sessions_target(tmp_path: Path):
    where = tmp_path / "suites"
    (where / "protocol").mkdir(parents=True)
    (where / "protocol" / "test_waiting.py").write_text(WAITING_SUITE)
    pids_file = tmp_path / "pids.json"
    # The matrix's stderr goes to a file, not a pipe: a pipe nobody reads until the interrupt
    # can fill and block the matrix's writes, and an unclosed one leaks into a later test.
    errors = tmp_path / "matrix.err"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            interruptible_python(MATRIX, str(where), str(tmp_path / "out")),
            env={**os.environ, "PIDS_FILE": str(pids_file)}, stdout=subprocess.DEVNULL,
            stderr=stderr)
    pids: list[int] = []
    try:
        wait_for(pids_file.exists, 120, "the session's target to start")
        pids = json.loads(pids_file.read_text())
        assert pids and all(_alive(pid) for pid in pids)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            # Say where it hung. It hung when it ignored SIGINT (tests/processes.py).
            raise AssertionError(
                f"the interrupted matrix did not end within 120 s; its threads:\n"
                f"{_stack(process.pid)}\nits stderr:\n{errors.read_text()[-3000:]}") from None
        assert "KeyboardInterrupt" in errors.read_text()
        wait_for(lambda: not any(_alive(pid) for pid in pids), 30,
                 "the target's processes to end")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
