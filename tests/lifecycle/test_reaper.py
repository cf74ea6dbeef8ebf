"""Nothing the harness starts outlives it: a SIGKILLed harness process (pytest, the supervisor of
`kafka-harness up`, `kafka-harness run`) leaves no broker, ZooKeeper, proxy server, client or
network namespace behind — its watchdog undoes what its ledger holds within seconds."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.lifecycle import reaper
from harness.net.netns_support import unavailable
from harness.waiting import wait_for

from ..processes import watchdog_of

GONE_WITHIN_S = 20.0


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait a moment to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} [{state}] {argv[:100]}"


def _wait_gone(pids: set[int], what: str, owner: int | None = None,
               watchdog: int | None = None) -> None:
    """Wait for `pids` to be gone. If they are not, kill them (a failed test leaves nothing) and
    say what is left, what the owner's ledger still holds (the watchdog deletes it once it has
    undone it) and whether the watchdog still runs — enough to tell a watchdog that never acted
    from one that acted on the wrong entries."""
    try:
        wait_for(lambda: not [p for p in pids if _running(p)], GONE_WITHIN_S, f"{what} to be gone")
    except TimeoutError as exc:
        left = [p for p in pids if _running(p)]
        described = [_describe(p) for p in left]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ledgers = sorted(reaper.ledger_dir().glob(f"{owner}-*.jsonl")) if owner else []
        held = {str(path): [(e.value, e.start_time) for e in reaper.read_unreleased(path)]
                for path in ledgers}
        for path in ledgers:  # what started after the snapshot of `pids` goes too
            reaper.undo(reaper.read_unreleased(path))
            path.unlink()
        alive = "none seen" if watchdog is None else \
            f"{watchdog} {'still running' if _running(watchdog) else 'exited'}"
        raise AssertionError(f"{exc}; still running: {described}; the owner's ledger: "
                             f"{held or 'deleted'}; its watchdog: {alive}") from None


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


OWNER = textwrap.dedent('''
    import json, subprocess, sys, time
    from harness.lifecycle import reaper
    kept, _ = reaper.spawn(["sleep", "600"])
    done, entry = reaper.spawn(["sleep", "600"])
    reaper.release(entry)
    print(json.dumps({"kept": kept.pid, "released": done.pid,
                      "ledger": str(reaper.ledger().path),
                      "watchdog": reaper.ledger().watchdog}), flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    time.sleep(600)
''')


def _owner(mode: str) -> tuple[subprocess.Popen[str], dict]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, mode], stdout=subprocess.PIPE,
                             text=True)
    assert owner.stdout is not None
    with owner.stdout:
        return owner, json.loads(owner.stdout.readline())


def test_a_process_forked_before_its_pid_was_written_is_killed_by_its_token(tmp_path: Path):
    """The window between fork and registration: the ledger holds only a pending entry (its
    token, no pid) when the owner dies. The watchdog finds the process by the token in its
    environment; a process with another token, or none, is left alone."""
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps({"id": 1, "kind": "process", "value": "", "token": "a" * 32})
                      + "\n")
    carrying = subprocess.Popen(["sleep", "600"], start_new_session=True,
                                env={**os.environ, reaper.TOKEN_ENV: "a" * 32})
    other = subprocess.Popen(["sleep", "600"], start_new_session=True,
                             env={**os.environ, reaper.TOKEN_ENV: "b" * 32})
    bystander = _sleeper()
    try:
        (pending,) = reaper.read_unreleased(ledger)
        assert (pending.value, pending.token) == ("", "a" * 32)
        assert reaper.undo([pending]) == []
        wait_for(lambda: carrying.poll() is not None, GONE_WITHIN_S,
                 "the process carrying the pending token to be killed")
        assert other.poll() is None and bystander.poll() is None
    finally:
        for process in (carrying, other, bystander):
            process.kill()
            process.wait()


def test_spawn_writes_a_pending_entry_then_its_pid_under_the_same_id():
    process, entry = reaper.spawn(["sleep", "600"])
    try:
        lines = [json.loads(line) for line in reaper.ledger().path.read_text().splitlines()]
        mine = [line for line in lines if line.get("id") == entry]
        assert [line["value"] for line in mine] == ["", str(process.pid)]
        assert mine[0]["token"] == mine[1]["token"]
        carried = f"{reaper.TOKEN_ENV}={mine[0]['token']}".encode()
        # Popen returns once exec closed its close-on-exec pipe, and Linux closes those before
        # it sets the new image's environment bounds: for a moment /proc/PID/environ reads
        # empty (seen under load, 2026-11-28).
        wait_for(lambda: carried in Path(f"/proc/{process.pid}/environ").read_bytes()
                 .split(b"\0"), 10, "the spawned process's environment to show its token")
        (held,) = [e for e in reaper.read_unreleased(reaper.ledger().path) if e.id == entry]
        assert held.value == str(process.pid) and held.start_time is not None
    finally:
        process.kill()
        process.wait()
        reaper.release(entry)


CHAIN = textwrap.dedent('''
    import json, sys, time
    from harness.lifecycle import reaper
    if sys.argv[1] == "top":
        middle, _ = reaper.spawn([sys.executable, "-c", sys.argv[2], "middle", sys.argv[3]])
    else:
        leaf, _ = reaper.spawn(["sleep", "600"])
        with open(sys.argv[2], "w") as out:
            json.dump({"middle": reaper.ledger().owner, "leaf": leaf.pid,
                       "watchdog": reaper.ledger().watchdog}, out)
    time.sleep(600)
''')


def test_a_chain_of_owners_is_undone_link_by_link(tmp_path: Path):
    """An owner spawns a harness process that spawns one of its own (a matrix and its suite
    sessions). Killing the top owner: its watchdog kills the middle one by pid and token, and
    the middle one's watchdog — which must not carry the token it was spawned with — kills the
    leaf."""
    said = tmp_path / "middle.json"
    top = subprocess.Popen([sys.executable, "-c", CHAIN, "top", CHAIN, str(said)])
    started: dict = {}
    try:
        wait_for(lambda: said.exists() and said.stat().st_size, 60, "the middle owner to start")
        started = json.loads(said.read_text())
        top.kill()
        top.wait()
        _wait_gone({started["middle"], started["leaf"], started["watchdog"]},
                   "the middle owner, its leaf and its watchdog")
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
        for pid in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_owner_loses_what_it_did_not_release_and_keeps_the_rest():
    owner, started = _owner("wait")
    try:
        assert _running(started["kept"]) and _running(started["released"])
        owner.kill()
        owner.wait()
        _wait_gone({started["kept"], started["watchdog"]}, "the unreleased process")
        assert _running(started["released"]), "a released process was killed"
        assert not Path(started["ledger"]).exists()
    finally:
        for pid in (started["kept"], started["released"]):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_clean_exit_kills_only_what_it_forgot():
    owner, started = _owner("exit")
    try:
        owner.wait(timeout=30)
        _wait_gone({started["kept"], started["watchdog"]}, "the forgotten process")
        assert _running(started["released"])
    finally:
        for pid in (started["kept"], started["released"]):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_reused_pid_is_left_alone(tmp_path: Path):
    """The watchdog kills a pid only while it names the process that was registered."""
    other = _sleeper()
    try:
        stale = reaper.Entry(1, reaper.PROCESS, str(other.pid), start_time="1")
        assert reaper.undo([stale]) == []
        assert _running(other.pid)
        current = reaper.Entry(2, reaper.PROCESS, str(other.pid),
                               start_time=reaper.process_start_time(other.pid))
        assert reaper.undo([current]) == []
        other.wait(timeout=10)
        assert other.returncode == -signal.SIGKILL
    finally:
        if other.poll() is None:
            other.kill()


def test_a_ledger_torn_by_a_death_mid_write_still_reads(tmp_path: Path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text('{"id": 1, "kind": "process", "value": "10", "start_time": "5"}\n'
                      '{"id": 2, "kind": "harness.net.netns:delete_namespace", "value": "kh-x"}\n'
                      '{"released": 1}\n'
                      '{"id": 3, "kind": "proc')
    assert reaper.read_unreleased(ledger) == [
        reaper.Entry(2, "harness.net.netns:delete_namespace", "kh-x")]


SLOW_TEST = '''
import json, os, pathlib, time

def test_waits(kafka_target):
    nodes, cluster = kafka_target.nodes, kafka_target.cluster
    pids = [b.pid for b in nodes.brokers.values()] + [nodes.zookeeper.pid]
    pids.append(getattr(cluster, "server_pid", None))
    namespaces = list(cluster.namespaces().values()) if hasattr(cluster, "namespaces") else []
    # Written whole under another name, then renamed: the waiting test reads it once it exists.
    done = pathlib.Path(os.environ["PIDS_FILE"])
    partial = done.with_name(done.name + ".partial")
    partial.write_text(json.dumps({"pids": [p for p in pids if p], "namespaces": namespaces}))
    os.replace(partial, done)
    time.sleep(600)
'''


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("network", [
    "proxy",
    pytest.param("kernel", marks=pytest.mark.skipif(unavailable() is not None,
                                                    reason=unavailable() or "")),
])
def test_a_sigkilled_pytest_leaves_no_broker_zookeeper_proxy_or_namespace(
        tmp_path: Path, network: str):
    (tmp_path / "test_slow.py").write_text(SLOW_TEST)
    pids_file = tmp_path / "pids.json"
    pytest_run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_slow.py", "--kafka-brokers", "1",
         "--kafka-network", network, "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, env={**os.environ, "PIDS_FILE": str(pids_file)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(pids_file.exists, 120, "the target to start", context=str(tmp_path))
        started = json.loads(pids_file.read_text())
        everything = _descendants(pytest_run.pid)
        assert set(started["pids"]) <= everything
        assert len(started["pids"]) >= 2 and (network == "proxy") == (not started["namespaces"])
        pytest_run.kill()
        pytest_run.wait()
        _wait_gone(everything, "every process the killed pytest started")
        wait_for(lambda: not [n for n in started["namespaces"] if n in _namespaces()],
                 GONE_WITHIN_S, "the namespaces of the killed pytest to be deleted")
    finally:
        if pytest_run.poll() is None:
            pytest_run.kill()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("target", "brokers", "processes"), [
    ("reference", 1, 3),           # ZooKeeper, a broker, the Toxiproxy server
    ("apache-kafka-kraft", 3, 4),  # three KRaft nodes (the quorum), the Toxiproxy server
])
def test_a_sigkilled_supervisor_of_up_leaves_nothing(tmp_path: Path, target: str, brokers: int,
                                                     processes: int):
    run_dir = tmp_path / "run"
    up = _cli("up", "--target", target, "--brokers", str(brokers), "--dir", str(run_dir),
              cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    state = json.loads((run_dir / "state.json").read_text())
    supervisor = state["supervisor_pid"]
    try:
        everything = _descendants(supervisor)
        assert len(everything) >= processes
        watchdog = watchdog_of(supervisor)
        os.kill(supervisor, signal.SIGKILL)
        _wait_gone(everything, "every process of the killed supervisor", supervisor, watchdog)
    finally:
        if _running(supervisor):
            _cli("down", "--dir", str(run_dir), cwd=tmp_path)


def test_a_sigkilled_run_leaves_no_cluster_client_or_suite_session(tmp_path: Path):
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--suites", "none", "--duration", "120",
         "--brokers", "1", "--nemesis", "none", "--dir", str(tmp_path / "run")],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The cluster and the clients are up once the first client has a log.
        wait_for(lambda: list((tmp_path / "run" / "logs").glob("process-*.log")), 120,
                 "the run's clients to start")
        everything = _descendants(run.pid)
        assert len(everything) >= 4  # ZooKeeper, broker, proxy server, clients
        watchdog = watchdog_of(run.pid)
        run.kill()
        run.wait()
        _wait_gone(everything, "every process of the killed run", run.pid, watchdog)
    finally:
        if run.poll() is None:
            run.kill()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
def test_an_unreleased_mount_is_unmounted_and_a_gone_one_is_no_error(tmp_path: Path):
    from harness.disk.mounts import is_mounted, mount_tmpfs, undo_mount

    point = tmp_path / "disk"
    entry = mount_tmpfs(point, 1)
    assert is_mounted(point)
    mounted = reaper.Entry(entry, reaper.action_name(undo_mount), str(point.resolve()))
    assert reaper.undo([mounted]) == []
    assert not is_mounted(point)
    assert reaper.undo([mounted]) == []  # already gone: nothing to do, nothing failed
    reaper.release(entry)


def test_the_watchdog_undoes_only_declared_undo_actions(tmp_path: Path):
    """A ledger line names the code that undoes it; the watchdog runs it only if a harness
    module declares it with @undo_action — a line naming anything else fails, runs nothing,
    and the other entries are still undone."""
    from harness.net import netns

    assert reaper.resolve_action("harness.net.netns:delete_namespace") is netns.delete_namespace
    made = tmp_path / "made"
    entries = [reaper.Entry(1, "os:system", f"touch {made}"),
               reaper.Entry(2, "harness.net.netns_support:unavailable", ""),
               reaper.Entry(3, "harness.no_such_module:undo", "x")]
    sleeper = _sleeper()
    entries.append(reaper.Entry(4, reaper.PROCESS, str(sleeper.pid),
                                start_time=reaper.process_start_time(sleeper.pid)))
    try:
        failed = reaper.undo(entries)
        sleeper.wait(timeout=10)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    assert [line.split()[0] for line in failed] == [
        "harness.no_such_module:undo", "harness.net.netns_support:unavailable", "os:system"]
    assert not made.exists()
    assert sleeper.returncode == -signal.SIGKILL


def test_only_a_declared_undo_action_can_register_a_resource():
    from harness.net.netns_support import unavailable

    with pytest.raises(ValueError, match="not declared with @undo_action"):
        reaper.register(unavailable, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="module-level function of a harness module"):
        reaper.undo_action(lambda value: None)
