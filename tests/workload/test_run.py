"""`kafka-harness run` end to end, as a user runs it: a separate process, a run directory, an exit
code from the checker's verdict."""

import json
import subprocess
import sys

import pytest

from harness.nemesis.schedule import plan


def kafka_harness(*args, timeout):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


# Slow (73 s): in CI, tests/cli/test_run_cli.py runs a suite and a workload through `run`,
# tests/workload/test_run_report.py reads a real run's reports, and the chaos suite judges
# runs with Spark.
@pytest.mark.slow
def test_a_run_of_a_suite_and_a_workload_without_faults_is_valid_and_leaves_reports(tmp_path):
    run_dir = tmp_path / "run"
    done = kafka_harness("run", "--suites", "protocol",
                         "--duration", "20", "--nemesis", "none", "--seed", "1",
                         "--dir", str(run_dir), "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["valid"] is True and result["exit_code"] == 0 and result["seed"] == 1
    assert result["schedule"] == [] and result["error"] is None
    assert result["stats"]["sends_ok"] > 500
    assert all(read["complete"] for read in result["final_read"])
    for name in ("report.html", "report.json", "junit.xml"):
        assert (run_dir / "report" / name).stat().st_size > 0
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == result["run_id"]
    assert sorted(p.name for p in (run_dir / "history").iterdir())[0] == "process-0000.parquet"
    suites = result["suites"]
    assert suites["names"] == ["protocol"] and suites["failed"] == []
    assert suites["counts"]["passed"] > 20
    table = json.loads((run_dir / "suites" / "matrix.json").read_text())["targets"]
    assert table[0]["target"] == "reference"
    assert all(t["nodeid"].startswith("suites/protocol/") for t in table[0]["tests"])
    assert str(run_dir / "suites" / "matrix.html") in result["report"]


def test_an_unknown_suite_is_a_usage_error(tmp_path):
    done = kafka_harness("run", "--suites", "protocol,nope", "--dir", str(tmp_path),
                         timeout=60)
    assert done.returncode == 2
    assert ("unknown suite nope; allowed: protocol, offsets, groups, transactions, failover, "
            "unclean") in done.stderr


def test_bad_options_exit_2_naming_what_is_allowed(tmp_path):
    done = kafka_harness("run", "--nemesis", "partition,explode", "--dir", str(tmp_path),
                         timeout=60)
    assert done.returncode == 2
    assert "explode" in done.stderr and "allowed: partition" in done.stderr


@pytest.mark.slow
def test_kills_and_partitions_keep_at_least_once_with_acks_all_and_idempotence(tmp_path):
    seed = 5
    faults = {s.fault for s in plan(seed, ("kill", "partition"), 30, 3)}
    assert faults == {"kill", "partition"}
    done = kafka_harness("run", "--suites", "none",
                         "--duration", "30", "--nemesis", "kill,partition", "--seed",
                         str(seed), "--dir", str(tmp_path / "run"), "--engine", "python",
                         "--json", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["cluster"] == "proxy"
    nemesis = [step["what"] for step in result["nemesis"]]
    assert any(w.startswith("kill broker") for w in nemesis)
    assert any(w.startswith("partition ") for w in nemesis)
    assert all("error" not in step for step in result["nemesis"])
    assert result["stats"]["nemesis_ops"] == len(nemesis)
    assert all(read["complete"] for read in result["final_read"])
