"""Whether this host can cut links in the kernel: root, and the ``ip`` and ``iptables`` tools.

Apart from :mod:`harness.net.netns` (which builds the namespaces) so that a command can refuse
``--network kernel`` before it starts anything, without loading the namespace machinery.
"""

from __future__ import annotations

import os
import shutil

REQUIRED_TOOLS = {"ip": "iproute2", "iptables": "iptables", "iptables-restore": "iptables"}


def unavailable() -> str | None:
    """Why kernel partitions cannot work here (not root, a tool missing), or None if they can.

    Cheap and side-effect free, so a command can refuse before it starts anything."""
    if os.geteuid() != 0:
        return ("the kernel network mechanism needs root (CAP_NET_ADMIN, for ip netns and "
                f"iptables); this process runs as uid {os.geteuid()}: use --network proxy")
    missing = [f"{tool} (package {package})" for tool, package in REQUIRED_TOOLS.items()
               if shutil.which(tool) is None]
    if missing:
        return f"the kernel network mechanism needs {', '.join(missing)}: not on PATH"
    return None
