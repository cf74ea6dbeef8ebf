"""What the cluster and faults benchmarks share: machine facts, the results file, the table."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import confluent_kafka
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def machine_info() -> dict[str, object]:
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "load_average_1m_at_start": os.getloadavg()[0],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }


def write_json_atomically(path: Path, document: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)


def print_results(title: str, rows: Sequence[Sequence[str]], markdown: bool,
                  headers: Sequence[str] = ("measure", "result")) -> None:
    """The measure/result table (or measure and one column per compared thing, ``headers``):
    markdown for the README, else a rich table."""
    if markdown:
        lines = [f"**{title}**", "", "| " + " | ".join(headers) + " |",
                 "|---|" + "---:|" * (len(headers) - 1)]
        print("\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]))
        return
    table = Table(title=title)
    table.add_column(headers[0])
    for header in headers[1:]:
        table.add_column(header, justify="right")
    for name, *values in rows:
        table.add_row(escape(name), *values)
    Console().print(table)
