"""Which addresses the built-in Toxiproxy server proxies: loopback, plus private networks it was
told to allow (the docker backend runs it in a container on its own network)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.net import proxy
from harness.net.api_error import ApiError


@pytest.fixture
def allowed_networks(monkeypatch: pytest.MonkeyPatch) -> list:
    networks: list = []
    monkeypatch.setattr(proxy, "_ALLOWED_NETWORKS", networks)
    return networks


def test_only_loopback_without_allowed_networks(allowed_networks):
    assert proxy.parse_address("127.0.0.1:9092", "upstream") == ("127.0.0.1", 9092)
    with pytest.raises(ApiError, match="only proxies 127.0.0.0/8, ::1, localhost$"):
        proxy.parse_address("172.18.0.3:9092", "upstream")


def test_an_allowed_private_network_is_proxied_and_named_in_errors(allowed_networks):
    proxy.allow_network("172.18.0.0/16")
    assert proxy.parse_address("172.18.0.3:9092", "upstream") == ("172.18.0.3", 9092)
    with pytest.raises(ApiError, match="172.18.0.0/16"):
        proxy.parse_address("172.19.0.3:9092", "upstream")


@pytest.mark.parametrize("cidr", ["8.8.8.0/24", "0.0.0.0/0"])
def test_a_public_or_catch_all_network_is_refused(allowed_networks, cidr):
    with pytest.raises(ValueError, match="is not a private network"):
        proxy.allow_network(cidr)
    assert allowed_networks == []


def test_the_server_refuses_a_public_network_on_its_command_line():
    done = subprocess.run([sys.executable, "-m", "harness.net.toxiproxy_server",
                           "--allow-network", "8.8.8.0/24", "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "'8.8.8.0/24' is not a private network" in done.stderr
