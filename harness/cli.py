"""The `kafka-harness` command line.

This module only builds the typer app and maps options onto the library: each command's logic
lives in its own package (the checker's in harness.checker.command), so adding a command is one
function here.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from harness.checker.result import DEFAULT_GUARANTEE, GUARANTEES

app = typer.Typer(
    name="kafka-harness",
    help="Kafka protocol conformance and chaos test harness.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Guarantee = Enum("Guarantee", {name: name for name in GUARANTEES}, type=str)
_DEFAULT_GUARANTEE = Guarantee(DEFAULT_GUARANTEE)


@app.callback()
def _root() -> None:
    """Kafka protocol conformance and chaos test harness."""


@app.command()
def check(
    history_dir: Annotated[
        Path, typer.Argument(metavar="HISTORY_DIR", help="Directory of *.parquet / *.jsonl files.")
    ],
    guarantee: Annotated[
        Guarantee, typer.Option(help="Delivery guarantee the run must keep.")
    ] = _DEFAULT_GUARANTEE,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    master: Annotated[
        str | None,
        typer.Option(
            metavar="SPARK_MASTER",
            help="Spark master (spark://…, sc://… for Spark Connect); default $SPARK_REMOTE, "
            "$SPARK_MASTER, else local[*].",
        ),
    ] = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            "--report", metavar="OUT_DIR", help="Write report.html, report.json, junit.xml."
        ),
    ] = None,
) -> None:
    """Check a history against a delivery guarantee: exit 0 valid, 1 invalid, 2 bad input,
    3 Spark could not start."""
    from harness.checker import command

    code = command.run(
        history_dir,
        guarantee.value,
        master=master,
        as_json=json_output,
        report_dir=report_dir,
    )
    raise typer.Exit(code)


@app.command()
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
    from harness import demo as round_trip

    raise typer.Exit(round_trip.run_command(records, run_dir, json_output))


def main() -> None:
    app()
