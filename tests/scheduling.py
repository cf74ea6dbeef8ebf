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

One directory is handed out as a single unit instead of file by file: ``tests/checker``, whose
tests start Spark in the pytest process (``tests/checker/conftest.py``'s ``spark`` fixture). On
one worker its files share one session and its JVM; spread over two, each worker starts its
own, and the two JVMs contend for the two cores: in the run of 822b17a, which handed
``tests/checker/test_spark.py`` and ``tests/checker/test_cli.py`` to the two workers at once,
they took 535 and 211 s, against 374 and 142 s in the run before it (docs/setup.md). The
unit's cost is its files' summed, and it goes first or last by that like any file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

COSTS = Path("tests", "file_costs.json")  # under the rootdir
# Directories (under the rootdir) whose files one worker runs, as one unit (see above).
ONE_WORKER = ("tests/checker/",)


def file_costs(path: Path) -> dict[str, float]:
    """Seconds per test file (``tests/x/test_y.py``), or nothing if the table is missing."""
    if not path.exists():
        return {}
    seconds = json.loads(path.read_text())["seconds"]
    return {name: float(spent) for name, spent in seconds.items()}


def unit(nodeid: str) -> str:
    """The unit of work a test is handed out in: its file, or the ONE_WORKER directory
    holding it."""
    path = nodeid.split("::", 1)[0]
    return next((d.rstrip("/") for d in ONE_WORKER if path.startswith(d)), path)


def costliest_first(nodeids: list[str], costs: dict[str, float]) -> list[int]:
    """The indexes of `nodeids` reordered: units (files, or a ONE_WORKER directory costing
    its files' sum) by cost, highest (or unknown) first, ties in their first appearance's
    order; each unit's tests in their own order."""
    first_seen: dict[str, int] = {}
    files: dict[str, set[str]] = {}
    for nodeid in nodeids:
        first_seen.setdefault(unit(nodeid), len(first_seen))
        files.setdefault(unit(nodeid), set()).add(nodeid.split("::", 1)[0])
    cost = {u: sum(costs.get(f, math.inf) for f in fs) for u, fs in files.items()}

    def key(index: int) -> tuple[float, int, int]:
        of = unit(nodeids[index])
        return -cost[of], first_seen[of], index

    return sorted(range(len(nodeids)), key=key)


class OneWorkerDirectories(LoadFileScheduling):
    """pytest-xdist's ``--dist loadfile``, but a ONE_WORKER directory is one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling | None:
    if config.getvalue("dist") != "loadfile":
        return None
    return OneWorkerDirectories(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The workers collect, and xdist's controller hands out their collection's order (a
    # worker's own options say dist "no"; `workerinput` is what marks one).
    if not hasattr(config, "workerinput"):
        return
    order = costliest_first([item.nodeid for item in items],
                            file_costs(config.rootpath / COSTS))
    items[:] = [items[i] for i in order]
