"""A handle on one node of a :class:`~harness.cluster.docker.backend.DockerCluster`.

Its own module so the cluster module stays about starting and stopping containers; this one is
about what code that drives nodes one by one expects of a node, whichever backend runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.cluster.spec import ClusterSpec

if TYPE_CHECKING:
    from docker.models.containers import Container

DATA_DIR = "/var/lib/kafka-harness"  # every node's configs and data, in its container
LOG_DIR = f"{DATA_DIR}/data"  # a broker's log.dirs: a volume of the run


class Containers(Protocol):
    """What a node handle needs of the cluster that runs its container (a
    :class:`~harness.cluster.docker.backend.DockerCluster`, which makes the handles)."""

    @property
    def containers(self) -> Mapping[str, Container]: ...

    @property
    def addresses(self) -> Mapping[str, str]: ...

    @property
    def run_dir(self) -> Path: ...

    @property
    def spec(self) -> ClusterSpec: ...

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, *,
                 interval: float = ...) -> Any: ...


class DockerNode:
    """One node's container, with what a local process handle offers to code that drives
    nodes by handle (``Target.reset``, the suites' observers, the supervisor's status,
    :mod:`harness.nemesis.process`).

    ``host``/``port`` are the node's own listener on the run's network: a Linux host reaches
    it directly, and no fault touches it (partitions drop only traffic to and from the
    Toxiproxy container), so an observer never sits behind the fault it observes.
    """

    def __init__(self, cluster: Containers, name: str, port: int,
                 ready: Callable[[], Any], *, stop_timeout: float = 10.0) -> None:
        self.cluster = cluster
        self.name = name
        self.port = port
        self.ready = ready
        self.stop_timeout = stop_timeout

    @property
    def container(self) -> Container:
        return self.cluster.containers[self.name]

    @property
    def container_id(self) -> str:
        return str(self.container.short_id)

    @property
    def host(self) -> str:
        return self.cluster.addresses[self.name]

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The broker's log dir as the host sees it (the volume's mount point; root only)."""
        for mount in self.container.attrs["Mounts"]:
            if mount["Destination"] == LOG_DIR:
                return Path(mount["Source"])
        raise FileNotFoundError(f"{self.name} has no log dir volume")

    @property
    def log_path(self) -> Path:
        return self.cluster.run_dir / f"{self.name}.log"

    def status(self) -> str:
        """``running``, ``paused`` or ``down``, as the engine says now."""
        container = self.container
        container.reload()
        return container.status if container.status in ("running", "paused") else "down"

    @property
    def pid(self) -> int | None:
        """The host pid of the container's first process, None while it is down."""
        return int(self.container.attrs["State"]["Pid"]) if self.is_running() else None

    def is_running(self) -> bool:
        return self.status() != "down"

    def kill(self) -> int:
        if self.status() == "paused":
            self.container.unpause()
        self.container.kill()
        return int(self.container.wait(timeout=30)["StatusCode"])

    def stop(self) -> int:
        if self.status() == "paused":
            self.container.unpause()
        self.container.stop(timeout=int(self.stop_timeout))
        return int(self.container.wait(timeout=30)["StatusCode"])

    def start(self) -> None:
        """Start the container again (its command rewrites the config and execs the node)
        and return once the node serves."""
        self.container.start()
        self.cluster.wait_for(self.ready, self.cluster.spec.startup_timeout,
                              f"{self.name} to serve again")

    def pause(self) -> None:
        self.container.pause()

    def resume(self) -> None:
        """Unfreeze a paused container; a running one is left as it is (as SIGCONT would)."""
        if self.status() == "paused":
            self.container.unpause()
