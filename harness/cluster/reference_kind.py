"""The reference broker (this project's own) as a broker kind.

It takes every connection on one listener and is told per destination where to dial its peers
(``broker.peer.addresses``, a key of its own), so the pair-exact wiring costs it no extra ports.
It runs from this checkout's sources (``python -m reference_broker``), so its version is the
harness's.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path

from harness.cluster.kinds import (
    ZOOKEEPER_MODE,
    BrokerWiring,
    ContainerLaunch,
    Wrap,
    properties_text,
)
from harness.cluster.peers import ReferenceBroker


class ReferenceKind:
    """``reference``: ZooKeeper-mode reference brokers as child processes."""

    name = "reference"
    capabilities = ZOOKEEPER_MODE
    listener_per_peer = False
    needs_zookeeper = True
    controller_quorum = False
    log_name = ReferenceBroker.name
    clean_exit_codes = frozenset({0})  # it catches SIGTERM, shuts down, and exits 0

    def version(self) -> str:
        try:
            return package_version("kafka-harness")
        except PackageNotFoundError:
            return "source"

    def wiring_properties(self, wiring: BrokerWiring) -> dict[str, str | int]:
        properties: dict[str, str | int] = {
            "listeners": f"PLAINTEXT://{wiring.host}:{wiring.ports.client}",
            "advertised.listeners": f"PLAINTEXT://{wiring.advertised_client}",
            "zookeeper.connect": wiring.zookeeper_connect,
        }
        # Itself too: a controller sends requests to itself, and where its advertised address
        # is not reachable from inside (a container's published port) that would fail.
        peers = ",".join(f"{peer}={address}" for peer, address in sorted(wiring.dial.items()))
        if peers:
            properties["broker.peer.addresses"] = peers
        return properties

    def container_launch(self, properties: Mapping[str, str | int],
                         config_dir: str) -> ContainerLaunch:
        """The image's own ``reference-broker`` (installed from this checkout's wheel)."""
        return ContainerLaunch(
            command=("reference-broker", f"{config_dir}/server.properties"),
            files={"server.properties": properties_text(properties)})

    def image_directories(self) -> dict[str, Path]:
        """None: the image installs the reference broker from this checkout's wheel."""
        return {}

    def new_broker(self, run_dir: Path, *, port: int, properties: Mapping[str, str | int],
                   startup_timeout: float, stop_timeout: float,
                   wrap: Wrap | None = None) -> ReferenceBroker:
        cls: type[ReferenceBroker] = wrap(ReferenceBroker) if wrap else ReferenceBroker
        return cls(run_dir, port=port, properties=properties,
                   startup_timeout=startup_timeout, stop_timeout=stop_timeout)


REFERENCE = ReferenceKind()
