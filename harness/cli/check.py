"""`kafka-harness check HISTORY_DIR`: judge a history against a delivery guarantee.

Only the options live here; the check itself is :mod:`harness.checker.command`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.options import Engine, Guarantee


def register(app: typer.Typer) -> None:
    app.command()(check)


def check(
    history_dir: Annotated[
        Path, typer.Argument(metavar="HISTORY_DIR", help="Directory of *.parquet / *.jsonl files.")
    ],
    guarantee: Annotated[
        Guarantee, typer.Option(help="Delivery guarantee the run must keep.")
    ] = Guarantee.AT_LEAST_ONCE,
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
    engine: Annotated[
        Engine, typer.Option(help="auto (python for a small history, spark above a row "
                                  "count measured as the crossover), or force spark (any size) "
                                  "or python (no JVM; memory grows with the history). The same "
                                  "verdicts.")
    ] = Engine.AUTO,
) -> None:
    """Check a history against a delivery guarantee: exit 0 valid, 1 invalid, 2 bad input,
    3 Spark could not start."""
    # The checker loads pyarrow and its engines: not for --help or the other commands.
    from harness.checker import command

    code = command.run(
        history_dir,
        guarantee.value,
        master=master,
        as_json=json_output,
        report_dir=report_dir,
        engine=engine.value,
    )
    raise typer.Exit(code)
