"""A broker's log dir on a disk of the harness's own, which it can fill or make fail.

Layout, for a broker whose run dir is ``R`` and whose log dir is ``R/data``::

    R/disk/           a tmpfs of ``size_mb`` MiB: the broker's whole "disk"
    R/disk/log/       what the broker's log dir really holds
    R/disk/ballast    the file :meth:`BrokerDisk.fill` writes until the tmpfs is full
    R/data            R/disk/log seen through a bind mount (DiskLayer.LIMITED) or through the
                      fault-injecting FUSE filesystem (DiskLayer.FAULTY, harness.disk.faultfs)
    R/faultfs.rate    the FUSE process's error rate (outside the tmpfs: it must stay writable
                      when the disk is full)

The ballast sits next to the log dir, not in it, so the broker never sees a file it did not
write — only that the disk has no room left. Healing deletes the ballast; the room is back at
once. Every mount and the FUSE process are in the reaper's ledger until :meth:`BrokerDisk.
unmount` undoes them, so a SIGKILLed harness leaves no mount behind.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from harness.disk import mounts
from harness.lifecycle import reaper
from harness.waiting import wait_for

DEFAULT_SIZE_MB = 64
_FUSE_START_TIMEOUT_S = 20.0
_FUSE_STOP_TIMEOUT_S = 10.0
_RATE_APPLIED_TIMEOUT_S = 10.0
_FILL_CHUNK = 1 << 20


class DiskLayer(StrEnum):
    """What sits under the brokers' log dirs (``--disk``)."""

    NONE = "none"        # the run dir's own filesystem: no disk faults
    LIMITED = "limited"  # a size-limited tmpfs per broker: disk full / heal
    FAULTY = "faulty"    # the tmpfs seen through a FUSE filesystem: also disk errors


class DiskFault(StrEnum):
    """What a disk command or nemesis step does to one broker's disk."""

    FULL = "full"
    ERRORS = "errors"
    HEAL = "heal"


@dataclass(frozen=True)
class DiskState:
    """One broker disk's state, for ``status`` and the tests."""

    layer: DiskLayer
    size_bytes: int
    free_bytes: int
    ballast_bytes: int
    error_rate: float


def applied_path(control: Path) -> Path:
    """Where the FUSE process (:mod:`harness.disk.faultfs`) says which error rate it applies,
    next to the control file it reads the rate from."""
    return control.with_name(control.name + ".applied")


def fuse_unavailable() -> str | None:
    """Why this machine cannot mount the FUSE filesystem, or None when it can."""
    if not Path("/dev/fuse").exists():
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    try:
        importlib.import_module("fuse")  # fusepy loads libfuse.so.2 when imported
    except (ImportError, OSError) as exc:  # fusepy raises EnvironmentError without libfuse
        return f"fusepy cannot load libfuse 2 ({exc}); install libfuse2 (ci/setup.sh does)"
    return None


