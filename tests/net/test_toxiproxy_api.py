"""Both Toxiproxy servers answer the HTTP API v2 with the same codes and shapes.

Every test runs against the real server and the built-in one (see ``conftest``); the few that
pin a deliberate difference of the built-in server run against one of them and say why.
"""

from __future__ import annotations

import socket

import pytest

from harness.net.ports import LOOPBACK
from harness.net.toxiproxy_api import VERSION

from .conftest import builtin_only, connect, real_only, recv_exactly

PROXY_FIELDS = ["name", "listen", "upstream", "enabled", "toxics"]
LISTEN = f"{LOOPBACK}:0"
"""Every proxy listens on loopback: the real server's default is every interface."""


def test_version(api, toxiproxy_server):
    """The built-in server answers the Toxiproxy version whose API it implements, marked as
    its own in the build metadata; the real one is that version (ci/fetch_vendor.sh pins it)."""
    status, body = api.get("/version")
    expected = VERSION if toxiproxy_server.kind == "built-in" else VERSION.partition("+")[0]
    assert (status, body) == (200, {"version": expected})


def test_create_list_show_delete(api, echo_server):
    upstream = f"{LOOPBACK}:{echo_server.port}"
    status, proxy = api.post("/proxies", {"name": "kafka", "upstream": upstream,
                                           "listen": LISTEN})
    assert status == 201
    # The real server also shows an internal "Logger": {} (a Go struct field it leaks).
    assert [field for field in proxy if field in PROXY_FIELDS] == PROXY_FIELDS
    assert proxy["name"] == "kafka"
    assert proxy["enabled"] is True
    assert proxy["toxics"] == []
    host, port = proxy["listen"].rsplit(":", 1)
    assert host == LOOPBACK and int(port) > 0, "listen shows the port actually bound"

    assert api.get("/proxies") == (200, {"kafka": proxy})
    assert api.get("/proxies/kafka") == (200, proxy)
    assert api.delete("/proxies/kafka") == (204, b"")
    assert api.get("/proxies/kafka") == (404, {"error": "proxy not found", "status": 404})
    assert api.delete("/proxies/kafka")[0] == 404


def test_create_errors(api, echo_server):
    upstream = f"{LOOPBACK}:{echo_server.port}"
    api.create_proxy("dup", echo_server.port)
    assert api.post("/proxies", {"name": "dup", "upstream": upstream, "listen": LISTEN}) == (
        409, {"error": "proxy already exists", "status": 409})
    status, body = api.post("/proxies", {"upstream": upstream, "listen": LISTEN})
    assert (status, body["status"]) == (400, 400) and "name" in body["error"]
    status, body = api.post("/proxies", {"name": "x", "listen": LISTEN})
    assert (status, body["status"]) == (400, 400) and "upstream" in body["error"]
    status, body = api.request("POST", "/proxies", raw=b"{not json")
    assert status == 400 and body["error"].startswith("bad request body")
    assert set(api.get("/proxies")[1]) == {"dup"}


@builtin_only
def test_non_loopback_addresses_are_refused(api, echo_server):
    """The built-in server proxies only loopback (an open relay otherwise); the real one would
    listen on and dial anything, so the harness always gives it loopback addresses."""
    upstream = f"{LOOPBACK}:{echo_server.port}"
    status, body = api.post("/proxies", {"name": "far", "upstream": "10.1.2.3:9092"})
    assert status == 400 and "loopback" in body["error"]
    status, body = api.post("/proxies", {"name": "open", "upstream": upstream,
                                          "listen": "0.0.0.0:0"})
    assert status == 400 and "loopback" in body["error"]
    status, body = api.post("/proxies", {"name": "default", "upstream": upstream})
    assert status == 201 and body["listen"].startswith(f"{LOOPBACK}:"), "no listen: loopback"
    assert set(api.get("/proxies")[1]) == {"default"}


def test_bind_failure_is_500(api, echo_server):
    with socket.create_server((LOOPBACK, 0)) as taken:
        listen = f"{LOOPBACK}:{taken.getsockname()[1]}"
        status, body = api.post("/proxies", {"name": "clash", "listen": listen,
                                              "upstream": f"{LOOPBACK}:{echo_server.port}"})
    assert status == 500 and body["status"] == 500 and listen in body["error"]
    assert api.get("/proxies/clash")[0] == 404


def test_create_disabled_does_not_listen(api, echo_server):
    proxy = api.create_proxy("off", echo_server.port, listen=f"{LOOPBACK}:0", enabled=False)
    assert proxy["enabled"] is False


