"""What the commands on a running cluster share: one control request to its supervisor, the
options that find the cluster, and how node and link names are shown.

Each command on a running cluster is a separate process talking to the supervisor's control
socket (:mod:`harness.supervisor.control`), the only owner of the cluster. Failures are raised
as :mod:`harness.errors` errors, which carry their exit code, so no command chooses a number.

Link names (``client->broker-1``) hold a ``>``, which a shell reads as a redirection: every
message shows them through :func:`shown`, quoted so that a user can paste them back.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from harness.errors import CommandFailed, UsageError
from harness.supervisor.control import send_request

DEFAULT_RUN_DIR = Path(".harness/current")
RunDir = Annotated[
    Path,
    typer.Option("--dir", envvar="KAFKA_HARNESS_DIR",
                 help="Run directory of the cluster (state, control socket, logs)."),
]
NodeArg = Annotated[str, typer.Argument(
    metavar="NODE", help="zk, broker-1 … broker-N, or a role resolved when the fault is "
                         "applied: controller (ZooKeeper's, or the KRaft quorum's leader), "
                         "leader:TOPIC/PARTITION, coordinator:GROUP.")]
LinkArg = Annotated[str, typer.Argument(
    metavar="LINK", help="e.g. 'client->broker-1', 'broker-1->broker-2', 'broker-2->zk' "
                         "(quoted: a shell reads > as a redirection).")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def stderr() -> Console:
    """Messages are not wrapped at 80 columns when stderr is not a terminal: a path or a link
    name stays whole for a script or a user to copy."""
    return Console(stderr=True, soft_wrap=True)


def shown(name: str) -> str:
    """A node or link name as a shell reads it back: ``'client->broker-1'``, ``broker-1``."""
    return shlex.quote(name)


def shown_pairs(pairs: Iterable[Iterable[str]]) -> str:
    """Cut node pairs as links, each quoted where a shell needs it."""
    return ", ".join(shown("->".join(pair)) for pair in pairs)


def call(run_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """One control request. NoCluster (exit 3) when nothing serves ``run_dir``; UsageError on
    an unknown node, link, shape…; CommandFailed when the supervisor could not do it."""
    response = send_request(run_dir.resolve(), request)
    if not response.get("ok"):
        error = str(response.get("error"))
        raise UsageError(error) if response.get("kind") == "usage" else CommandFailed(error)
    return response
