"""Where the conformance suites live, whether the harness runs from a checkout or a wheel.

The repository keeps them in a top-level ``suites/`` directory; the wheel ships the same files as
the package ``kafka_harness_suites`` (a name no user project will have, unlike ``suites``), so
``pytest --pyargs kafka_harness_suites.protocol`` runs them from any directory. Everything that
starts a suite session (``kafka-harness suites``, the matrix) asks here instead of assuming a
checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PACKAGE = "kafka_harness_suites"
SUITES = ("protocol", "offsets", "groups", "transactions", "failover", "unclean", "chaos")


def suites_dir() -> Path:
    """The directory holding the suite packages (``protocol/``, ``offsets/``, …)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    checkout = Path(__file__).resolve().parents[2] / "suites"  # beside harness/conformance/
    if (checkout / "__init__.py").is_file():
        return checkout
    raise FileNotFoundError(f"the conformance suites are missing: no package {PACKAGE} is "
                            f"installed and no checkout has {checkout}")
