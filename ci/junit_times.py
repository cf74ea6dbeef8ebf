"""Print where a pytest run's time went, per directory and per file, from its JUnit XML file.

ci/test.sh prints it after the tests: the test command has a time budget (docs/setup.md),
and pytest's --durations names single tests, while what costs most is often a file or a
directory of tests that each start a cluster. Setup and teardown count with their test.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

TOP_FILES = 20


def test_file(classname: str) -> str:
    """``tests.x.test_y`` or ``tests.x.test_y.TestZ`` → ``tests/x/test_y.py``: pytest names a
    test class in the JUnit classname after its module, and classes are capitalised."""
    parts = classname.split(".")
    while len(parts) > 1 and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def seconds_by_file(junit: Path) -> Counter[str]:
    """Seconds per test file (``tests/x/test_y.py``), from each test case's time."""
    spent: Counter[str] = Counter()
    if not junit.exists() or junit.stat().st_size == 0:
        return spent
    for case in ElementTree.parse(junit).iter("testcase"):
        spent[test_file(case.get("classname", ""))] += float(case.get("time", 0))
    return spent


def write_costs(spent: Counter[str], out: Path) -> None:
    """The per-file table `tests/scheduling.py` orders the files by (costliest first)."""
    table = {"note": "seconds per test file in one run of ci/test.sh; written by "
                     "ci/junit_times.py --costs, read by tests/scheduling.py",
             "seconds": {path: round(seconds, 1) for path, seconds in sorted(spent.items())}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")


def summary(spent: Counter[str], top: int = TOP_FILES) -> list[str]:
    by_directory: Counter[str] = Counter()
    for path, seconds in spent.items():
        by_directory[path.rsplit("/", 1)[0]] += seconds
    lines = [f"{sum(spent.values()) / 60:.1f} min in {len(spent)} files; by directory:"]
    lines += [f"  {s / 60:5.1f} min  {d}" for d, s in by_directory.most_common()]
    lines.append(f"the {top} costliest files:")
    lines += [f"  {s:6.0f} s  {p}" for p, s in spent.most_common(top)]
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path, help="pytest's JUnit XML file")
    parser.add_argument("--costs", type=Path, metavar="JSON",
                        help="also write the seconds of every file there, in the form of "
                             "tests/file_costs.json")
    args = parser.parse_args(argv)
    spent = seconds_by_file(args.junit)
    print("\n".join(summary(spent)))
    if args.costs is not None and spent:
        write_costs(spent, args.costs)
        print(f"per-file seconds written to {args.costs}")


if __name__ == "__main__":
    main(sys.argv[1:])