def test_update_with_post_and_patch(api, echo_server):
    proxy = api.create_proxy("upd", echo_server.port)
    status, body = api.post("/proxies/upd", {"enabled": False})
    assert status == 200 and body["enabled"] is False and body["listen"] == proxy["listen"]
    status, body = api.patch("/proxies/upd", {"enabled": True})
    assert status == 200 and body["enabled"] is True and body["listen"] == proxy["listen"]
    with connect(body) as client:
        client.sendall(b"ping")
        assert recv_exactly(client, 4) == b"ping"
    assert api.patch("/proxies/nope", {"enabled": True})[0] == 404
    assert api.patch("/proxies/upd", {"enabled": "yes"})[0] == 400


def test_toxic_crud(api, echo_server):
    api.create_proxy("tox", echo_server.port)
    status, toxic = api.post("/proxies/tox/toxics", {"type": "latency",
                                                      "attributes": {"latency": 50}})
    assert status == 200
    assert toxic == {"attributes": {"latency": 50, "jitter": 0}, "name": "latency_downstream",
                     "type": "latency", "stream": "downstream", "toxicity": 1.0}
    up = api.add_toxic("tox", "bandwidth", stream="upstream", name="slow", toxicity=0.5,
                       attributes={"rate": 10})
    assert up["name"] == "slow" and up["stream"] == "upstream" and up["toxicity"] == 0.5

    assert api.get("/proxies/tox/toxics") == (200, [up, toxic])
    assert api.get("/proxies/tox")[1]["toxics"] == [up, toxic]
    assert api.get("/proxies/tox/toxics/slow") == (200, up)

    status, changed = api.post("/proxies/tox/toxics/latency_downstream",
                               {"attributes": {"jitter": 5}})
    assert status == 200 and changed["attributes"] == {"latency": 50, "jitter": 5}
    status, changed = api.patch("/proxies/tox/toxics/latency_downstream", {"toxicity": 0.25})
    assert status == 200 and changed["toxicity"] == 0.25 and changed["attributes"]["jitter"] == 5

    assert api.delete("/proxies/tox/toxics/slow") == (204, b"")
    assert api.get("/proxies/tox/toxics/slow") == (404, {"error": "toxic not found",
                                                         "status": 404})
    assert api.delete("/proxies/tox/toxics/slow")[0] == 404
    assert [t["name"] for t in api.get("/proxies/tox/toxics")[1]] == ["latency_downstream"]


@pytest.mark.parametrize("body,status,fragment", [
    ({"type": "latency"}, 409, "toxic already exists"),
    ({"type": "explode"}, 400, "invalid toxic type"),
    ({"type": "latency", "stream": "sideways", "name": "x"}, 400, "stream was invalid"),
])
def test_toxic_errors(api, echo_server, body, status, fragment):
    api.create_proxy("bad", echo_server.port)
    api.add_toxic("bad", "latency")
    got, answer = api.post("/proxies/bad/toxics", body)
    assert got == status and answer["status"] == status and fragment in answer["error"]


UNUSABLE_TOXICS = [
    ({"type": "latency", "name": "y", "attributes": {"latncy": 5}}, "unknown attribute"),
    ({"type": "latency", "name": "z", "attributes": {"latency": -1}}, "non-negative"),
    ({"type": "latency", "name": "w", "toxicity": 2}, "toxicity"),
    ({"type": "slicer", "name": "v"}, "average_size"),
]
"""Toxics the real server accepts although they cannot work as asked (a misspelt attribute is
ignored, a slicer of average_size 0 overflows its stack on the first byte and kills the server).
"""


@builtin_only
@pytest.mark.parametrize("body,fragment", UNUSABLE_TOXICS)
def test_unusable_toxics_are_refused(api, echo_server, body, fragment):
    """The built-in server refuses them with a 400 naming the problem (on purpose: a fault
    that silently does nothing makes a chaos test pass for the wrong reason)."""
    api.create_proxy("bad", echo_server.port)
    got, answer = api.post("/proxies/bad/toxics", body)
    assert got == 400 and answer["status"] == 400 and fragment in answer["error"]


@real_only
@pytest.mark.parametrize("body", [body for body, _ in UNUSABLE_TOXICS])
def test_the_real_server_takes_unusable_toxics(api, echo_server, body):
    """Why NetworkFaults checks a toxic itself before sending it (no byte is sent here)."""
    api.create_proxy("bad", echo_server.port)
    got, answer = api.post("/proxies/bad/toxics", body)
    assert got == 200 and answer["name"] == body["name"]


def test_toxics_of_unknown_proxy(api):
    assert api.get("/proxies/ghost/toxics")[0] == 404
    assert api.post("/proxies/ghost/toxics", {"type": "noop"})[0] == 404


