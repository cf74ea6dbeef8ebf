"""Mounts the harness makes, each in the reaper's ledger until it is undone.

A mount is a kernel object like a network namespace: it outlives a SIGKILLed harness, and a
broker's log dir left mounted on a full tmpfs would break the next run in the same directory.
So every mount is registered with the reaper (undone by :func:`undo_mount`) before anything is
written to it and released only once it is gone; the watchdog lazily unmounts what was not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.lifecycle import reaper

_MOUNT_TIMEOUT_S = 30


class MountError(RuntimeError):
    """A mount or unmount failed; the message carries the command's own words."""


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            timeout=_MOUNT_TIMEOUT_S)
    if result.returncode != 0:
        raise MountError(f"{' '.join(command)} failed (exit code {result.returncode}): "
                         f"{(result.stderr or result.stdout).strip()}")


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (space, tab, newline and backslash octal)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points() -> list[Path]:
    """Every mount point of this process's mount namespace, in mount order."""
    with open("/proc/self/mountinfo") as info:
        return [Path(_unescape(line.split()[4])) for line in info]


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory`` — what a test asserts is empty after clean-up."""
    root = directory.resolve()
    return [p for p in mount_points() if p == root or root in p.parents]


def is_mounted(path: Path) -> bool:
    return path.resolve() in mount_points()


def mount_tmpfs(path: Path, size_mb: int) -> int:
    """A tmpfs of ``size_mb`` MiB on ``path``; returns the ledger entry to :func:`unmount` with."""
    path.mkdir(parents=True, exist_ok=True)
    entry = reaper.register(undo_mount, str(path.resolve()))
    try:
        _run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)])
    except BaseException:
        reaper.release(entry)
        raise
    return entry


def bind(source: Path, path: Path) -> int:
    """``source`` seen at ``path`` too; returns the ledger entry."""
    path.mkdir(parents=True, exist_ok=True)
    entry = reaper.register(undo_mount, str(path.resolve()))
    try:
        _run(["mount", "--bind", str(source), str(path)])
    except BaseException:
        reaper.release(entry)
        raise
    return entry


def unmount(path: Path, entry: int | None) -> None:
    """Unmount ``path`` (lazily if it is busy: a killed process's files may still be open) and
    release its ledger entry. Nothing to do if it is not mounted."""
    if is_mounted(path):
        try:
            _run(["umount", str(path)])
        except MountError:
            _run(["umount", "-l", str(path)])
    reaper.release(entry)


@reaper.undo_action
def undo_mount(value: str) -> None:
    """The watchdog's undo of a mount whose owner died: lazily unmounted, if still mounted."""
    path = Path(value)
    if is_mounted(path):
        _run(["umount", "-l", str(path)])
