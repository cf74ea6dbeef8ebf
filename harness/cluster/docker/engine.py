"""The docker engine: a client of the one that answers, or one this harness starts.

If no engine answers, :func:`ensure_engine` installs Debian's ``docker.io`` and starts
``dockerd`` with its log in :data:`DOCKERD_LOG` (``$KAFKA_HARNESS_DOCKERD_LOG`` overrides) and
the first storage driver that runs a container here (overlay2, else vfs). The daemon is left
running for later runs; stop it by the pid in ``/var/run/docker.pid``.

The docker SDK (and the requests stack under it) is imported where a client is made, not when
this module is: ``kafka-harness down`` and the reaper's watchdog ask for an engine through here,
and a command that never talks to one should not pay for the SDK.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

DOCKERD_LOG = Path(os.environ.get("KAFKA_HARNESS_DOCKERD_LOG",
                                  "/var/log/kafka-harness-dockerd.log"))
STORAGE_DRIVERS = ("overlay2", "vfs")
_ENGINE_START_TIMEOUT_S = 60.0


class EngineUnavailable(RuntimeError):
    """No docker engine answers and none could be started; the message says why."""


def _log(message: str) -> None:
    print(f"[docker-engine] {message}", file=sys.stderr, flush=True)


def engine_client(timeout: float = 120.0) -> docker.DockerClient | None:
    """A client whose engine answers a ping, or None."""
    if not _unix_socket_accepts():
        return None
    import docker  # the SDK, only once there is an engine to talk to (see the module doc)

    try:
        client = docker.from_env(timeout=timeout)
    except docker.errors.DockerException:
        return None
    try:
        client.ping()
    except docker.errors.DockerException:
        client.close()
        return None
    return client


def _unix_socket_accepts() -> bool:
    """Whether the engine's unix socket (``$DOCKER_HOST`` or the default) takes a connection;
    True for other transports. Asked here because docker-py leaks the socket of a refused
    connect, which ``filterwarnings = error`` turns into a failure of whoever asked."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return True
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5.0)
        try:
            probe.connect(host.removeprefix("unix://"))
        except OSError:
            return False
    return True


def ensure_engine(log_path: Path = DOCKERD_LOG) -> docker.DockerClient:
    """The running engine, or one this call installs (``docker.io``) and starts.

    Raises :class:`EngineUnavailable` naming the reason (not root, apt failed, dockerd exited —
    with the tail of its log) when none can be had, so a test can skip with that reason.
    """
    client = engine_client()
    if client is not None:
        return client
    if os.environ.get("DOCKER_HOST"):
        raise EngineUnavailable(f"DOCKER_HOST={os.environ['DOCKER_HOST']} does not answer")
    if os.geteuid() != 0:
        raise EngineUnavailable("no docker engine answers and starting dockerd needs root")
    if shutil.which("dockerd") is None:
        _log("installing Debian's docker.io (apt-get)")
        result = subprocess.run(["apt-get", "install", "-y", "docker.io"], capture_output=True,
                                text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if result.returncode != 0 or shutil.which("dockerd") is None:
            raise EngineUnavailable(f"apt-get install docker.io failed: {result.stderr[-500:]}")
    errors = []
    for driver in STORAGE_DRIVERS:
        client = _start_dockerd(driver, log_path)
        if client is not None and _runs_a_container(client):
            _log(f"dockerd is running (storage driver {driver}); its log is {log_path}")
            return client
        errors.append(f"{driver}: {_tail(log_path)}")
        _stop_dockerd()
    raise EngineUnavailable("dockerd did not start with any storage driver; "
                            + " | ".join(errors) + f" (log: {log_path})")


def _start_dockerd(driver: str, log_path: Path) -> docker.DockerClient | None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(["dockerd", f"--storage-driver={driver}"],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)  # outlives this process on purpose
    deadline = time.monotonic() + _ENGINE_START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        client = engine_client()
        if client is not None:
            return client
        time.sleep(0.5)
    return None


def _runs_a_container(client: docker.DockerClient) -> bool:
    """Whether the storage driver works here: overlay2 starts but cannot mount on some VMs.
    Before any image exists there is nothing to run, so only a later build would tell."""
    import docker.errors

    if not client.images.list():
        return True
    image = client.images.list()[0]
    try:
        client.containers.run(image.id, ["true"], remove=True, entrypoint=[])
    except docker.errors.DockerException as exc:
        _log(f"a container did not run: {exc}")
        return False
    return True


def _stop_dockerd() -> None:
    pid_file = Path("/var/run/docker.pid")
    if pid_file.exists():
        pid = int(pid_file.read_text().strip() or 0)
        if pid > 0:
            subprocess.run(["kill", str(pid)], check=False)
            time.sleep(3)


def _tail(path: Path, chars: int = 400) -> str:
    try:
        return path.read_text(errors="replace")[-chars:].strip()
    except OSError:
        return "(no log)"


