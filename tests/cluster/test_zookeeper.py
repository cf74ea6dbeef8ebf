"""The ZooKeeper launcher: a real server that answers, stops completely, and fails clearly."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from harness.cluster.errors import PeerStartError
from harness.cluster.local import LocalCluster
from harness.cluster.zookeeper import (
    DEBIAN_SLF4J_SIMPLE_JAR,
    ZooKeeperServer,
    default_classpath,
    four_letter_word,
)
from harness.waiting import wait_for


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_starts_answers_and_stops_with_nothing_left(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, tick_time_ms=100)
    with server:
        pid = server.pid
        assert pid is not None and server.is_running()
        assert four_letter_word(server.host, server.port, "ruok") == "imok"
        assert "Mode: standalone" in four_letter_word(server.host, server.port, "srvr")
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=10)
        try:
            client.create("/probe", b"x")
            assert client.get("/probe")[0] == b"x"
        finally:
            client.stop()
            client.close()
        config = (tmp_path / "zoo.cfg").read_text()
        assert "clientPortAddress=127.0.0.1" in config and "admin.enableServer=false" in config
    assert not server.is_running() and _gone(pid)
    assert "ZooKeeperServer" in server.log_path.read_text()


def test_a_given_run_dir_keeps_data_across_a_restart(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path)
    with server:
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=10)
        client.create("/kept", b"1")
        client.stop()
        client.close()
    port = server.port
    with server:
        assert server.port == port
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=10)
        try:
            assert client.exists("/kept")
        finally:
            client.stop()
            client.close()


def test_a_temporary_run_dir_is_removed() -> None:
    with ZooKeeperServer() as server:
        run_dir = server.run_dir
        assert (run_dir / "zookeeper.log").exists()
    assert not run_dir.exists()


def test_a_missing_jar_is_named(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, classpath=["/nowhere/zookeeper.jar"])
    with pytest.raises(PeerStartError, match=r"/nowhere/zookeeper\.jar.*apt-get install"):
        server.start()
    assert server.pid is None


def test_a_class_path_without_zookeeper_fails_with_the_jvm_message(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, classpath=[str(DEBIAN_SLF4J_SIMPLE_JAR)])
    with pytest.raises(PeerStartError, match="(?s)did not start.*QuorumPeerMain"):
        server.start()
    assert not server.is_running()


def test_missing_java_is_explained(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, java="/nowhere/bin/java")
    with pytest.raises(PeerStartError, match="needs Java.*openjdk"):
        server.start()


def test_the_class_path_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_CLASSPATH", "/a.jar:/b.jar")
    assert default_classpath() == ["/a.jar", "/b.jar"]
    monkeypatch.delenv("ZOOKEEPER_CLASSPATH")
    assert default_classpath()[0] == "/usr/share/java/zookeeper.jar"


def test_a_cluster_reading_another_zookeeper_stops_its_reader_of_the_first(
        tmp_path: Path) -> None:
    """A cluster whose ZooKeeper moved (a new connect string) reads through a new client; the
    old client is stopped, not left running its threads for the rest of the process."""
    cluster = LocalCluster()
    with ZooKeeperServer(tmp_path / "a", tick_time_ms=100) as first, \
            ZooKeeperServer(tmp_path / "b", tick_time_ms=100) as second:
        cluster.zookeeper = first
        old = cluster.state
        assert old.get("/") is not None  # its kazoo client is connected now
        with_old = threading.active_count()
        cluster.zookeeper = second
        new = cluster.state
        try:
            assert new is not old and new.hosts == second.connect_string
            wait_for(lambda: threading.active_count() < with_old, 10,
                     "the first client's threads to end")
        finally:
            new.close()
