"""`kafka-harness demo`: one reference broker, a round trip of records through it and a restart.

Only the options live here; the round trip is :mod:`harness.run.demo`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command()(demo)


def demo(
    records: Annotated[int, typer.Option(help="Records to produce and read back.")] = 10_000,
    run_dir: Annotated[
        Path | None, typer.Option("--dir", help="Run directory (kept); default a temp dir.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
) -> None:
    """The main job for now: start a reference broker, produce, consume, restart, read back.
    Exit 0 when every record came back once and in order, 1 if not, 3 if the broker could not
    start."""
    # The round trip loads confluent-kafka and the broker process: not for --help.
    from harness.run import demo as round_trip

    raise typer.Exit(round_trip.run_command(records, run_dir, json_output))
