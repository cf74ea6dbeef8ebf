"""A passthrough FUSE filesystem whose reads and writes fail with EIO at a settable rate.

Run as its own process (``python -m harness.disk.faultfs BACKING MOUNTPOINT CONTROL``): every
path under MOUNTPOINT is the same path under BACKING, so a broker whose log dir is MOUNTPOINT
behaves as on BACKING until a rate is set. The rate lives in the CONTROL file (one float, 0 to
1); a thread re-reads it when its modification time changes and writes ``CONTROL.applied`` with
the rate now in force, so the harness knows when a change took effect without signalling a
process whose main thread is inside libfuse.

Errors are injected where a disk's would surface — ``read``, ``write``, ``fsync`` and
``truncate`` — and nowhere in metadata, so the broker sees failed I/O on files it has open,
which is what Kafka turns into a log dir failure. The choice of which call fails is seeded, so
a rate of 1 fails every one and a rate of 0 none.
"""

from __future__ import annotations

import errno
import os
import random
import sys
import threading
from pathlib import Path
from typing import Any

from fuse import FUSE, FuseOSError, Operations  # type: ignore[import-untyped]

from harness.disk.broker_disk import applied_path

CONTROL_POLL_S = 0.05
_STAT_KEYS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size",
              "st_uid", "st_blocks")
_STATVFS_KEYS = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                 "f_flag", "f_frsize", "f_namemax")


class FaultFS(Operations):
    """Every operation on ``backing``, with data I/O failing at ``rate``."""

    def __init__(self, backing: Path, seed: int = 0) -> None:
        self.backing = str(backing)
        self.rate = 0.0
        self.injected = 0
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()

    def _real(self, path: str) -> str:
        return self.backing + path

    def _maybe_fail(self) -> None:
        if self.rate <= 0.0:
            return
        with self._rng_lock:
            fail = self._rng.random() < self.rate
        if fail:
            self.injected += 1
            raise FuseOSError(errno.EIO)

    # --- metadata: passed through ---------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        return {key: getattr(st, key) for key in _STAT_KEYS}

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in _STATVFS_KEYS}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path: str, amode: int) -> None:
        if not os.access(self._real(path), amode):
            raise FuseOSError(errno.EACCES)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._real(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        os.chown(self._real(path), uid, gid)

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._real(path), mode)

    def rmdir(self, path: str) -> None:
        os.rmdir(self._real(path))

    def unlink(self, path: str) -> None:
        os.unlink(self._real(path))

    def rename(self, old: str, new: str) -> None:
        os.rename(self._real(old), self._real(new))

    def link(self, target: str, source: str) -> None:
        os.link(self._real(source), self._real(target))

    def symlink(self, target: str, source: str) -> None:
        os.symlink(source, self._real(target))

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def utimens(self, path: str, times: tuple[float, float] | None = None) -> None:
        os.utime(self._real(path), times)

    # --- files ----------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        return os.open(self._real(path), flags)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        """fusepy does not pass the caller's flags here, and one handle serves every later
        read and write of the file: so it is opened for both (a write-only handle made the
        broker's reads of a segment it had just created fail with EBADF)."""
        return os.open(self._real(path), os.O_RDWR | os.O_CREAT, mode)

    def release(self, path: str, fh: int) -> None:
        os.close(fh)

    def flush(self, path: str, fh: int) -> None:
        """close(2) of a passthrough file has nothing buffered to write back."""

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._maybe_fail()
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._maybe_fail()
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        self._maybe_fail()
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)

    def fsync(self, path: str, datasync: int, fh: int) -> None:
        self._maybe_fail()
        (os.fdatasync if datasync else os.fsync)(fh)


def _follow_control(fs: FaultFS, control: Path) -> None:
    """Keep ``fs.rate`` equal to the control file's number; acknowledge each change."""
    seen: float | None = None
    stop = threading.Event()
    while not stop.wait(CONTROL_POLL_S):
        try:
            mtime = control.stat().st_mtime_ns
            if mtime == seen:
                continue
            seen = mtime
            fs.rate = min(1.0, max(0.0, float(control.read_text().strip() or 0)))
        except (OSError, ValueError):
            continue
        applied = applied_path(control)
        scratch = applied.with_name(applied.name + ".tmp")
        scratch.write_text(f"{fs.rate}\n")
        os.replace(scratch, applied)


def main(argv: list[str]) -> int:
    backing, mountpoint, control = (Path(a) for a in argv)
    fs = FaultFS(backing)
    threading.Thread(target=_follow_control, args=(fs, control), daemon=True,
                     name="faultfs-control").start()
    # Threads on: a broker's concurrent reads must not queue behind one slow write.
    FUSE(fs, str(mountpoint), foreground=True, nothreads=False, allow_other=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
