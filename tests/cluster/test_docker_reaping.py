"""Who owns a docker run: the owner label names one process, and a reused pid is not it."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.cluster.docker.reaping import owner_alive, owner_label
from harness.lifecycle.procfs import process_start_time


def test_this_process_owns_what_it_labels() -> None:
    label = owner_label()
    assert label == f"{os.getpid()}:{process_start_time(os.getpid())}"
    assert owner_alive(label)


def test_an_exited_owner_and_a_reused_pid_are_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        label = f"{child.pid}:{process_start_time(child.pid)}"
        assert owner_alive(label)
        # The same pid with another start time is another process: the run's owner is gone.
        assert not owner_alive(f"{child.pid}:{int(process_start_time(child.pid) or 0) + 1}")
    finally:
        child.kill()
        child.wait()
    assert not owner_alive(label)


def test_a_label_this_harness_did_not_write_is_left_alone() -> None:
    assert owner_alive("someone-else")
