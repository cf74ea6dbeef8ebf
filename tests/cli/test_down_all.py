"""`kafka-harness down --all` stops every cluster of this user, wherever its run directory is.

The supervisors here run with a TMPDIR of the test's own, so their cards (and so what ``down
--all`` sees) are only this test's: other clusters on the machine are not touched.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.supervisor.files import read_state
from tests.cli.test_cli_end_to_end import COMMAND_TIMEOUT_S, KAFKA_HARNESS, Footprint


def harness(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KAFKA_HARNESS, *args], capture_output=True, text=True, env=env,
                          timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("target", [
    # A supervisor of librdkafka's mock cluster starts in a second: the CI case.
    "librdkafka-mock",
    # ZooKeeper and a reference broker as processes: what a user runs (~30 s on a busy machine).
    pytest.param("reference", marks=pytest.mark.slow),
])
def test_down_all_stops_every_supervisor_wherever_its_run_dir_and_drops_stale_cards(
        tmp_path: Path, target: str):
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    cards = private_tmp / f"kafka-harness-supervisors-{os.getuid()}"
    run_dirs = [tmp_path / "one" / "run", tmp_path / "somewhere" / "else"]
    footprint = Footprint()
    try:
        ups = [subprocess.Popen([KAFKA_HARNESS, "up", "--brokers", "1", "--target", target,
                                 "--dir", str(run_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, stdin=subprocess.DEVNULL) for run_dir in run_dirs]
        for up in ups:  # both start at once: half the wait
            out, err = up.communicate(timeout=COMMAND_TIMEOUT_S)
            assert up.returncode == 0, (out, err)
        for run_dir in run_dirs:
            status = harness(env, "status", "--json", "--dir", str(run_dir))
            assert status.returncode == 0, status.stderr
            footprint.record(json.loads(status.stdout))
        assert len(list(cards.glob("*.json"))) == 2
        stale = cards / "1-0.json"  # pid 1 never started at tick 0: a card nobody owns
        stale.write_text(json.dumps({"pid": 1, "start_time": "0",
                                     "run_dir": str(tmp_path / "stale")}))

        down = harness(env, "down", "--all", "--dir", str(tmp_path / "nothing-here"))

        assert down.returncode == 0, (down.stdout, down.stderr)
        assert footprint.wait_gone() == []
        for run_dir in run_dirs:
            assert f"stopped the cluster in {run_dir}" in down.stderr.replace("\n", "")
            assert (read_state(run_dir) or {}).get("phase") == "stopped"
        assert str(tmp_path / "stale") not in down.stderr
        assert list(cards.glob("*.json")) == []  # the live ones unregistered, the stale deleted
        again = harness(env, "down", "--all")
        assert again.returncode == 0 and "nothing running" in again.stderr, again.stderr
    finally:
        footprint.kill_leftovers()
