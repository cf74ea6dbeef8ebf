"""Each toxic's effect on live bytes, measured through a proxy in front of an echo server.

Every case runs against the real Toxiproxy server and the built-in one (see ``conftest``), and
toxics are added and removed through toxiproxy-python, the client the harness drives them with;
only updating a live toxic (which toxiproxy-python cannot do) goes through the raw API.

Time is asserted only where the toxic guarantees it whatever the machine's load: a lower bound
(a latency of L ms cannot answer sooner than L ms after the bytes were sent, a timeout cannot
close sooner than its timeout). Where a test must show that something is *not* delayed, the
toxic's delay is made far longer (minutes) than the sockets' generous timeout, so only a delay
that really applies can fail it. How close to the configured figures a server stays (jitter
within +-J, a bandwidth within 10 %) is a precision claim: the built-in server's behaviours are
held to exact figures on a virtual clock in ``test_toxic_timing``; the real server is
Toxiproxy's own code.
"""

from __future__ import annotations

import queue
import random
import select
import socket
import threading
import time

import pytest

from harness.cluster.proxy_faults import CUT_TOXIC, partition_toxic_name
from harness.net.ports import LOOPBACK

from .conftest import Upstream, connect, recv_exactly

FOREVER_MS = 600_000  # a delay no test waits out: only the sockets' timeouts can end it
CLOCK_SLACK_S = 0.001  # timers may round to the millisecond (Go's, the event loop's)


def round_trip(sock: socket.socket, payload: bytes = b"x") -> float:
    started = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.monotonic() - started


