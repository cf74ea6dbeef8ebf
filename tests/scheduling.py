"""The costliest test files first, so that two pytest-xdist workers run out of work together.

``ci/test.sh`` runs the tests on two workers with ``--dist loadfile``: each worker is handed
whole files, one or two ahead of the one it runs, in the order of the collection. pytest-xdist
would sort the files by how many tests they hold (``--loadscope-reorder``, its default), which
puts last the files of one to three tests that each start a Kafka cluster or a judged run
(the slowest of them takes 2 to 6 minutes): one of those, handed out near the end, can keep its
worker busy that long after the other has nothing left to do. Handing out the longest first
(the longest-processing-time rule) leaves only cheap files for the end.

A file's cost is the seconds its tests took in a whole run of the test command (setup and
teardown included, so a module's cluster counts), kept in ``tests/file_costs.json`` under the
rootdir and written by ``ci/junit_times.py --costs`` (``ci/test.sh`` leaves a fresh table in
``.harness/file-costs.json``). A file the table does not know goes first: its cost is unknown,
and a new expensive file at the end is what this ordering exists to avoid. The order is
applied on pytest-xdist's workers only (``ci/test.sh`` passes ``--no-loadscope-reorder`` so
that the controller hands the files out in this order); run alone, pytest keeps its own order.
Within a file the tests keep theirs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

COSTS = Path("tests", "file_costs.json")  # under the rootdir


def file_costs(path: Path) -> dict[str, float]:
    """Seconds per test file (``tests/x/test_y.py``), or nothing if the table is missing."""
    if not path.exists():
        return {}
    seconds = json.loads(path.read_text())["seconds"]
    return {name: float(spent) for name, spent in seconds.items()}


def costliest_first(nodeids: list[str], costs: dict[str, float]) -> list[int]:
    """The indexes of `nodeids` reordered: files by cost, highest (or unknown) first, ties in
    their first appearance's order; each file's tests in their own order."""
    first_seen: dict[str, int] = {}
    for nodeid in nodeids:
        first_seen.setdefault(nodeid.split("::", 1)[0], len(first_seen))

    def key(index: int) -> tuple[float, int, int]:
        path = nodeids[index].split("::", 1)[0]
        return -costs.get(path, math.inf), first_seen[path], index

    return sorted(range(len(nodeids)), key=key)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The workers collect, and xdist's controller hands out their collection's order (a
    # worker's own options say dist "no"; `workerinput` is what marks one).
    if not hasattr(config, "workerinput"):
        return
    order = costliest_first([item.nodeid for item in items],
                            file_costs(config.rootpath / COSTS))
    items[:] = [items[i] for i in order]
