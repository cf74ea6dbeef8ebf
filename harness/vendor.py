"""Where the third-party programs the harness runs are found (Kafka's jars, Toxiproxy, kfake).

``ci/setup.sh`` (through ``ci/fetch_vendor.sh``) puts them under ``.harness/vendor/`` of the
checkout; ``$KAFKA_HARNESS_VENDOR`` moves that directory for both the script and the harness, so
an installed harness can share one cache. One function answers "where", so the set-up script,
the Kafka kinds and the Toxiproxy server choice cannot disagree.
"""

from __future__ import annotations

import os
from pathlib import Path

VENDOR_ENV = "KAFKA_HARNESS_VENDOR"
FETCH_HINT = "run `bash ci/fetch_vendor.sh` (ci/setup.sh does)"


def project_root() -> Path:
    """The checkout the harness runs from: the parent of the ``harness`` package when it holds
    ``pyproject.toml``, else the working directory (an installed harness)."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def vendor_dir() -> Path:
    """``$KAFKA_HARNESS_VENDOR``, else ``<project root>/.harness/vendor`` (may not exist)."""
    override = os.environ.get(VENDOR_ENV)
    if override:
        path = Path(override)
        return path if path.is_absolute() else project_root() / path
    return project_root() / ".harness" / "vendor"
