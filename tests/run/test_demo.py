"""The README's main-job command end to end: `kafka-harness demo`."""

import json
import subprocess
import sys
from pathlib import Path


def test_demo_round_trip_through_the_cli(tmp_path):
    cli = Path(sys.executable).parent / "kafka-harness"
    result = subprocess.run([str(cli), "demo", "--records", "2000", "--dir", str(tmp_path),
                             "--json"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True
    assert summary["consumed"] == summary["consumed_after_restart"] == 2000
    assert summary["broker_exit_code"] == 0
    assert Path(summary["log_path"]).is_file()
