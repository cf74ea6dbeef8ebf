"""Print where a pytest run's time went, per directory and per file, from its JUnit XML file.

ci/test.sh prints it after the tests: the test command has a time budget (docs/setup.md),
and pytest's --durations names single tests, while what costs most is often a file or a
directory of tests that each start a cluster. Setup and teardown count with their test.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

TOP_FILES = 20


def seconds_by_file(junit: Path) -> Counter[str]:
    """Seconds per test file (``tests/x/test_y.py``), from each test case's time."""
    spent: Counter[str] = Counter()
    if not junit.exists() or junit.stat().st_size == 0:
        return spent
    for case in ElementTree.parse(junit).iter("testcase"):
        spent[case.get("classname", "").replace(".", "/") + ".py"] += float(case.get("time", 0))
    return spent


def summary(spent: Counter[str], top: int = TOP_FILES) -> list[str]:
    by_directory: Counter[str] = Counter()
    for path, seconds in spent.items():
        by_directory[path.rsplit("/", 1)[0]] += seconds
    lines = [f"{sum(spent.values()) / 60:.1f} min in {len(spent)} files; by directory:"]
    lines += [f"  {s / 60:5.1f} min  {d}" for d, s in by_directory.most_common()]
    lines.append(f"the {top} costliest files:")
    lines += [f"  {s:6.0f} s  {p}" for p, s in spent.most_common(top)]
    return lines


if __name__ == "__main__":
    print("\n".join(summary(seconds_by_file(Path(sys.argv[1])))))
