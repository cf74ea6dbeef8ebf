"""The disk-fault mechanism itself, without a broker: a full disk refuses writes under the log
dir with ENOSPC until healed; the FUSE layer fails reads and writes with EIO at the rate set;
every mount is gone after unmount, and after a SIGKILL of the harness that made it."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.disk.broker_disk import BrokerDisk, DiskLayer, fuse_unavailable
from harness.disk.mounts import mounts_under
from harness.waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")


def _write(path: Path, data: bytes) -> None:
    with path.open("ab") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


@pytest.fixture(params=[DiskLayer.LIMITED, DiskLayer.FAULTY])
def disk(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param is DiskLayer.FAULTY and (reason := fuse_unavailable()) is not None:
        pytest.fail(f"FUSE does not work on this machine: {reason}")
    made = BrokerDisk(tmp_path / "broker-1" / "data", request.param, size_mb=4)
    made.mount()
    try:
        yield made
    finally:
        made.unmount()
        assert mounts_under(tmp_path) == []


def test_a_full_disk_refuses_writes_under_the_log_dir_until_healed(disk: BrokerDisk):
    segment = disk.log_dir / "topic-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    _write(segment, b"x" * 4096)
    assert (disk.backing / "topic-0" / segment.name).read_bytes() == b"x" * 4096
    ballast = disk.fill()
    assert ballast > 3 * (1 << 20)
    assert disk.state().free_bytes == 0
    with pytest.raises(OSError) as refused:
        _write(segment, b"y" * 65536)
    assert refused.value.errno == errno.ENOSPC
    assert "ballast" not in os.listdir(disk.log_dir)  # the broker never sees it
    disk.heal()
    assert disk.state().ballast_bytes == 0
    _write(segment, b"z" * 65536)
    assert segment.stat().st_size >= 4096 + 65536


def test_disk_errors_fail_reads_and_writes_at_the_rate_set(tmp_path: Path):
    if (reason := fuse_unavailable()) is not None:
        pytest.fail(f"FUSE does not work on this machine: {reason}")
    disk = BrokerDisk(tmp_path / "broker-1" / "data", DiskLayer.FAULTY, size_mb=4)
    disk.mount()
    try:
        segment = disk.log_dir / "segment.log"
        _write(segment, b"a" * 100)
        disk.set_error_rate(1.0)
        with pytest.raises(OSError) as failed_write:
            _write(segment, b"b" * 100)
        assert failed_write.value.errno == errno.EIO
        fd = os.open(segment, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read from the filesystem
            with pytest.raises(OSError) as failed_read:
                os.pread(fd, 100, 0)
            assert failed_read.value.errno == errno.EIO
        finally:
            os.close(fd)
        assert disk.state().error_rate == 1.0
        disk.set_error_rate(0.0)
        assert segment.read_bytes().startswith(b"a" * 100)
        _write(segment, b"c" * 100)
    finally:
        disk.unmount()
    assert mounts_under(tmp_path) == []


def test_a_file_created_for_reading_and_writing_reads_back(disk: BrokerDisk):
    """A broker creates a segment O_RDWR and reads it back through the same descriptor."""
    fd = os.open(disk.log_dir / "segment.log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, b"batch")
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert os.pread(fd, 5, 0) == b"batch"
    finally:
        os.close(fd)


def test_disk_errors_need_the_faulty_layer(tmp_path: Path):
    disk = BrokerDisk(tmp_path / "data", DiskLayer.LIMITED, size_mb=1)
    disk.mount()
    try:
        with pytest.raises(RuntimeError, match="faulty disk layer"):
            disk.set_error_rate(0.5)
    finally:
        disk.unmount()
    assert mounts_under(tmp_path) == []


OWNER = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from harness.disk.broker_disk import BrokerDisk, DiskLayer
    from harness.lifecycle import reaper
    root = Path(sys.argv[1])
    limited = BrokerDisk(root / "broker-1" / "data", DiskLayer.LIMITED, size_mb=2)
    limited.mount()
    limited.fill()
    faulty = BrokerDisk(root / "broker-2" / "data", DiskLayer.FAULTY, size_mb=2)
    faulty.mount()
    print(json.dumps({"fuse": faulty._fuse.pid, "watchdog": reaper.ledger().watchdog}),
          flush=True)
    time.sleep(600)
''')


def test_a_sigkilled_harness_leaves_no_mount_and_no_fuse_process(tmp_path: Path):
    if (reason := fuse_unavailable()) is not None:
        pytest.fail(f"FUSE does not work on this machine: {reason}")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)],
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    try:
        with owner.stdout:
            started = json.loads(owner.stdout.readline())
        assert len(mounts_under(tmp_path)) == 4  # two tmpfs, a bind and a FUSE mount
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: mounts_under(tmp_path) == [], 20, "the watchdog to unmount everything",
             context=f"still mounted: {mounts_under(tmp_path)}")
    wait_for(lambda: not Path(f"/proc/{started['fuse']}").exists()
             or Path(f"/proc/{started['fuse']}/stat").read_text().split()[2] == "Z",
             20, "the FUSE process to be killed")
