"""One node of a cluster as the code that faults it sees it: a process here, or a container.

Apart from :mod:`harness.cluster.nodes` (a whole cluster's nodes, which knows its broker kind)
because the broker kinds build these nodes: :mod:`harness.cluster.kinds` needs this shape, and
the cluster-wide surface needs the kinds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class ProcessNode(Protocol):
    """One node: a process on this machine or a container."""

    @property
    def pid(self) -> int | None: ...

    def is_running(self) -> bool: ...

    def start(self) -> object: ...

    def stop(self) -> int | None: ...

    def kill(self) -> int | None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class BrokerNode(ProcessNode, Protocol):
    @property
    def data_dir(self) -> Path: ...

    @property
    def host(self) -> str:
        """The broker's own listener (not a proxy in front of it)."""
        ...

    @property
    def port(self) -> int | None:
        """The own listener's port; None only before a local broker's first start."""
        ...
