"""Containers of dead runs: found by their owner label and removed by the next docker command.

A docker run's containers, network and volumes outlive the process that made them. The
harness's watchdog (:mod:`harness.reaper`) removes them when their owner dies, but a watchdog
can die too (killed with its owner's whole cgroup, an OOM kill) and the engine may not answer
at that moment. So every object of a run also carries its owner — ``kafka-harness.owner=
<pid>:<start time>`` — and whoever next talks to the engine (a new docker cluster starting,
``kafka-harness down``) removes the runs whose owner no longer runs. The start time makes a
reused pid harmless: it names another process, so the run counts as dead, never the reverse.
Runs labelled by a harness that wrote no owner are left alone here (``down --all`` removes
them).
"""

from __future__ import annotations

import os

import docker

from harness.procfs import process_start_time

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
    from harness.cluster.docker_backend import remove_run

    removed: list[str] = []
    for run_id in sorted(dead_runs(client)):
        removed += remove_run(client, run_id)
    return removed
