"""The Toxiproxy server a cluster runs its proxies on, when it starts one itself.

Which server (:func:`find_toxiproxy_server`, the one place that decides): ``$TOXIPROXY_SERVER``
if set, else the real ``toxiproxy-server`` that ``ci/setup.sh`` builds from Toxiproxy's Go module
into ``.harness/vendor/bin`` (see :mod:`harness.vendor`), else one on PATH, else the project's own
API-compatible server (``python -m harness.net.toxiproxy_server``). The real one is preferred
because it is what users' own Toxiproxy tests run on, so a fault's fidelity is the real
server's, not our imitation's. Both are driven by exactly the same toxiproxy-python calls.
A server someone else runs (``$TOXIPROXY_URL``) is neither started nor stopped here; it is
reported as :attr:`ToxiproxyServerKind.EXTERNAL`.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO

from harness import vendor
from harness.lifecycle import reaper
from harness.net.ports import LOOPBACK, free_port, is_accepting

TOXIPROXY_URL_ENV = "TOXIPROXY_URL"
TOXIPROXY_SERVER_ENV = "TOXIPROXY_SERVER"
TOXIPROXY_BINARY = "toxiproxy-server"
_SERVER_START_TIMEOUT_S = 15.0
_SERVER_STOP_TIMEOUT_S = 10.0
_VERSION_TIMEOUT_S = 5.0


class ToxiproxyStartError(RuntimeError):
    """The Toxiproxy server did not start; the message says why and where its log is."""


class ToxiproxyServerKind(StrEnum):
    """Which Toxiproxy server carries a cluster's proxies."""

    REAL = "real"
    """Shopify's ``toxiproxy-server``, started by the harness."""
    BUILTIN = "built-in"
    """``python -m harness.net.toxiproxy_server``, started by the harness (the fallback)."""
    EXTERNAL = "external"
    """A server at ``$TOXIPROXY_URL`` (or a given URL) that someone else runs."""


@dataclass(frozen=True)
class ToxiproxyServerInfo:
    """What a cluster's Toxiproxy server is, for status output, logs and benchmark results."""

    kind: ToxiproxyServerKind
    url: str
    version: str | None = None
    """What ``GET /version`` answered; None if it could not be asked."""
    binary: Path | None = None
    """The executable, for a real server the harness started."""

    def describe(self) -> str:
        """``real v2.12.0``, ``built-in`` or ``external v2.12.0 at http://…``."""
        if self.kind is ToxiproxyServerKind.BUILTIN:
            return "built-in"
        version = self.version or "(version unknown)"
        if version[:1].isdigit():
            version = f"v{version}"
        if self.kind is ToxiproxyServerKind.REAL:
            return f"real {version}"
        return f"external {version} at {self.url}"

    def to_json(self) -> dict[str, str | None]:
        return {"kind": str(self.kind), "version": self.version, "url": self.url,
                "binary": str(self.binary) if self.binary is not None else None}


def vendored_toxiproxy_paths() -> list[Path]:
    """Where ``ci/fetch_vendor.sh`` puts the real server: ``$KAFKA_HARNESS_VENDOR/bin`` if set,
    and ``<project root>/.harness/vendor/bin`` (the checkout's, else the working directory's)."""
    candidates = [vendor.vendor_dir() / "bin" / TOXIPROXY_BINARY,
                  vendor.project_root() / ".harness" / "vendor" / "bin" / TOXIPROXY_BINARY]
    return list(dict.fromkeys(candidates))


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_toxiproxy_server() -> Path | None:
    """The real ``toxiproxy-server`` to start, or None for the built-in server.

    In order: ``$TOXIPROXY_SERVER`` (a path; set but not an executable file is an error, since
    silently falling back would run every fault on another server than the one asked for), the
    vendored build (:func:`vendored_toxiproxy_paths`), then ``toxiproxy-server`` on PATH.
    """
    given = os.environ.get(TOXIPROXY_SERVER_ENV)
    if given:
        path = Path(given).expanduser()
        if not _is_executable(path):
            raise ToxiproxyStartError(
                f"${TOXIPROXY_SERVER_ENV} is {given!r}, which is not an executable file; "
                f"point it at a toxiproxy-server binary or unset it")
        return path.resolve()
    for path in vendored_toxiproxy_paths():
        if _is_executable(path):
            return path
    on_path = shutil.which(TOXIPROXY_BINARY)
    return Path(on_path) if on_path is not None else None


def missing_real_server_message() -> str:
    """Why no real server was found and how to get one (for tests that insist on it)."""
    where = ", ".join(str(path) for path in vendored_toxiproxy_paths())
    return (f"the real Toxiproxy server is missing: none at ${TOXIPROXY_SERVER_ENV}, {where} "
            f"or on PATH; {vendor.FETCH_HINT}")


def fetch_version(url: str) -> str | None:
    """What ``GET /version`` answers (``{"version": …}`` since Toxiproxy 2.6, plain text
    before), or None if the server cannot be asked."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        with opener.open(f"{url.rstrip('/')}/version", timeout=_VERSION_TIMEOUT_S) as response:
            body = response.read().decode(errors="replace").strip()
    except (OSError, urllib.error.URLError):
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return body or None
    if isinstance(answer, dict) and isinstance(answer.get("version"), str):
        return str(answer["version"])
    return body or None


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


class ToxiproxyProcess:
    """A Toxiproxy server this cluster started: a real ``toxiproxy-server`` (``binary``) or,
    with ``binary=None``, the built-in one.

    Runs in its own session (a Ctrl-C reaches only the harness, which stops it), with its output
    in ``<run_dir>/toxiproxy.log``. Once started, :attr:`info` says which server it is and the
    version it answers on ``GET /version``.
    """

    def __init__(self, run_dir: Path, binary: str | Path | None) -> None:
        self.run_dir = run_dir
        self.binary = Path(binary) if binary is not None else None
        self.url = ""
        self.version: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._ledger_entry: int | None = None

    @property
    def log_path(self) -> Path:
        return self.run_dir / "toxiproxy.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def kind(self) -> ToxiproxyServerKind:
        return ToxiproxyServerKind.BUILTIN if self.binary is None else ToxiproxyServerKind.REAL

    @property
    def info(self) -> ToxiproxyServerInfo:
        return ToxiproxyServerInfo(self.kind, self.url, self.version, self.binary)

    def start(self) -> str:
        """Start the server and return its URL once its API accepts connections."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        try:
            if self.binary is not None:
                port = free_port(LOOPBACK)
                self._spawn([str(self.binary), "-host", LOOPBACK, "-port", str(port)],
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
        self.version = fetch_version(self.url)
        return self.url

    def _spawn(self, command: list[str], stdout: int | IO[bytes]) -> None:
        self._process, self._ledger_entry = reaper.spawn(
            command, cwd=self.run_dir, stdin=subprocess.DEVNULL, stdout=stdout,
            stderr=self._log)

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
            reaper.release(self._ledger_entry)
            self._ledger_entry = None
        if self._log is not None:
            self._log.close()
            self._log = None
