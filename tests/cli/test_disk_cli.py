"""`kafka-harness disk full|errors|heal` on a cluster started with `up --disk faulty`: a full
or failing disk halts the reference broker as it halts Kafka, heal brings it back, producers
with acks=all work again afterwards, and `down` leaves no mount behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.disk.mounts import mounts_under
from tests.cli.test_cli_end_to_end import cli, ok, status

pytestmark = [pytest.mark.slow,  # a three-broker cluster, two halts and restarts: ~60 s
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")]


def _produce(bootstrap: str, count: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 60000})
    acked: list[int] = []
    for i in range(count):
        producer.produce("disk-cli", str(i).encode(),
                         on_delivery=lambda err, _m: acked.append(1) if err is None else None)
    producer.flush(90)
    return len(acked)


def test_disk_commands_halt_and_heal_a_broker(tmp_path: Path):
    run_dir = tmp_path / "run"
    ok(run_dir, "up", "--disk", "faulty")
    try:
        bootstrap = status(run_dir)["bootstrap"]
        admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the result
        admin.create_topics([NewTopic("disk-cli", 1, 3, config={"min.insync.replicas": "2"})]
                            )["disk-cli"].result(30)
        assert len(mounts_under(run_dir)) == 6  # a tmpfs and a FUSE mount per broker

        full = ok(run_dir, "disk", "full", "broker-1").stdout
        assert "broker-1's disk full" in full
        errors = ok(run_dir, "disk", "errors", "broker-2", "--rate", "1").stdout
        assert "fail with EIO at rate 1.0" in errors
        nodes = status(run_dir)["nodes"]
        assert nodes["broker-1"]["disk"]["free_bytes"] == 0
        assert nodes["broker-1"]["disk"]["ballast_bytes"] > 60 * (1 << 20)
        assert nodes["broker-2"]["disk"]["error_rate"] == 1.0
        assert nodes["broker-3"]["disk"] == {**nodes["broker-3"]["disk"], "layer": "faulty",
                                             "ballast_bytes": 0, "error_rate": 0.0}
        refused = cli(run_dir, "disk", "full", "zk")
        assert refused.returncode == 2 and "not to ZooKeeper" in refused.stderr

        # The replicas' next writes fail: both brokers halt as Kafka does.
        _produce(bootstrap, 50)
        for broker in ("broker-1", "broker-2"):
            log = (run_dir / broker / "reference.log")
            assert "Shutdown broker because all log dirs in" in log.read_text(), broker

        for broker in ("broker-1", "broker-2"):
            healed = ok(run_dir, "disk", "heal", broker).stdout
            assert f"{broker} had stopped (exit code 1) and was started again" in healed
        assert _produce(bootstrap, 50) == 50
    finally:
        ok(run_dir, "down")
    assert mounts_under(run_dir) == []
