"""The checker on a real Spark standalone cluster, started from pyspark's own launch scripts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from harness.checker import spark as engine

from .conftest import run_cli
from .histories import zoo

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_workers(web_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as answer:
            state = json.load(answer)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture
def standalone(tmp_path) -> Iterator[str]:
    """A master and one worker on loopback, as `spark-class` runs them; both killed after."""
    port, web = _free_port(), _free_port()
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "SPARK_NO_DAEMONIZE": "1",
    }
    commands = [
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web),
        ],
        [
            "org.apache.spark.deploy.worker.Worker",
            f"spark://127.0.0.1:{port}",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(_free_port()),
            "--cores",
            "2",
            "--memory",
            "2g",
        ],
    ]
    processes = []
    try:
        for n, command in enumerate(commands):
            with (tmp_path / f"daemon-{n}.log").open("w") as log:
                processes.append(
                    subprocess.Popen(
                        [str(SPARK_CLASS), *command],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + 90
        while _alive_workers(web) < 1:
            assert time.monotonic() < deadline, (tmp_path / "daemon-1.log").read_text()[-2000:]
            assert all(p.poll() is None for p in processes), "a Spark daemon exited"
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.mark.slow  # a standalone Spark master and worker: 28 s; outside .ci/run
def test_standalone_cluster_gives_the_local_verdict(spark, standalone, tmp_path):
    b, expected = zoo()
    history = b.write(tmp_path / "history", split=True)  # JSONL: executors must decode it
    local = engine.check(spark, history).to_json()
    run = run_cli(
        "check",
        str(history),
        "--json",
        "--master",
        standalone,
        env={"SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert run.code == 1, run.stderr
    judged = run.json()
    assert judged.pop("engine")["name"] == "spark"  # the CLI says who judged; check() not
    assert judged == local
    assert {k: a["count"] for k, a in local["anomalies"].items()} == expected
