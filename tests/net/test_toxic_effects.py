"""Each toxic's effect on live bytes, measured through a proxy in front of an echo server.

Every case runs against the real Toxiproxy server and the built-in one (see ``conftest``), and
toxics are added and removed through toxiproxy-python, the client the harness drives them with;
only updating a live toxic (which toxiproxy-python cannot do) goes through the raw API.
"""

from __future__ import annotations

import queue
import random
import socket
import threading
import time

import pytest

from harness.cluster.proxy_faults import CUT_TOXIC, partition_toxic_name
from harness.net.ports import LOOPBACK

from .conftest import Upstream, connect, recv_exactly


def round_trip(sock: socket.socket, payload: bytes = b"x") -> float:
    started = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.monotonic() - started


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the next read shows the connection closed (FIN or RST)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def proxy(client, echo_server):
    """A toxiproxy-python ``Proxy`` named ``fx`` in front of the echo server."""
    return client.create(upstream=f"{LOOPBACK}:{echo_server.port}", name="fx",
                         listen=f"{LOOPBACK}:0")


class Recorder:
    """An upstream that greets each connection, then records every byte it receives."""

    GREETING = b"hello from upstream"

    def __init__(self) -> None:
        self.received: queue.Queue[bytes] = queue.Queue()
        self.upstream = Upstream(self._handle)

    def _handle(self, conn: socket.socket) -> None:
        conn.sendall(self.GREETING)
        while data := conn.recv(65536):
            self.received.put(data)

    def got(self, timeout: float) -> bytes:
        try:
            return self.received.get(timeout=timeout)
        except queue.Empty:
            return b""


@pytest.fixture
def recorder():
    recording = Recorder()
    yield recording
    recording.upstream.close()


@pytest.mark.parametrize("stream", ["upstream", "downstream"])
def test_cut_drops_one_direction_until_healed(client, recorder, stream):
    """A partition cut as NetworkFaults makes it: the cut direction's bytes vanish, the other
    direction still flows, nothing is reset; healing closes the connections the cut held
    (Toxiproxy's timeout toxic closes on removal) and new ones are clean."""
    proxy = client.create(upstream=f"{LOOPBACK}:{recorder.upstream.port}", name="cut",
                          listen=f"{LOOPBACK}:0")
    proxy.add_toxic(name=partition_toxic_name(stream), stream=stream, **CUT_TOXIC)
    with connect(proxy) as sock:
        sock.sendall(b"client bytes")
        sock.settimeout(0.5)
        if stream == "upstream":
            assert recv_exactly(sock, len(Recorder.GREETING)) == Recorder.GREETING
            assert recorder.got(timeout=0.5) == b"", "upstream bytes were dropped"
        else:
            assert recorder.got(timeout=5) == b"client bytes"
            with pytest.raises(TimeoutError):
                sock.recv(100)
        assert proxy.destroy_toxic(partition_toxic_name(stream))
        sock.settimeout(5)
        assert closed_by_peer(sock), "healing closes what the cut held; nothing leaks through"
    assert client.get_proxy("cut").enabled, "a cut is not a disabled proxy"
    with connect(proxy) as again:
        assert recv_exactly(again, len(Recorder.GREETING)) == Recorder.GREETING
        again.sendall(b"after heal")
        assert recorder.got(timeout=5) == b"after heal"


def test_data_flows_both_ways(proxy):
    payload = bytes(range(256)) * 4096
    with connect(proxy) as sock:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload


@pytest.mark.parametrize("stream", ["downstream", "upstream"])
def test_latency_within_jitter_plus_10ms(proxy, stream):
    proxy.add_toxic(type="latency", stream=stream, attributes={"latency": 100, "jitter": 20})
    with connect(proxy) as sock:
        round_trip(sock)  # the first trip also waits for the proxy to dial upstream
        samples = [round_trip(sock) for _ in range(5)]
    assert all(0.100 - 0.030 <= sample <= 0.100 + 0.030 for sample in samples), samples