def test_populate_creates_keeps_and_replaces(api, echo_server):
    upstream = f"{LOOPBACK}:{echo_server.port}"
    status, body = api.post("/populate", [{"name": "a", "upstream": upstream, "listen": LISTEN},
                                          {"name": "b", "upstream": upstream, "listen": LISTEN,
                                           "enabled": False}])
    assert status == 201
    assert [p["name"] for p in body["proxies"]] == ["a", "b"]
    first_a = body["proxies"][0]
    api.add_toxic("a", "noop")

    same = {"name": "a", "upstream": upstream, "listen": first_a["listen"]}
    status, body = api.post("/populate", [same])
    assert status == 201 and body["proxies"][0]["toxics"], "unchanged proxy is kept as it is"

    with socket.create_server((LOOPBACK, 0)) as other:
        moved = {"name": "a", "upstream": f"{LOOPBACK}:{other.getsockname()[1]}",
                 "listen": LISTEN}
        status, body = api.post("/populate", [moved])
    assert status == 201 and body["proxies"][0]["upstream"] == moved["upstream"]
    assert body["proxies"][0]["toxics"] == [], "a replaced proxy starts without toxics"

    status, body = api.post("/populate", [{"name": "c", "upstream": upstream, "listen": LISTEN},
                                          {"name": "d", "listen": LISTEN}])
    assert status == 400 and "upstream at proxy 2" in body["error"]
    assert "c" not in api.get("/proxies")[1], "nothing is applied when an entry is invalid"
    assert api.post("/populate", {"name": "e"})[0] == 400


def test_reset_enables_and_clears(api, echo_server):
    api.create_proxy("r1", echo_server.port)
    api.add_toxic("r1", "latency", attributes={"latency": 1000})
    api.post("/proxies/r1", {"enabled": False})
    assert api.post("/reset") == (204, b"")
    proxy = api.get("/proxies/r1")[1]
    assert proxy["enabled"] is True and proxy["toxics"] == []


def test_routing_and_transport_errors(api):
    assert api.get("/nowhere") == (404, b"404 page not found\n")
    assert api.get("/proxies/x/y") == (404, b"404 page not found\n")
    assert api.request("PUT", "/proxies") == (405, b"")
    assert api.get("/reset") == (405, b"")
    status, body = api.request("GET", "/version", headers={"User-Agent": "Mozilla/5.0"})
    assert status == 403, "browsers are refused, as Toxiproxy does against CSRF"


def test_keep_alive_and_malformed_request(toxiproxy_server, api):
    port = toxiproxy_server.port
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw:
        raw.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        answer = b""
        while answer.count(b"HTTP/1.1 200") < 2:
            piece = raw.recv(4096)
            assert piece, "server closed a keep-alive connection"
            answer += piece
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw:
        raw.sendall(b"NONSENSE\r\n\r\n")
        answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400")
        assert raw.recv(4096) == b"", "a malformed request closes only its connection"
    assert api.get("/version")[0] == 200


def test_chunked_request_body(toxiproxy_server, api, echo_server):
    port = toxiproxy_server.port
    payload = (b'{"name": "chunky", "upstream": "%s:%d", "listen": "%s:0"}'
               % (LOOPBACK.encode(), echo_server.port, LOOPBACK.encode()))
    request = (b"POST /proxies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: close\r\n\r\n"
               + b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload))
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw:
        raw.sendall(request)
        assert raw.recv(4096).startswith(b"HTTP/1.1 201")


def test_expect_100_continue(toxiproxy_server, api):
    """A client that waits for ``100 Continue`` is answered: the built-in server invites the
    body; the real one (Go's net/http) may answer at once, since /reset never reads a body."""
    port = toxiproxy_server.port
    with socket.create_connection((LOOPBACK, port), timeout=5) as raw:
        raw.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                    b"Expect: 100-continue\r\n\r\n")
        first = raw.recv(4096)
        if first.startswith(b"HTTP/1.1 100 Continue"):
            raw.sendall(b"{}")
            first = raw.recv(4096)
        assert first.startswith(b"HTTP/1.1 204")


def test_populate_bind_failure_is_500(api, echo_server):
    upstream = f"{LOOPBACK}:{echo_server.port}"
    with socket.create_server((LOOPBACK, 0)) as taken:
        listen = f"{LOOPBACK}:{taken.getsockname()[1]}"
        status, body = api.post("/populate", [
            {"name": "ok", "upstream": upstream, "listen": LISTEN},
            {"name": "clash", "upstream": upstream, "listen": listen}])
    assert status == 500 and body["status"] == 500 and listen in body["error"]
    assert [p["name"] for p in body["proxies"]] == ["ok"]
