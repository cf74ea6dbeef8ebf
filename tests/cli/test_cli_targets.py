"""`kafka-harness up --target`: peer targets (Tansu, kfake, an external bootstrap) behind the
same commands; faults are refused with the reason, and `down` leaves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.lifecycle.procfs import process_state

from .test_cli_end_to_end import cli, ok, status


@pytest.mark.parametrize("target", ["tansu", "kfake"])
def test_up_with_a_peer_target_serves_clients_and_refuses_faults(tmp_path: Path, target: str):
    run_dir = tmp_path / target
    ok(run_dir, "up", "--target", target)
    try:
        state = status(run_dir)
        assert state["target"] == target and state["nodes"] == {}
        producer = Producer({"bootstrap.servers": state["bootstrap"], "acks": "all"})
        producer.produce("through-the-cli", b"hello")
        assert producer.flush(30) == 0
        del producer  # closed before the target goes, so it does not log reconnects
        refused = cli(run_dir, "partition", "isolate", "broker-1")
        assert refused.returncode == 2
        assert f"the {target!r} target does not offer it" in " ".join(refused.stderr.split())
        assert cli(run_dir, "kill", "broker-1").returncode == 2
        supervisor_pid = state["supervisor_pid"]
    finally:
        ok(run_dir, "down")
    assert process_state(supervisor_pid) == "down"


def test_up_with_an_external_target_needs_a_bootstrap_server(tmp_path: Path):
    assert cli(tmp_path / "x", "up", "--target", "external").returncode == 2
    both = cli(tmp_path / "x", "up", "--target", "external", "--bootstrap-server", "127.0.0.1:9",
               "--bootstrap", "127.0.0.1:9")
    assert both.returncode == 2 and "given together" in both.stderr
    run_dir = tmp_path / "external"
    ok(run_dir, "up", "--target", "external", "--bootstrap-server", "127.0.0.1:9")
    try:
        state = status(run_dir)
        assert state["target"] == "external" and state["bootstrap"] == "127.0.0.1:9"
        refused = cli(run_dir, "heal")
        assert refused.returncode == 2
        assert "external target is reached directly" in " ".join(refused.stderr.split())
    finally:
        ok(run_dir, "down")


def test_the_old_bootstrap_spelling_still_works_with_a_deprecation_note(tmp_path: Path):
    run_dir = tmp_path / "external"
    started = ok(run_dir, "up", "--target", "external", "--bootstrap", "127.0.0.1:9")
    try:
        assert "--bootstrap is deprecated" in started.stderr
        assert "use --bootstrap-server" in started.stderr
        assert status(run_dir)["bootstrap"] == "127.0.0.1:9"
    finally:
        ok(run_dir, "down")
