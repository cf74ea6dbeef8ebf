"""Containers of dead runs: found by their owner label and removed by the next docker command.

A docker run's containers, network and volumes outlive the process that made them. The harness's
watchdog (:mod:`harness.lifecycle.reaper`) removes them when their owner dies (the run is
registered with :func:`remove_run_of`), but a watchdog can die too (killed with its owner's
whole cgroup, an OOM kill) and the engine may not answer at that moment. So every object of a
run also carries its owner — ``kafka-harness.owner=<pid>:<start time>`` — and whoever next talks
to the engine (a new docker cluster starting, ``kafka-harness down``) removes the runs whose
owner no longer runs. The start time makes a reused pid harmless: it names another process, so
the run counts as dead, never the reverse. Runs labelled by a harness that wrote no owner are
left alone here (``down --all`` removes them).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from harness.cluster.docker.engine import engine_client
from harness.lifecycle import reaper
from harness.lifecycle.procfs import process_start_time

if TYPE_CHECKING:
    import docker

RUN_LABEL = "kafka-harness.run"
OWNER_LABEL = "kafka-harness.owner"


def owner_label() -> str:
    """This process, as an owner label's value: ``<pid>:<start time>``."""
    pid = os.getpid()
    return f"{pid}:{process_start_time(pid)}"


def owner_alive(value: str) -> bool:
    """Whether the process an owner label names still runs (same pid, same start time)."""
    pid, _, start_time = value.partition(":")
    if not pid.isdigit():
        return True  # not a label this module wrote: not ours to judge
    return process_start_time(int(pid)) == start_time


def dead_runs(client: docker.DockerClient) -> set[str]:
    """Run ids whose objects name an owner that no longer runs."""
    owners: dict[str, str] = {}
    selector = {"label": [RUN_LABEL, OWNER_LABEL]}
    for objects in (client.containers.list(all=True, filters=selector),
                    client.networks.list(filters=selector),
                    client.volumes.list(filters=selector)):
        for obj in objects:
            labels = obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels") or {}
            if RUN_LABEL in labels and OWNER_LABEL in labels:
                owners[labels[RUN_LABEL]] = labels[OWNER_LABEL]
    return {run for run, owner in owners.items() if not owner_alive(owner)}


def reap_dead_runs(client: docker.DockerClient) -> list[str]:
    """Remove every object of every dead run; returns what was removed, as ``kind:name``."""
    removed: list[str] = []
    for run_id in sorted(dead_runs(client)):
        removed += remove_run(client, run_id)
    return removed


def remove_run(client: docker.DockerClient, run_id: str | None = None) -> list[str]:
    """Remove every container, network and volume labelled with ``run_id`` (any run's if None);
    returns what was removed, as ``kind:name``."""
    import docker.errors  # the SDK, only with an engine at hand (harness.cluster.docker.engine)

    selector = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    removed = []
    for container in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True, v=True)
            removed.append(f"container:{container.name}")
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()
            removed.append(f"network:{network.name}")
    for volume in client.volumes.list(filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            volume.remove(force=True)
            removed.append(f"volume:{volume.name}")
    return removed


@reaper.undo_action
def remove_run_of(run_id: str) -> None:
    """The watchdog's undo of a docker run its owner registered: every container, network and
    volume with the run's label, if an engine answers within 10 s (else the next docker command
    removes them as a dead owner's)."""
    client = engine_client(timeout=10)
    if client is not None:
        with contextlib.closing(client):
            remove_run(client, run_id)
