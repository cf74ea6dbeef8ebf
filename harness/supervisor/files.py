"""The files a supervisor keeps in its run directory, and how others read them.

``state.json`` — the last known state (phase, nodes, pids, ports, bootstrap, proxies, active
faults), rewritten atomically after every command and every few seconds and kept after ``down``
(phase ``stopped``) for post-mortems; ``supervisor.log`` — the detached supervisor's output. The
CLI reads them to follow a start it launched, without loading what the supervisor runs.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

STATE_NAME = "state.json"
LOG_NAME = "supervisor.log"


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_NAME


def read_state(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(state_path(run_dir).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
