"""Nothing the harness starts outlives it, even when it is SIGKILLed.

Every process the harness starts runs in a session of its own (so a Ctrl-C reaches only the
harness, which then stops them in order), and network namespaces, host links and containers are
kernel or engine objects: none of them dies with the process that made them. A harness process
that is SIGKILLed — a CI job cancelled after its timeout, pytest killed by the OOM killer — runs
no ``finally``, no ``atexit`` and no signal handler, so its own clean-up cannot be the answer.

So each harness process that starts something writes it into a *ledger* (one JSON line per
resource, and one per release), and on the first such write it starts a *watchdog*: a small
process in its own session that holds a pidfd of its owner and waits for it to exit, whatever
the way. Then it undoes every resource the ledger holds and nobody released: process groups are
SIGKILLed (only if the pid still names the process that was registered — its start time is
compared, so a reused pid is left alone), then everything else newest first (so a mount on top
goes before the one under it, a process before the namespace it ran in). After a clean exit the
ledger holds nothing unreleased and the watchdog only deletes the ledger.

The reaper knows processes and nothing else. Whoever makes another kind of resource — a network
namespace, a mount, a docker run — declares the function that undoes it with
:func:`undo_action` and registers each resource with that function (:func:`register`); the
ledger line names the function (``harness.net.netns:delete_namespace``), and the watchdog, a
process of its own that shares no memory with the owner, finds it again by importing the module
the line names. So this module imports none of its owners (they import it), and a new kind of
resource is one decorated function next to the code that makes it.

A process is started through :func:`spawn`, which closes the one window a SIGKILL could slip
through — after the fork, before the pid is in the ledger. It writes a *pending* entry with a
token first, passes the token to the child in its environment (``KAFKA_HARNESS_SPAWN``), and only
then forks; the watchdog kills a pending entry's processes by that token, and every registered
one's too (a grandchild that left its process group still carries it).

Registering from any thread is safe (one lock, appends of whole lines), and a forked child
starts a ledger and a watchdog of its own. ``KAFKA_HARNESS_REAPER=0`` turns the watchdog off
(the ledger still records).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.lifecycle.procfs import process_start_time, processes_with_environment

DISABLE_ENV = "KAFKA_HARNESS_REAPER"
TOKEN_ENV = "KAFKA_HARNESS_SPAWN"
READY = "ready"
PROCESS = "process"
"""The one kind of entry the reaper undoes itself: a process group (its leader's pid and start
time). Every other entry's kind names its undo action."""
_WATCHDOG_START_TIMEOUT_S = 15.0

UndoAction = Callable[[str], None]
"""Undoes one registered resource, given the value it was registered with (a path, a name)."""

_DECLARED = "__kafka_harness_undo_action__"


def action_name(action: UndoAction) -> str:
    """How a ledger line names ``action``: ``module:function``."""
    return f"{action.__module__}:{action.__qualname__}"


def undo_action(action: UndoAction) -> UndoAction:
    """Declare ``action`` as the way to undo a kind of resource its module makes, so resources
    can be registered with it. It must be a module-level function of a ``harness`` module: the
    watchdog finds it by importing that module."""
    name = action_name(action)
    if not name.startswith("harness.") or not name.partition(":")[2].isidentifier():
        raise ValueError(f"an undo action is a module-level function of a harness module, "
                         f"not {name}")
    setattr(action, _DECLARED, True)
    return action


def resolve_action(name: str) -> UndoAction:
    """The undo action a ledger line names, its module imported; KeyError for a name that is
    not a declared undo action of a harness module (a ledger names code, it carries none)."""
    module_name, _, function = name.partition(":")
    if not module_name.startswith("harness.") or not function.isidentifier():
        raise KeyError(f"{name!r} names no undo action of a harness module")
    action = getattr(importlib.import_module(module_name), function, None)
    if not callable(action) or not getattr(action, _DECLARED, False):
        raise KeyError(f"{name!r} is not declared with @undo_action")
    return action


