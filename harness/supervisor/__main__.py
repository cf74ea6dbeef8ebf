"""``python -m harness.supervisor RUN_DIR [options]``: what ``kafka-harness up`` launches."""

from __future__ import annotations

import logging
import sys

from harness.supervisor.launch import read_command_line
from harness.supervisor.owner import run

logger = logging.getLogger("harness.supervisor")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_dir, spec, launch = read_command_line(argv)
    except ValueError as exc:
        logger.error("%s", exc)
        return 2
    return run(run_dir, spec, launch)


if __name__ == "__main__":
    sys.exit(main())
