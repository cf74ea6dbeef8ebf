"""The lifecycle every process the harness launches shares: run dir, log, start, wait, stop.

Brokers and ZooKeeper differ only in their command line, the files they need first, and how
to tell that they serve; the rest — a free loopback port, its own session so a Ctrl-C reaches
only the harness, stdout and stderr into ``<run_dir>/<name>.log``, SIGTERM then SIGKILL, and an
error that carries the log's tail — lives here once.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from harness.cluster.errors import PeerStartError
from harness.lifecycle import reaper
from harness.net.ports import LOOPBACK, free_port

_LOG_TAIL_CHARS = 2000


class ManagedProcess:
    """A child process on a free loopback port, in a run directory.

    Subclasses say which command to run (``_command``), may write files first (``_prepare``),
    and say when it serves (``_wait_until_serving``). Without a ``run_dir`` a temporary one is
    created and removed on ``stop``; a given ``run_dir`` is kept, so its log survives for
    inspection and a stopped process can be started again on the same port with the same files.
    """

    name = "process"

    def __init__(
        self,
        run_dir: Path | str | None = None,
        *,
        port: int | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self._given_run_dir = Path(run_dir) if run_dir is not None else None
        self._run_dir: Path | None = None
        self.port = port
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.returncode: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._ledger_entry: int | None = None

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise RuntimeError(f"{self.name} has not been started")
        return self._run_dir

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Write whatever the command needs into ``run_dir`` before it starts."""

    def _wait_until_serving(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        if self._process is not None and self._given_run_dir is not None:
            self._release()  # it exited by itself (a crash, a halt): reap it, close its log
        if self._given_run_dir is not None:
            self._given_run_dir.mkdir(parents=True, exist_ok=True)
            self._run_dir = self._given_run_dir
        elif self._run_dir is None:
            self._run_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        if self.port is None:
            self.port = free_port(self.host)
        self.returncode = None
        try:
            command = self._command()
            self._prepare()
            self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            # Killed by the harness's watchdog should the harness die without stopping it.
            self._process, self._ledger_entry = reaper.spawn(
                command, cwd=self.run_dir, stdin=subprocess.DEVNULL, stdout=self._log_file,
                stderr=subprocess.STDOUT)
            self._wait_until_serving()
        except BaseException as exc:
            exit_code = self._process.poll() if self._process is not None else None
            tail = self._log_tail()
            self.stop()
            if isinstance(exc, PeerStartError | OSError):
                exited = f" (exit code {exit_code})" if exit_code is not None else ""
                raise PeerStartError(f"{self.name} did not start{exited}: {exc}\n{tail}") from exc
            raise
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; returns the exit code (``-9`` if killed).

        A paused process is continued after the SIGTERM so it can act on it. Safe to call twice
        and on a process that never started.
        """
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            self._process.send_signal(signal.SIGCONT)
            try:
                self._process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        return self._release()

    def kill(self) -> int | None:
        """SIGKILL at once — a crash, not a shutdown: no clean-up runs in the process, and a
        given run directory keeps whatever it had written. Returns the exit code (``-9``)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        return self._release()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and memory but runs no code — to its peers a
        hung process, unlike a dead one whose connections are reset."""
        self._signal_running(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal_running(signal.SIGCONT)

    def _signal_running(self, signum: signal.Signals) -> None:
        if not self.is_running():
            raise RuntimeError(f"{self.name} is not running")
        assert self._process is not None
        self._process.send_signal(signum)

    def _release(self) -> int | None:
        """Reap the exited process, close its log, and remove a temporary run directory."""
        if self._process is not None:
            self._process.wait()
            self.returncode = self._process.returncode
            self._process = None
            reaper.release(self._ledger_entry)
            self._ledger_entry = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._given_run_dir is None and self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
        return self.returncode

    def _log_tail(self) -> str:
        if self._run_dir is None or not self.log_path.exists():
            return "(no log)"
        if self._log_file is not None:
            self._log_file.flush()
        text = self.log_path.read_text(errors="replace")
        return f"--- last lines of {self.log_path} ---\n{text[-_LOG_TAIL_CHARS:]}"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
