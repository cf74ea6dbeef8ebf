"""The Toxiproxy server a cluster runs its proxies on, when it starts one itself.

Which server: a real ``toxiproxy-server`` (the one ``ci/setup.sh`` builds from Toxiproxy's Go
module into ``.harness/vendor/bin``, or one on PATH), else the project's own API-compatible
server (``python -m harness.net.toxiproxy_server``). Both are driven by exactly the same
toxiproxy-python calls, so a test cannot tell them apart except by the faults' fidelity.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from harness.net.ports import LOOPBACK, free_port, is_accepting

TOXIPROXY_URL_ENV = "TOXIPROXY_URL"
TOXIPROXY_BINARY = "toxiproxy-server"
_SERVER_START_TIMEOUT_S = 15.0
_SERVER_STOP_TIMEOUT_S = 10.0


class ToxiproxyStartError(RuntimeError):
    """The Toxiproxy server did not start; the message says why and where its log is."""


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class ToxiproxyProcess:
    """A Toxiproxy server this cluster started: a real ``toxiproxy-server`` or the built-in one.

    Runs in its own session (a Ctrl-C reaches only the harness, which stops it), with its output
    in ``<run_dir>/toxiproxy.log``.
    """

    def __init__(self, run_dir: Path, binary: str | None) -> None:
        self.run_dir = run_dir
        self.binary = binary
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.run_dir / "toxiproxy.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> str:
        """Start the server and return its URL once its API accepts connections."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        try:
            if self.binary is not None:
                port = free_port(LOOPBACK)
                self._spawn([self.binary, "-host", LOOPBACK, "-port", str(port)],
                            stdout=self._log)
                self._wait_accepting(port)
            else:
                self._spawn([sys.executable, "-m", "harness.net.toxiproxy_server",
                             "--host", LOOPBACK, "--port", "0"], stdout=subprocess.PIPE)
                port = self._read_listening_port()
        except BaseException:
            self.stop()
            raise
        self.url = f"http://{LOOPBACK}:{port}"
        return self.url

    def _spawn(self, command: list[str], stdout: int | IO[bytes]) -> None:
        self._process = subprocess.Popen(
            command, cwd=self.run_dir, stdin=subprocess.DEVNULL, stdout=stdout,
            stderr=self._log, start_new_session=True)

    def _read_listening_port(self) -> int:
        """The port of the built-in server's ``listening on HOST:PORT`` line."""
        assert self._process is not None and self._process.stdout is not None
        deadline = time.monotonic() + _SERVER_START_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=0.1):
                    line = self._process.stdout.readline().decode(errors="replace").strip()
                    if line.startswith("listening on "):
                        return split_address(line.removeprefix("listening on "))[1]
                    if not line and self._process.poll() is not None:
                        break
        raise ToxiproxyStartError(f"the built-in Toxiproxy server did not start "
                             f"(exit code {self._process.poll()}); see {self.log_path}")

    def _wait_accepting(self, port: int) -> None:
        assert self._process is not None
        deadline = time.monotonic() + _SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            if is_accepting(LOOPBACK, port):
                return
            time.sleep(0.02)
        raise ToxiproxyStartError(f"{self.binary} did not listen on {LOOPBACK}:{port} "
                             f"(exit code {self._process.poll()}); see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM (it closes every proxy and connection), SIGKILL if it lingers."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGTERM)
                try:
                    self._process.wait(_SERVER_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
