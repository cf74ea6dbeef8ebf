"""`kafka-harness matrix` as a user runs it: from any directory, against a broker named by
--bootstrap-server, its exit code set by the targets the user named, its JSON versioned.

The broker is librdkafka's mock cluster (in this test's process, so nothing is left behind):
the protocol suite's ApiVersions tests are quick on it, and it fails one of them for real (it
does not answer an unsupported ApiVersions version with a v0 response, KIP-511).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster.peers import LibrdkafkaMockCluster
from harness.lifecycle.procfs import process_state
from harness.waiting import wait_for

KAFKA_HARNESS = str(Path(sys.executable).parent / "kafka-harness")
FAILS_ON_THE_MOCK = "test_unsupported_api_versions_version_gets_v0_answer_with_ranges"
PASSES_ON_THE_MOCK = "test_every_broker_advertises_api_versions"


@pytest.fixture
def mock_broker() -> Iterator[str]:
    with LibrdkafkaMockCluster() as cluster:
        yield cluster.bootstrap


def matrix(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The matrix from ``cwd`` (a directory that is not the checkout), its files in cwd/out."""
    return subprocess.run([KAFKA_HARNESS, "matrix", "--suites", "protocol", "--out", "out",
                           "--json", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def test_bootstrap_server_alone_tests_that_broker_only(tmp_path: Path, mock_broker: str):
    done = matrix(tmp_path, "--bootstrap-server", mock_broker, "-k", PASSES_ON_THE_MOCK)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["schema_version"] == 1
    assert summary["targets"] == {"external": {"passed": 1}}
    written = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert written["schema_version"] == 1
    assert [run["target"] for run in written["targets"]] == ["external"]
    # The log path is said as the session starts.
    assert f"external: log {tmp_path / 'out' / 'external.log'}" in done.stderr


def test_a_failure_on_the_broker_the_user_named_exits_1(tmp_path: Path, mock_broker: str):
    done = matrix(tmp_path, "--bootstrap-server", mock_broker,
                  "-k", f"{FAILS_ON_THE_MOCK} or {PASSES_ON_THE_MOCK}")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["targets"] == {"external": {"passed": 1, "failed": 1}}
    assert FAILS_ON_THE_MOCK in (tmp_path / "out" / "matrix.md").read_text()


def test_a_named_peer_gates_and_the_old_spelling_still_works(tmp_path: Path, mock_broker: str):
    named = matrix(tmp_path, "--targets", "librdkafka-mock", "-k", FAILS_ON_THE_MOCK)
    assert named.returncode == 1, named.stderr
    assert json.loads(named.stdout)["targets"] == {"librdkafka-mock": {"failed": 1}}
    old = matrix(tmp_path, "--bootstrap", mock_broker, "-k", PASSES_ON_THE_MOCK)
    assert old.returncode == 0, old.stderr
    assert "--bootstrap is deprecated" in old.stderr


def test_the_external_target_without_an_address_is_a_usage_error(tmp_path: Path):
    done = matrix(tmp_path, "--targets", "external")
    assert done.returncode == 2
    assert "error: the external target needs --bootstrap-server HOST:PORT" in done.stderr
    assert json.loads(done.stdout) == {
        "schema_version": 1, "exit_code": 2,
        "error": "the external target needs --bootstrap-server HOST:PORT"}
    assert not (tmp_path / "out").exists()


def _children(pid: int) -> list[int]:
    return [int(child) for child in
            Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_sigterm_stops_the_matrix_and_its_session_with_exit_130(tmp_path: Path):
    """A cancelled CI job: the session in progress is stopped too, not left running."""
    process = subprocess.Popen([KAFKA_HARNESS, "matrix", "--targets", "reference", "--suites",
                                "failover", "--out", "out"], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The session runs once it has started processes of its own (its target's).
        wait_for(lambda: [s for s in _children(process.pid) if _children(s)], 120,
                 "the failover session to start its target")
        (session,) = _children(process.pid)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 130, err
        assert "interrupted" in err
        wait_for(lambda: process_state(session) == "down", 30, "the session to end")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