def at_least(seconds: float) -> float:
    """A lower bound that the toxic guarantees, less the timers' rounding."""
    return seconds - CLOCK_SLACK_S


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the next read shows the connection closed (FIN or RST) — and so that nothing
    arrived before the close (a byte would be read instead)."""
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
    """An upstream that greets each connection, then records every byte it receives, and
    which connections have ended (their proxy side closed)."""

    GREETING = b"hello from upstream"

    def __init__(self) -> None:
        self.received: queue.Queue[bytes] = queue.Queue()
        self.ended: queue.Queue[bytes] = queue.Queue()  # all a connection got, once it ends
        self.upstream = Upstream(self._handle)

    def _handle(self, conn: socket.socket) -> None:
        conn.sendall(self.GREETING)
        everything = bytearray()
        try:
            while data := conn.recv(65536):
                everything += data
                self.received.put(data)
        finally:
            self.ended.put(bytes(everything))

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
        # The direction that is not cut flows; the upstream greeted before it read anything.
        if stream == "upstream":
            assert recv_exactly(sock, len(Recorder.GREETING)) == Recorder.GREETING
        else:
            assert recorder.got(timeout=5) == b"client bytes"
        assert proxy.destroy_toxic(partition_toxic_name(stream))
        # Healing closes what the cut held, and the cut bytes never arrive: the client reads
        # the close with nothing before it, and the upstream's connection ends with only what
        # the open direction carried.
        assert closed_by_peer(sock), "healing closes what the cut held; nothing leaks through"
        upstream_got = recorder.ended.get(timeout=5)
        assert upstream_got == (b"" if stream == "upstream" else b"client bytes")
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
def test_latency_delays_every_trip_by_at_least_latency_minus_jitter(proxy, stream):
    proxy.add_toxic(type="latency", stream=stream, attributes={"latency": 100, "jitter": 20})
    with connect(proxy) as sock:
        round_trip(sock)  # the first trip also waits for the proxy to dial upstream
        samples = [round_trip(sock) for _ in range(5)]
    assert all(sample >= at_least(0.100 - 0.020) for sample in samples), samples


def test_latency_added_and_removed_on_a_live_connection(proxy):
    with connect(proxy, timeout=10) as sock:
        round_trip(sock)
        proxy.add_toxic(type="latency", attributes={"latency": 150})
        assert round_trip(sock) >= at_least(0.150), "added: it applies to a live connection"
        assert proxy.destroy_toxic("latency_downstream")
        proxy.add_toxic(type="latency", attributes={"latency": FOREVER_MS})
        sock.sendall(b"held")
        assert proxy.destroy_toxic("latency_downstream")
        # Removed: what it held is let go and nothing more is delayed, long before ten minutes
        # (the socket's 10 s timeout would fail these reads).
        assert recv_exactly(sock, 4) == b"held"
        round_trip(sock)


def test_bandwidth_lets_no_more_than_the_rate_through(proxy):
    proxy.add_toxic(type="bandwidth", attributes={"rate": 100})
    payload = b"b" * 200_000
    with connect(proxy, timeout=10) as sock:
        elapsed = round_trip(sock, payload)
    assert elapsed >= at_least(2.0), "200 KB at 100 KB/s take 2 s"


def test_timeout_stops_data_then_closes(proxy):
    proxy.add_toxic(type="timeout", attributes={"timeout": 300})
    with connect(proxy) as sock:
        started = time.monotonic()
        sock.sendall(b"lost")
        assert closed_by_peer(sock), "the echo was dropped, then the connection closed"
        assert time.monotonic() - started >= at_least(0.3)


def test_timeout_counts_from_the_last_data(proxy):
    """As in Toxiproxy's Go code: each chunk that arrives (and is dropped) re-arms the
    timer, so a client that keeps talking is held, and closed ``timeout`` ms after it stops.

    Both halves are lower bounds: the close never comes sooner than ``timeout`` after the last
    chunk, and it comes after the client stopped talking, more than ``timeout`` after its first
    chunk. Only a pause of the test itself as long as the timeout between two of its chunks
    (50 ms apart) could let a correct proxy close early; such an attempt is recognised from the
    send times, not guessed, and repeated."""
    timeout_s = 0.4
    proxy.add_toxic(type="timeout", stream="upstream",
                    attributes={"timeout": int(timeout_s * 1000)})
    for _attempt in range(3):
        with connect(proxy) as sock:
            sends, closed_at = talk_until_closed(sock, talk_for=1.0, interval=0.05)
        last = max(t for t in sends if t < closed_at)
        assert closed_at - last >= at_least(timeout_s), "closed sooner than timeout after data"
        gaps = [b - a for a, b in zip(sends, sends[1:], strict=False) if b < closed_at]
        if closed_at > sends[-1] or any(gap >= timeout_s for gap in gaps):
            break  # decided, or the test paused for a whole timeout: try again
    assert closed_at > sends[-1], "closed while the client was still talking"
    assert sends[-1] - sends[0] > 2 * timeout_s, "the talk outlasted the first chunk's timeout"


def talk_until_closed(sock: socket.socket, talk_for: float, interval: float,
                      bound: float = 10.0) -> tuple[list[float], float]:
    """Send a chunk every ``interval`` s for ``talk_for`` s, and watch for the close until
    ``bound`` s; the send times and when the close was seen. Data read back fails."""
    sends: list[float] = []
    started = time.monotonic()
    while time.monotonic() - started < bound:
        if time.monotonic() - started < talk_for:
            try:
                sock.sendall(b"still here")
            except ConnectionError:  # the close came before this chunk could go
                return sends, time.monotonic()
            sends.append(time.monotonic())
        readable, _, _ = select.select([sock], [], [], interval)
        if readable:
            assert closed_by_peer(sock), "the timeout toxic let data through"
            return sends, time.monotonic()
    raise AssertionError(f"not closed within {bound:.0f}s")


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
        assert time.monotonic() - started >= at_least(0.1)


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
    # How many reads it takes depends on how promptly this process reads (a busy machine
    # merges slices): the slices' sizes and pauses are held exactly in test_toxic_timing.
    assert b"".join(pieces) == payload


def test_slow_close_delays_the_close(proxy):
    proxy.add_toxic(type="slow_close", attributes={"delay": FOREVER_MS})
    with connect(proxy) as sock:
        round_trip(sock)  # data is not delayed: the socket's 5 s timeout would fail this
    assert proxy.destroy_toxic("slow_close_downstream")
    proxy.add_toxic(type="slow_close", attributes={"delay": 300})
    with connect(proxy) as sock:
        round_trip(sock)
        started = time.monotonic()
        sock.shutdown(socket.SHUT_WR)
        assert closed_by_peer(sock)
        assert time.monotonic() - started >= at_least(0.3)


def test_toxicity_zero_never_applies(proxy):
    proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": FOREVER_MS})
    for _ in range(5):
        with connect(proxy) as sock:
            round_trip(sock)  # the socket's 5 s timeout would fail a trip the toxic delayed


def test_toxicity_is_decided_per_connection(proxy):
    """Half the connections get a latency of ten minutes: a connection the toxic spared
    answers (within a generous 5 s), one it hit never does while the test runs. Each spared
    connection answers a second trip too, and no hit one has answered anything by then."""
    proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": FOREVER_MS})
    sockets = [connect(proxy) for _ in range(20)]
    try:
        for sock in sockets:
            sock.sendall(b"1")
        answered = answers_within(sockets, b"1", SPARED_ANSWER_S)
        spared = [sock for sock in sockets if sock in answered]
        hit = [sock for sock in sockets if sock not in answered]
        for sock in spared:
            round_trip(sock, b"2")  # a spared connection stays spared (5 s socket timeout)
        assert not select.select(hit, [], [], 0)[0], "a hit connection stays hit"
        assert 2 <= len(hit) <= 18, "about half the connections get the toxic"
    finally:
        for sock in sockets:
            sock.close()


SPARED_ANSWER_S = 5.0


def answers_within(sockets: list[socket.socket], payload: bytes,
                   seconds: float) -> set[socket.socket]:
    """The sockets whose echo of ``payload`` arrives within ``seconds``."""
    answered: set[socket.socket] = set()
    deadline = time.monotonic() + seconds
    while len(answered) < len(sockets) and (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([s for s in sockets if s not in answered], [], [], left)
        for sock in readable:
            assert recv_exactly(sock, len(payload)) == payload
            answered.add(sock)
    return answered


def test_upstream_and_downstream_chains_are_separate(client, recorder):
    """A toxic that drops everything upstream leaves the downstream flowing: the upstream's
    greeting arrives, and its connection ends, when the proxy goes, having received nothing."""
    proxy = client.create(upstream=f"{LOOPBACK}:{recorder.upstream.port}", name="chains",
                          listen=f"{LOOPBACK}:0")
    proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    with connect(proxy) as sock:
        sock.sendall(b"dropped on the way up")
        assert recv_exactly(sock, len(Recorder.GREETING)) == Recorder.GREETING
        assert proxy.destroy()
        assert recorder.ended.get(timeout=5) == b""


def test_disabled_proxy_refuses_and_closes(client, proxy):
    with connect(proxy) as live:
        round_trip(live)
        proxy.disable()
        assert closed_by_peer(live)
    host, port = proxy.listen.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=2).close()
    proxy.enable()
    assert client.get_proxy("fx").listen == proxy.listen, "re-enabled on the same port"
    with connect(proxy) as again:
        round_trip(again)


def test_deleted_proxy_closes_its_connections(proxy):
    with connect(proxy) as live:
        round_trip(live)
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
        assert round_trip(sock) >= at_least(0.1), "the two delays add up"


def test_updating_a_toxic_changes_live_connections(api, proxy):
    proxy.add_toxic(type="latency", attributes={"latency": 50})
    with connect(proxy) as sock:
        assert round_trip(sock) >= at_least(0.05)
        assert api.patch("/proxies/fx/toxics/latency_downstream",
                         {"attributes": {"latency": 200}})[0] == 200
        assert round_trip(sock) >= at_least(0.2), "the new latency applies to the live link"


def test_bytes_survive_toxics_changing_mid_stream(api, proxy):
    """Adding, updating and removing toxics under traffic neither loses nor reorders a byte."""
    payload = random.Random(7).randbytes(2_000_000)
    proxy.add_toxic(type="bandwidth", name="base", attributes={"rate": 2000})
    received = bytearray()
    # The writer sends a piece, then the toxics change, then the next piece: every change
    # comes between two pieces of the payload, however fast or slow the machine is.
    pieces = [payload[i : i + 100_000] for i in range(0, len(payload), 100_000)]
    with connect(proxy, timeout=20) as sock:
        reader = threading.Thread(
            target=lambda: received.extend(recv_exactly(sock, len(payload))), daemon=True
        )
        reader.start()
        for rounds, piece in enumerate(pieces, 1):
            sock.sendall(piece)
            if rounds == len(pieces):
                break
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
        reader.join(20)
        assert not reader.is_alive(), "the payload did not come back within 20 s"
    assert len(received) == len(payload)
    assert received == payload
