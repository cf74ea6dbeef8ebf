"""Ports for listeners the harness starts: never where outgoing connections take theirs, never
twice, always bindable when handed out."""

from __future__ import annotations

import socket
from collections import deque
from pathlib import Path

import pytest

from harness.net import ports
from harness.net.ports import LOOPBACK, ephemeral_range, free_port, listening_window


def test_ports_come_from_outside_the_kernels_ephemeral_range() -> None:
    """The port an Apache Kafka listener was about to bind was once taken by a client's
    outgoing connection: those come from the ephemeral range, so listeners must not."""
    low, high = ephemeral_range()
    handed = [free_port() for _ in range(300)]
    assert all(not low <= port <= high for port in handed)


def test_no_port_is_handed_out_twice() -> None:
    handed = [free_port() for _ in range(ports.REMEMBERED)]
    assert len(set(handed)) == len(handed)


def test_a_port_in_use_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken, socket.socket() as released:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        released.bind((LOOPBACK, 0))
        busy, free = taken.getsockname()[1], released.getsockname()[1]
        released.close()
        monkeypatch.setattr(ports, "listening_window", lambda _: [busy, free])
        monkeypatch.setattr(ports, "_handed_out", deque(maxlen=ports.REMEMBERED))
        assert free_port() == free
        with pytest.raises(OSError, match="no free port"):
            free_port()


def test_the_ephemeral_range_is_read_from_the_kernel(tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t50000\n")
    assert ephemeral_range(setting) == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == ports.DEFAULT_EPHEMERAL_RANGE


@pytest.mark.parametrize(("ephemeral", "window"), [
    ((32768, 60999), range(10000, 32768)),
    ((1024, 60000), range(60001, 65536)),
    ((1024, 65000), None),
])
def test_the_window_lies_below_the_ephemeral_range_else_above_it(
        ephemeral: tuple[int, int], window: range | None) -> None:
    assert listening_window(ephemeral) == window
