"""The `kafka-harness` command line: the typer app and its commands, one module per group.

This module only builds the app: each group of commands lives in its own module of this package
and is added by its ``register(app)`` — check (:mod:`harness.cli.check`), demo, the running
cluster (:mod:`harness.cli.cluster`: up, status, down; :mod:`harness.cli.faults`: partitions,
toxics, process and disk faults), run and matrix — in the order ``--help`` lists them. Commands
raise :mod:`harness.errors` errors, which carry their exit code; :func:`main` is the one place
that prints them and exits (:mod:`harness.cli.exits`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli import check, cluster, demo, faults, matrix, run
from harness.cli.exits import run_main
from harness.errors import EXIT_CODES_HELP

DISTRIBUTION = "kafka-harness"

app = typer.Typer(
    name="kafka-harness",
    help="Kafka protocol conformance and chaos test harness.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        # importlib.metadata costs --help and every command a tenth of their start-up, for an
        # answer only --version needs.
        from importlib import metadata

        print(f"kafka-harness {metadata.version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version,
        help="Print the installed kafka-harness version and exit.")] = False,
) -> None:
    """Kafka protocol conformance and chaos test harness."""


for _group in (check, demo, cluster, faults, run, matrix):
    _group.register(app)


def main() -> None:
    """The `kafka-harness` program: every error that carries an exit code (harness.errors) is
    printed as one line on stderr and gives its code."""
    run_main(app)
