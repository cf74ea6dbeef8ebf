"""The real PyPI client, toxiproxy-python, drives both servers end to end."""

from __future__ import annotations

import pytest
from toxiproxy.exceptions import NotFound, ProxyExists

from harness.net.ports import LOOPBACK

from .conftest import connect, recv_exactly


def test_a_full_round(client, echo_server):
    upstream = f"{LOOPBACK}:{echo_server.port}"
    assert client.running()
    assert b"version" in client.version()

    proxy = client.create(upstream=upstream, name="broker-1")
    assert proxy.enabled is True and proxy.upstream == upstream
    with pytest.raises(ProxyExists):
        client.create(upstream=upstream, name="broker-1")
    assert set(client.proxies()) == {"broker-1"}
    assert client.get_proxy("broker-1").listen == proxy.listen

    proxy.add_toxic(type="latency", attributes={"latency": 20})
    proxy.add_toxic(type="bandwidth", stream="upstream", name="narrow",
                    attributes={"rate": 1000})
    toxics = proxy.toxics()
    assert set(toxics) == {"latency_downstream", "narrow"}
    assert toxics["narrow"].stream == "upstream" and toxics["narrow"].attributes == {"rate": 1000}
    assert proxy.get_toxic("latency_downstream").attributes["latency"] == 20
    with connect({"listen": proxy.listen}) as sock:
        sock.sendall(b"through")
        assert recv_exactly(sock, 7) == b"through"
    assert proxy.destroy_toxic("narrow") is True
    assert set(proxy.toxics()) == {"latency_downstream"}

    proxy.disable()
    assert client.get_proxy("broker-1").enabled is False
    proxy.enable()
    assert client.get_proxy("broker-1").enabled is True
    with proxy.down():
        assert client.get_proxy("broker-1").enabled is False
    assert client.get_proxy("broker-1").enabled is True

    proxy.disable()
    assert client.reset() is True
    reset = client.get_proxy("broker-1")
    assert reset.enabled is True and proxy.toxics() == {}

    populated = client.populate([{"name": "broker-2", "upstream": upstream,
                                  "listen": f"{LOOPBACK}:0"}])
    assert [p.name for p in populated] == ["broker-2"]
    client.destroy_all()
    assert client.proxies() == {}
    with pytest.raises(NotFound):
        proxy.destroy()
