"""Loopback ports for processes the harness starts.

A port is chosen here and bound later by another process (a broker, ZooKeeper, a JVM), so
something else may take it in between. Two things made that happen in practice, and this
module rules both out:

* **Outgoing connections.** Asking the kernel for port 0 hands out a port from the *ephemeral*
  range (``net.ipv4.ip_local_port_range``), the same range every outgoing connection's local
  port comes from. Clients of a busy test session open thousands of connections, and one of
  them landed on a port an Apache Kafka broker was about to bind (``Address already in use``,
  the broker exits). Ports here come from below that range, where the kernel never puts an
  outgoing connection.
* **Ourselves.** The last :data:`REMEMBERED` ports handed out are not handed out again, so two
  listeners of one broker (Apache Kafka takes one per peer) or of two brokers never get the
  same one; by the time that many more were handed out, the early ones are bound or abandoned.

Another program choosing ports the same way at the same moment is the race that is left; ports
are drawn at random from a window of thousands, and each is checked to be bindable first.
"""

from __future__ import annotations

import random
import socket
import threading
from collections import deque
from pathlib import Path

LOOPBACK = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)  # Linux's default
LOWEST_PORT = 10000  # below this lie well-known services people run on developer machines
MIN_WINDOW = 1000
REMEMBERED = 4096
_ATTEMPTS = 200

_handed_out: deque[int] = deque(maxlen=REMEMBERED)
_lock = threading.Lock()
_random = random.SystemRandom()


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (inclusive)."""
    try:
        low, high = (int(field) for field in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE
    return low, high


def listening_window(ephemeral: tuple[int, int]) -> range | None:
    """Ports outside ``ephemeral`` to listen on: below it if there is room, else above it;
    None when neither side leaves :data:`MIN_WINDOW` ports."""
    low, high = ephemeral
    if low - LOWEST_PORT >= MIN_WINDOW:
        return range(LOWEST_PORT, low)
    if 65535 - high >= MIN_WINDOW:
        return range(high + 1, 65536)
    return None


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that is bindable now, outside the ephemeral range, and not among
    the last :data:`REMEMBERED` this process handed out."""
    window = listening_window(ephemeral_range())
    with _lock:
        for _ in range(_ATTEMPTS):
            port = _random.choice(window) if window is not None else _kernel_port(host)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.append(port)
                return port
    raise OSError(f"no free port on {host} after {_ATTEMPTS} attempts")


def _kernel_port(host: str) -> int:
    """A port the kernel picks: the fallback when the ephemeral range leaves no window."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def is_accepting(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