@dataclass(frozen=True)
class Entry:
    id: int
    kind: str  # PROCESS, or the name of the undo action (see action_name)
    value: str  # a process's pid is "" while its spawn is pending
    start_time: str | None = None  # a process's start time (/proc/PID/stat field 22)
    token: str | None = None  # a spawned process's KAFKA_HARNESS_SPAWN


def ledger_dir() -> Path:
    return Path(tempfile.gettempdir()) / "kafka-harness-ledgers"


class Ledger:
    """The resources one harness process started and has not released yet, on disk."""

    def __init__(self, path: Path, owner: int) -> None:
        self.path = path
        self.owner = owner
        self._lock = threading.Lock()
        self._next = 0
        self.watchdog: int | None = None  # its pid

    def register(self, kind: str, value: str | int, token: str | None = None) -> int:
        with self._lock:
            self._next += 1
            self._write(self._next, kind, value, token)
            return self._next

    def resolve(self, entry_id: int, pid: int, token: str) -> None:
        """A pending process entry's pid, once the fork has one (the entry keeps its id)."""
        with self._lock:
            self._write(entry_id, PROCESS, pid, token)

    def _write(self, entry_id: int, kind: str, value: str | int, token: str | None) -> None:
        entry: dict[str, object] = {"id": entry_id, "kind": kind, "value": str(value)}
        start = process_start_time(int(value)) if kind == PROCESS and value != "" else None
        if start is not None:
            entry["start_time"] = start
        if token is not None:
            entry["token"] = token
        self._append(entry)

    def release(self, entry_id: int) -> None:
        with self._lock:
            self._append({"released": entry_id})

    def _append(self, record: dict[str, object]) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps(record) + "\n")


def read_unreleased(path: Path) -> list[Entry]:
    """The entries of a ledger file nobody released, in registration order."""
    entries: dict[int, Entry] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by the owner's death mid-write
            if "released" in record:
                entries.pop(record["released"], None)
            else:
                # A later line for the same id (a pending spawn's pid) replaces the first.
                entries[record["id"]] = Entry(record["id"], record["kind"],
                                              record["value"], record.get("start_time"),
                                              record.get("token"))
    return list(entries.values())


_LEDGER: Ledger | None = None
_LEDGER_LOCK = threading.Lock()


def ledger() -> Ledger:
    """This process's ledger, its watchdog started on first use (again after a fork)."""
    global _LEDGER
    with _LEDGER_LOCK:
        if _LEDGER is None or _LEDGER.owner != os.getpid():
            directory = ledger_dir()
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{os.getpid()}-{time.time_ns()}.jsonl"
            path.touch()
            made = Ledger(path, os.getpid())
            if os.environ.get(DISABLE_ENV) != "0":
                made.watchdog = _start_watchdog(path)
            # Only a watched ledger is kept: were the watchdog's start to fail, the next
            # registration tries again instead of writing to a ledger nobody watches.
            _LEDGER = made
        return _LEDGER


def register(undo: UndoAction, value: str | int) -> int:
    """Write a resource into this process's ledger, with the action that undoes it should this
    process die without releasing it; the entry's id, to :func:`release` once undone."""
    if not getattr(undo, _DECLARED, False):
        raise ValueError(f"{action_name(undo)} is not declared with @undo_action")
    return ledger().register(action_name(undo), value)


def release(entry_id: int | None) -> None:
    if entry_id is not None and _LEDGER is not None and _LEDGER.owner == os.getpid():
        _LEDGER.release(entry_id)