def test_latency_added_and_removed_on_a_live_connection(proxy):
    with connect(proxy) as sock:
        assert round_trip(sock) < 0.05
        proxy.add_toxic(type="latency", attributes={"latency": 150})
        assert 0.14 <= round_trip(sock) <= 0.16 + 0.05
        assert proxy.destroy_toxic("latency_downstream")
        assert round_trip(sock) < 0.05


def test_bandwidth_within_10_percent(proxy):
    proxy.add_toxic(type="bandwidth", attributes={"rate": 100})
    payload = b"b" * 200_000
    with connect(proxy, timeout=10) as sock:
        elapsed = round_trip(sock, payload)
    assert 2.0 * 0.9 <= elapsed <= 2.0 * 1.1, elapsed


def test_timeout_stops_data_then_closes(proxy):
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"lost")
        assert closed_by_peer(sock)
        assert 0.28 <= time.monotonic() - started <= 0.6


def test_timeout_counts_from_the_last_data(proxy):
    """As in Toxiproxy's Go code: each chunk that arrives (and is dropped) re-arms the
    timer, so a client that keeps talking is held, and closed ``timeout`` ms after it stops."""
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 400})
    with connect(proxy) as sock:
        sock.settimeout(0.05)
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            sock.sendall(b"still here")
            last_sent = time.monotonic()
            with pytest.raises(TimeoutError):
                sock.recv(10)
            time.sleep(0.15)
        sock.settimeout(5)
        assert closed_by_peer(sock)
        assert 0.38 <= time.monotonic() - last_sent <= 0.7


def test_timeout_zero_holds_until_removed(proxy):
    proxy.add_toxic(type="timeout", attributes={"timeout": 0})
    with connect(proxy) as sock:
        sock.sendall(b"lost")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        sock.settimeout(5)
        assert proxy.destroy_toxic("timeout_downstream")
        assert closed_by_peer(sock), "removing a timeout toxic closes the connections it held"


def test_reset_peer_sends_rst(proxy):
    proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 100})
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"hello")
        with pytest.raises(ConnectionResetError):
            while sock.recv(10):
                pass
        assert 0.09 <= time.monotonic() - started <= 0.5


def test_limit_data_closes_after_n_bytes(proxy):
    proxy.add_toxic(type="limit_data", attributes={"bytes": 1000})
    with connect(proxy) as sock:
        sock.sendall(b"L" * 5000)
        received = recv_exactly(sock, 5000)
        assert received == b"L" * 1000
        assert closed_by_peer(sock)


def test_slicer_delivers_everything_in_small_writes(proxy):
    proxy.add_toxic(type="slicer", attributes={"average_size": 100, "size_variation": 20,
                                               "delay": 5000})
    payload = bytes(range(200)) * 10
    pieces: list[bytes] = []
    with connect(proxy) as sock:
        sock.sendall(payload)
        while sum(map(len, pieces)) < len(payload):
            piece = sock.recv(65536)
            assert piece
            pieces.append(piece)
    assert b"".join(pieces) == payload
    assert len(pieces) >= 10, [len(p) for p in pieces]
    assert sorted(map(len, pieces))[len(pieces) // 2] <= 120


def test_slow_close_delays_the_close(proxy):
    proxy.add_toxic(type="slow_close", attributes={"delay": 300})
    with connect(proxy) as sock:
        assert round_trip(sock) < 0.05, "data is not delayed"
        started = time.monotonic()
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_peer(sock)
        assert 0.28 <= time.monotonic() - started <= 0.6


def test_toxicity_zero_never_applies(proxy):
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 500})
    for _ in range(5):
        with connect(proxy) as sock:
            assert round_trip(sock) < 0.2


