"""The benchmarks live in `ci/` (scripts, not a package): put it on the path."""

import sys
from pathlib import Path

CI = Path(__file__).resolve().parents[2] / "ci"
if str(CI) not in sys.path:
    sys.path.insert(0, str(CI))