def spawn(args: list[str], *, env: dict[str, str] | None = None,
          **popen: Any) -> tuple[subprocess.Popen[bytes], int]:
    """Start a process and register it, with no moment at which a SIGKILL of this process
    would leave it unknown to the watchdog; the process and its ledger entry (to release once
    it is stopped). The process gets a session of its own unless told otherwise."""
    own = ledger()
    token = uuid.uuid4().hex
    entry = own.register(PROCESS, "", token)
    environment = dict(os.environ if env is None else env)
    environment[TOKEN_ENV] = token
    popen.setdefault("start_new_session", True)
    try:
        process = subprocess.Popen(args, env=environment, **popen)
    except BaseException:
        own.release(entry)
        raise
    own.resolve(entry, process.pid, token)
    return process, entry


def _start_watchdog(path: Path) -> int:
    """Start the watchdog as a grandchild (a shell backgrounds it and exits), so this process
    holds no handle to a child it never waits for; its pid once it is watching."""
    # The watchdog must not carry this process's own spawn token, if it has one: the watchdog
    # of whoever spawned this process kills by that token, and this watchdog has work to do
    # after this process is killed (e.g. a matrix session's watchdog removes its target).
    environment = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    launcher = subprocess.Popen(
        ["/bin/sh", "-c", '"$@" &', "sh", sys.executable, "-m", "harness.lifecycle.reaper",
         str(os.getpid()), str(path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=environment, start_new_session=True)  # a signal to our group must not reach it
    assert launcher.stdout is not None
    with launcher.stdout:
        launcher.wait()
        ready, _, _ = select.select([launcher.stdout], [], [], _WATCHDOG_START_TIMEOUT_S)
        said = launcher.stdout.readline().decode().split() if ready else []
    if len(said) != 2 or said[0] != READY:
        raise RuntimeError(f"the harness's watchdog did not start (said {said!r})")
    return int(said[1])


# --- the watchdog ------------------------------------------------------------------------------

def _kill_group(entry: Entry) -> None:
    if not entry.value:
        return  # a spawn still pending: only its token finds it (see undo)
    pid = int(entry.value)
    if entry.start_time is None or process_start_time(pid) != entry.start_time:
        return  # gone already, or the pid now names another process
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _kill_carrying(tokens: set[str]) -> None:
    """Kill every process whose environment carries one of these spawn tokens."""
    for pid in processes_with_environment({f"{TOKEN_ENV}={token}".encode() for token in tokens}):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def undo(entries: list[Entry]) -> list[str]:
    """Undo entries newest first (processes before the namespaces they run in); one failure
    does not stop the rest. Returns what failed, for the log."""
    failed = []
    # Every spawned process's token first, pending or not: what forked before its pid was
    # written, or left its process group, carries it still.
    _kill_carrying({e.token for e in entries if e.kind == PROCESS and e.token is not None})
    for entry in sorted(entries, key=lambda e: (e.kind != PROCESS, -e.id)):
        try:
            if entry.kind == PROCESS:
                _kill_group(entry)
            else:
                resolve_action(entry.kind)(entry.value)
        except Exception as exc:  # noqa: BLE001 - keep undoing the rest
            failed.append(f"{entry.kind} {entry.value}: {exc}")
    return failed


def _say_ready() -> None:
    """Tell the owner we are watching. An owner that gave up waiting has closed the pipe; the
    watch goes on all the same (its ledger is still the owner's to fill)."""
    try:
        print(READY, os.getpid(), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _wait_for_exit(owner: int) -> None:
    try:
        pidfd = os.pidfd_open(owner)
    except ProcessLookupError:
        return  # gone before we looked: nothing to wait for
    except OSError:  # no pidfd (a kernel before 5.3): poll the process's start time
        started = process_start_time(owner)
        _say_ready()
        while process_start_time(owner) == started and started is not None:
            time.sleep(0.2)
        return
    _say_ready()
    select.select([pidfd], [], [])
    os.close(pidfd)


def watch(owner: int, path: Path) -> int:
    """Wait for ``owner`` to exit, then undo what its ledger still holds."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the owner's end ends the watch
    _wait_for_exit(owner)
    failed = undo(read_unreleased(path))
    path.unlink(missing_ok=True)
    for line in failed:
        print(line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), Path(sys.argv[2])))
