"""Run the built-in Toxiproxy server inside the docker backend's Toxiproxy container.

Why this exists: ``harness.net.toxiproxy_server`` refuses any address but loopback, on
purpose — on a developer's machine a proxy any host can reach, forwarding to any host, is an
open relay. Inside the container the nodes are the other containers of one user-defined
network, so the server must listen on, and forward to, that network's addresses. This entry
point widens "loopback" to loopback plus exactly the one network given with
``--allow-network`` (the run's own docker network), and nothing else; the API itself is the
unchanged server. Until the server grows such an option of its own, this is the one place
that does it.

    python /opt/kafka-harness/container_toxiproxy.py --allow-network 172.18.0.0/16 \
        --host 172.18.0.2 --port 8474
"""

from __future__ import annotations

import argparse
import ipaddress
import sys

import harness.net.proxy
import harness.net.toxiproxy_server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-network", required=True, type=ipaddress.ip_network,
                        help="the run's docker network (CIDR) proxies may listen on and reach")
    args, rest = parser.parse_known_args()
    allowed = args.allow_network
    original = harness.net.proxy.is_loopback_host

    def is_loopback_or_run_network(host: str) -> bool:
        if original(host):
            return True
        try:
            return ipaddress.ip_address(host) in allowed
        except ValueError:
            return False

    harness.net.proxy.is_loopback_host = is_loopback_or_run_network
    harness.net.toxiproxy_server.is_loopback_host = is_loopback_or_run_network
    return harness.net.toxiproxy_server.main(rest)


if __name__ == "__main__":
    sys.exit(main())
