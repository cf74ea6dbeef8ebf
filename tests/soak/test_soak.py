"""The soak: ``kafka-harness run --soak --duration 1800`` with every nemesis fault, on the
reference broker and on Apache Kafka 3.9. Each must stay VALID, and no broker, ZooKeeper or
harness process may grow its RSS or open files by more than 10 % after warm-up
(harness/run/resources.py says how lives are judged across restarts).

Half an hour per kind, so marked ``soak`` (and ``slow``: never in ``.ci/run``); run it with
``pytest tests/soak -m soak``. ``KAFKA_HARNESS_SOAK_DURATION`` (seconds) shortens it for a trial
— below about ten minutes no broker lives long enough to be judged, and the run fails saying so.
docs/soak.md holds the latest figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.nemesis.schedule import FAULTS

DURATION_S = float(os.environ.get("KAFKA_HARNESS_SOAK_DURATION", "1800"))


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(DURATION_S + 1200)
@pytest.mark.parametrize("target", ["reference", "apache-kafka"])
def test_a_soak_with_every_fault_stays_valid_and_nothing_grows(target, tmp_path):
    run_dir = tmp_path / "soak"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--soak", "--target", target,
         "--duration", f"{DURATION_S:g}", "--nemesis", ",".join(FAULTS), "--suites", "none",
         "--seed", "7", "--dir", str(run_dir), "--json"],
        capture_output=True, text=True, timeout=DURATION_S + 1100, check=False)
    result = json.loads(done.stdout)
    # The figures, for docs/soak.md: one line per process life, and the run's verdict.
    print("\n".join(line for line in done.stderr.splitlines() if "soak:" in line))
    assert result["exit_code"] == 0, (result.get("notes"), result.get("error"),
                                      done.stderr[-3000:])
    assert result["valid"] is True
    judgement = result["resources"]
    assert judgement["passed"] and judgement["grown"] == []
    judged = {life["node"] for life in judgement["lives"] if life["judged"]}
    assert {"zookeeper", "harness"} <= judged
    assert any(node.startswith("broker-") for node in judged), judgement["lives"]
    # Every fault the schedule named was carried out, not skipped.
    assert not [note for note in result["notes"] if note.startswith("skipped fault")]
