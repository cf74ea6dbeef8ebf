"""``latest``: the symlink in a directory of runs that points at the newest one.

A run without ``--dir`` goes to ``.harness/runs/<time>-seed<N>``; ``.harness/runs/latest`` is
pointed at it as soon as it starts, so ``tail -f .harness/runs/latest/suites/reference.log``
follows the run in progress and a script finds the newest run without parsing the time.
"""

from __future__ import annotations

import os
from pathlib import Path

LATEST = "latest"


def point_latest(run_dir: Path) -> Path:
    """Make ``latest`` next to ``run_dir`` a symlink to it (replaced atomically, so a reader
    never finds it missing; relative, so the runs directory can be moved); returns the link."""
    link = run_dir.parent / LATEST
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = run_dir.parent / f".{LATEST}.{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(run_dir.name, target_is_directory=True)
    os.replace(staged, link)
    return link