class BrokerDisk:
    """The disk under one broker's log dir ``log_dir``, mounted by :meth:`mount`."""

    def __init__(self, log_dir: Path, layer: DiskLayer, size_mb: int = DEFAULT_SIZE_MB) -> None:
        if layer is DiskLayer.NONE:
            raise ValueError("a BrokerDisk needs a disk layer other than none")
        if size_mb < 1:
            raise ValueError(f"size_mb must be >= 1, got {size_mb}")
        self.log_dir = log_dir.resolve()
        self.layer = layer
        self.size_mb = size_mb
        self.root = self.log_dir.parent / "disk"
        self.backing = self.root / "log"
        self.ballast = self.root / "ballast"
        self.control = self.log_dir.parent / "faultfs.rate"
        self._entries: list[tuple[Path, int]] = []  # (mount point, ledger entry), mount order
        self._fuse: subprocess.Popen[bytes] | None = None
        self._fuse_entry: int | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def mount(self) -> None:
        """The tmpfs, then the log dir on it; undoes what it did if a step fails."""
        if self._entries:
            raise RuntimeError(f"{self.log_dir} is already mounted")
        if self.layer is DiskLayer.FAULTY and (reason := fuse_unavailable()) is not None:
            raise mounts.MountError(f"disk errors need FUSE: {reason}")
        try:
            self._entries.append((self.root, mounts.mount_tmpfs(self.root, self.size_mb)))
            self.backing.mkdir()
            if self.layer is DiskLayer.LIMITED:
                self._entries.append((self.log_dir, mounts.bind(self.backing, self.log_dir)))
            else:
                self._start_fuse()
        except BaseException:
            self.unmount()
            raise

    def _start_fuse(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.control.write_text("0\n")
        applied_path(self.control).unlink(missing_ok=True)
        log = (self.log_dir.parent / "faultfs.log").open("ab")
        with log:
            self._fuse, self._fuse_entry = reaper.spawn(
                [sys.executable, "-m", "harness.disk.faultfs", str(self.backing),
                 str(self.log_dir), str(self.control)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self._entries.append((self.log_dir, reaper.register(mounts.undo_mount,
                                                            str(self.log_dir))))
        fuse = self._fuse
        wait_for(lambda: mounts.is_mounted(self.log_dir) or fuse.poll() is not None,
                 _FUSE_START_TIMEOUT_S, f"the FUSE filesystem on {self.log_dir}")
        if fuse.poll() is not None:
            raise mounts.MountError(f"the FUSE filesystem on {self.log_dir} exited with code "
                                    f"{fuse.returncode}; see {self.log_dir.parent}/faultfs.log")
        self._wait_applied(0.0)

    def unmount(self) -> None:
        """Undo every mount, newest first, and stop the FUSE process; safe to call twice."""
        try:
            for path, entry in reversed(self._entries):
                mounts.unmount(path, entry)
        finally:
            self._entries.clear()
            self._stop_fuse()

    def _stop_fuse(self) -> None:
        fuse, self._fuse = self._fuse, None
        if fuse is None:
            return
        try:
            fuse.wait(timeout=_FUSE_STOP_TIMEOUT_S)  # libfuse returns once unmounted
        except subprocess.TimeoutExpired:
            fuse.kill()
            fuse.wait()
        reaper.release(self._fuse_entry)
        self._fuse_entry = None

    @property
    def mounted(self) -> bool:
        return bool(self._entries)

    # --- faults ----------------------------------------------------------------------------

    def fill(self) -> int:
        """Write the ballast until the disk has no byte left; returns the ballast's size."""
        self._require_mounted()
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        chunk = _FILL_CHUNK
        zeros = bytes(chunk)
        try:
            while chunk >= 1:
                try:
                    os.write(fd, zeros[:chunk])
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    chunk //= 2  # the last pages: smaller and smaller writes
        finally:
            os.close(fd)
        return self.ballast.stat().st_size

    def heal(self) -> None:
        """Room again (the ballast deleted) and no injected errors."""
        self._require_mounted()
        self.ballast.unlink(missing_ok=True)
        if self.layer is DiskLayer.FAULTY:
            self.set_error_rate(0.0)

    def set_error_rate(self, rate: float) -> None:
        """Reads and writes under the log dir fail with EIO at ``rate`` (0..1) from now on."""
        self._require_mounted()
        if self.layer is not DiskLayer.FAULTY:
            raise RuntimeError(f"disk errors need the faulty disk layer; {self.log_dir} is on "
                               f"the {self.layer} layer (start with --disk faulty)")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"an error rate is between 0 and 1, got {rate}")
        scratch = self.control.with_name(self.control.name + ".tmp")
        scratch.write_text(f"{rate}\n")
        os.replace(scratch, self.control)
        self._wait_applied(rate)

    def _wait_applied(self, rate: float) -> None:
        def applied() -> bool:
            with contextlib.suppress(OSError, ValueError):
                return float(applied_path(self.control).read_text()) == rate
            return False

        wait_for(applied, _RATE_APPLIED_TIMEOUT_S,
                 f"the FUSE filesystem on {self.log_dir} to apply error rate {rate}")

    def state(self) -> DiskState:
        self._require_mounted()
        st = os.statvfs(self.root)
        try:
            ballast = self.ballast.stat().st_size
        except FileNotFoundError:
            ballast = 0
        rate = 0.0
        if self.layer is DiskLayer.FAULTY:
            with contextlib.suppress(OSError, ValueError):
                rate = float(applied_path(self.control).read_text())
        return DiskState(self.layer, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize,
                         ballast, rate)

    def _require_mounted(self) -> None:
        if not self._entries:
            raise RuntimeError(f"{self.log_dir} is not on a disk of the harness's (not mounted)")
