"""Print the ids of the failed and errored tests in a pytest JUnit XML file, comma-separated.

ci/test.sh puts them in its last line: a CI log is often read only at its end, and pytest's
own summary of a 1,500-test run sits pages above it.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def failed_ids(junit: Path) -> list[str]:
    """`path::name` of every test case with a failure or error element."""
    if not junit.exists() or junit.stat().st_size == 0:
        return []
    ids = []
    for case in ElementTree.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            path = case.get("classname", "").replace(".", "/")
            ids.append(f"{path}.py::{case.get('name')}")
    return ids


if __name__ == "__main__":
    print(", ".join(failed_ids(Path(sys.argv[1]))))
