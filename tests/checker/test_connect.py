"""The checker through Spark Connect, against a server started from the pyspark package itself.

pyspark's wheel carries the server (jars/spark-connect_*.jar) and its launch script
(sbin/start-connect-server.sh), so this needs no download: the same server a user would run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from harness.checker import spark as engine

from .conftest import run_cli
from .histories import zoo
from .test_distributed import _free_port

SPARK_HOME = Path(pyspark.__file__).parent
START = SPARK_HOME / "sbin" / "start-connect-server.sh"

pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect]'s grpcio")


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _survivors(tmp_path: Path) -> list[int]:
    """Processes started with this server's environment: its JVM and its Python workers, which
    leave its process group but inherit SPARK_LOG_DIR."""
    marker = f"SPARK_LOG_DIR={tmp_path / 'logs'}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture
def connect_server(tmp_path) -> Iterator[str]:
    """A Spark Connect server (local[2]) on a free loopback port, in the foreground of its own
    session so that it, its JVM and its Python workers are stopped as one process group."""
    assert list((SPARK_HOME / "jars").glob("spark-connect_*.jar")), "pyspark lacks Connect"
    port = _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_PID_DIR": str(tmp_path),
        "PYSPARK_PYTHON": sys.executable,  # its Python workers decode JSONL with this package
    }
    env.pop("SPARK_REMOTE", None)
    log = tmp_path / "connect-server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(START),
                "--wait",
                "--master",
                "local[2]",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.ui.enabled=false",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while not _listening(port):
            assert server.poll() is None, f"Connect server exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    deadline = time.monotonic() + 30
    while (_listening(port) or _survivors(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _listening(port), "the Connect server outlived its process group"
    assert not _survivors(tmp_path), "a process of the Connect server is still running"


@pytest.mark.slow  # a Spark Connect server of its own: 30 s; outside .ci/run
def test_connect_server_gives_the_local_verdict(spark, connect_server, tmp_path):
    b, expected = zoo()
    parquet = b.write(tmp_path / "parquet")
    jsonl = b.write(tmp_path / "jsonl", split=True)  # JSONL: the server's workers decode it
    local = engine.check(spark, parquet).to_json()
    assert {k: a["count"] for k, a in local["anomalies"].items()} == expected
    # --engine spark: so small a history is judged by the Python engine under the default auto.
    runs = [
        run_cli("check", str(parquet), "--json", "--engine", "spark",
                env={"SPARK_REMOTE": connect_server}),
        run_cli("check", str(jsonl), "--json", "--engine", "spark", "--master", connect_server),
    ]
    for run in runs:
        assert run.code == 1, run.stderr
        judged = run.json()
        assert judged.pop("engine")["name"] == "spark"  # the CLI says who judged; check() not
        assert judged == local