def test_toxicity_is_decided_per_connection(proxy):
    proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 50})
    delayed = []
    for _ in range(20):
        with connect(proxy) as sock:
            round_trip(sock)  # the first trip also waits for the proxy to dial upstream
            first, second = round_trip(sock), round_trip(sock)
        assert (first >= 0.04) == (second >= 0.04), "one roll per connection"
        delayed.append(first >= 0.04)
    assert 2 <= sum(delayed) <= 18, "about half the connections get the toxic"


def test_upstream_and_downstream_chains_are_separate(proxy):
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    with connect(proxy) as sock:
        sock.sendall(b"dropped on the way up")
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(10)


def test_disabled_proxy_refuses_and_closes(client, proxy):
    with connect(proxy) as live:
        assert round_trip(live) < 0.05
        proxy.disable()
        assert closed_by_peer(live)
    host, port = proxy.listen.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=2).close()
    proxy.enable()
    assert client.get_proxy("fx").listen == proxy.listen, "re-enabled on the same port"
    with connect(proxy) as again:
        assert round_trip(again) < 0.05


def test_deleted_proxy_closes_its_connections(proxy):
    with connect(proxy) as live:
        assert round_trip(live) < 0.05
        assert proxy.destroy()
        assert closed_by_peer(live)


def test_unreachable_upstream_closes_the_client(client):
    with socket.create_server((LOOPBACK, 0)) as gone:
        port = gone.getsockname()[1]
    proxy = client.create(upstream=f"{LOOPBACK}:{port}", name="nowhere",
                          listen=f"{LOOPBACK}:0")
    with connect(proxy) as sock:
        assert closed_by_peer(sock)


def test_toxics_chain_in_order(proxy):
    proxy.add_toxic(type="latency", name="first", attributes={"latency": 50})
    proxy.add_toxic(type="latency", name="second", attributes={"latency": 50})
    with connect(proxy) as sock:
        assert 0.1 <= round_trip(sock) <= 0.1 + 0.05


def test_updating_a_toxic_changes_live_connections(api, proxy):
    proxy.add_toxic(type="latency", attributes={"latency": 50})
    with connect(proxy) as sock:
        assert 0.04 <= round_trip(sock) <= 0.05 + 0.03
        assert api.patch("/proxies/fx/toxics/latency_downstream",
                         {"attributes": {"latency": 200}})[0] == 200
        assert 0.19 <= round_trip(sock) <= 0.2 + 0.03


def test_bytes_survive_toxics_changing_mid_stream(api, proxy):
    """Adding, updating and removing toxics under traffic neither loses nor reorders a byte."""
    payload = random.Random(7).randbytes(2_000_000)
    proxy.add_toxic(type="bandwidth", name="base", attributes={"rate": 2000})
    received = bytearray()
    rounds = 0
    with connect(proxy, timeout=20) as sock:
        reader = threading.Thread(
            target=lambda: received.extend(recv_exactly(sock, len(payload))), daemon=True
        )
        reader.start()
        writer = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        writer.start()
        while reader.is_alive() and rounds < 200:
            rounds += 1
            for stream in ("upstream", "downstream"):
                proxy.add_toxic(type="latency", stream=stream, attributes={"latency": 5})
                proxy.add_toxic(type="slicer", stream=stream,
                              attributes={"average_size": 2000, "size_variation": 500})
                proxy.add_toxic(type="bandwidth", stream=stream, attributes={"rate": 20_000})
            for stream in ("upstream", "downstream"):
                api.patch(f"/proxies/fx/toxics/latency_{stream}",
                          {"attributes": {"latency": rounds % 3}})
                for kind in ("slicer", "latency", "bandwidth"):
                    assert proxy.destroy_toxic(f"{kind}_{stream}")
            api.patch("/proxies/fx/toxics/base", {"attributes": {"rate": 1500 + rounds % 1000}})
        writer.join(20)
        reader.join(20)
    assert rounds >= 5, "the toxics changed while bytes were flowing"
    assert len(received) == len(payload)
    assert received == payload
