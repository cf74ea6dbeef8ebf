"""The supervisor's command line, both ends: how ``kafka-harness up`` starts it detached, and
how the supervisor reads what it was asked to run.

Both ends live here, as the control socket's do in :mod:`harness.supervisor.control`, so an
option cannot be written by one side and misread by the other; and neither end loads what the
supervisor runs (:mod:`harness.supervisor.owner`), so ``up`` starts it without paying for it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.cluster.options import Backend, ClusterOptions, Network, TargetName
from harness.cluster.spec import ClusterSpec
from harness.disk.broker_disk import DiskLayer
from harness.supervisor.control import socket_path
from harness.supervisor.files import LOG_NAME, state_path

PROGRAM = "harness.supervisor"
"""``python -m harness.supervisor``: the module :func:`launch_detached` runs."""


@dataclass(frozen=True)
class Launch:
    """What a supervisor runs: the cluster, and what to call it from the outside."""

    target: TargetName = TargetName.REFERENCE
    bootstrap: str | None = None
    network: Network = Network.PROXY
    backend: Backend = Backend.LOCAL
    toxiproxy_url: str | None = None


def launch_detached(run_dir: Path, spec: ClusterSpec, launch: Launch) -> subprocess.Popen[bytes]:
    """Start the supervisor as a detached process (own session, so the terminal's Ctrl-C and
    its closing do not reach it), its output in ``RUN_DIR/supervisor.log``. The caller watches
    ``state.json`` for phase ``ready`` or ``failed``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in (socket_path(run_dir), state_path(run_dir)):
        stale.unlink(missing_ok=True)
    command = [sys.executable, "-m", PROGRAM, str(run_dir),
               "--brokers", str(spec.brokers), "--controllers", str(spec.controllers),
               "--session-timeout-ms", str(spec.zookeeper_session_timeout_ms)]
    if launch.toxiproxy_url:
        command += ["--toxiproxy-url", launch.toxiproxy_url]
    command += ["--target", launch.target.value, "--network", launch.network.value,
                "--backend", launch.backend.value]
    if spec.disk is not DiskLayer.NONE:
        command += ["--disk", spec.disk.value]
    if launch.bootstrap:
        command += ["--bootstrap-server", launch.bootstrap]
    with open(run_dir / LOG_NAME, "ab") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=run_dir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROGRAM}",
        description="Own a local cluster and serve RUN_DIR/control.sock until down.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--controllers", type=int, default=0)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--toxiproxy-url", default=None)
    parser.add_argument("--target", choices=[t.value for t in TargetName], default="reference")
    # Spelt as Kafka's tools spell it; --bootstrap is what `up` of the first release passed.
    parser.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap", default=None)
    parser.add_argument("--network", choices=[n.value for n in Network], default="proxy")
    parser.add_argument("--backend", choices=[b.value for b in Backend], default="local")
    parser.add_argument("--disk", choices=[d.value for d in DiskLayer], default="none")
    return parser


def read_command_line(argv: list[str] | None) -> tuple[Path, ClusterSpec, Launch]:
    """The run directory, cluster and launch a supervisor's arguments describe; argparse exits
    2 on a malformed line, ValueError names options that do not go together."""
    args = _parser().parse_args(argv)
    spec = ClusterSpec(brokers=args.brokers, controllers=args.controllers,
                       zookeeper_session_timeout_ms=args.session_timeout_ms,
                       disk=DiskLayer(args.disk))
    launch = Launch(TargetName(args.target), args.bootstrap, Network(args.network),
                    Backend(args.backend), args.toxiproxy_url)
    ClusterOptions(launch.target, spec.brokers, launch.network, launch.backend,
                   launch.bootstrap, controllers=spec.controllers).check()
    return args.run_dir, spec, launch
