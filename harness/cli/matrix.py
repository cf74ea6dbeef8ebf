"""`kafka-harness matrix`, registered on the CLI's typer app by :func:`register`.

Only the options live here; the matrix itself is :mod:`harness.conformance.matrix`. Its errors
carry their exit code (:mod:`harness.errors`), printed by the CLI's ``main``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.cli.options import BOOTSTRAP_SERVER_HELP, DEPRECATED_BOOTSTRAP, bootstrap_server
from harness.cluster.options import Backend, TargetName
from harness.conformance import matrix
from harness.errors import ExitCode, HarnessError
from harness.lifecycle.interrupts import interrupt_once


def register(app: typer.Typer) -> None:
    @app.command("matrix")
    def matrix_command(
        targets: Annotated[str | None, typer.Option(
            metavar="TARGET[,TARGET...]",
            help=f"Comma-separated targets from {', '.join(TargetName)} "
                 f"[default: {','.join(matrix.DEFAULT_TARGETS)}; with only "
                 f"--bootstrap-server: external].")] = None,
        bootstrap_server_: Annotated[str | None, typer.Option(
            "--bootstrap-server", metavar="HOST:PORT[,...]",
            help=f"{BOOTSTRAP_SERVER_HELP} Given alone, only that broker is tested (the "
                 f"external target); with --targets, it is tested next to them.")] = None,
        bootstrap: Annotated[str | None, typer.Option(DEPRECATED_BOOTSTRAP, hidden=True)
                             ] = None,
        recipe: Annotated[Path | None, typer.Option(
            metavar="FILE",
            help="Test a cluster of the broker a recipe file describes (docs/recipes.md): the "
                 "recipe target. Given alone, only that cluster is tested.")] = None,
        suites: Annotated[str, typer.Option(
            metavar="SUITE[,SUITE...]",
            help=f"Comma-separated suites from {', '.join(matrix.SUITES)}.")
        ] = ",".join(matrix.SUITES),
        keyword: Annotated[str | None, typer.Option(
            "-k", help="Only tests matching this pytest -k expression.")] = None,
        out: Annotated[Path, typer.Option(
            "--out", help="Where matrix.md/.html/.json and each target's log and JUnit XML go.")
        ] = Path(".harness/matrix"),
        backend: Annotated[Backend, typer.Option(
            help="Where the reference and apache-kafka targets run: local processes or docker "
                 "containers.")
        ] = Backend.LOCAL,
        json_output: Annotated[bool, typer.Option(
            "--json", help="Print the file paths and per-target counts as JSON "
                           "(with schema_version).")] = False,
    ) -> None:
        """Run the suites against each target and write the conformance matrix.

        Exit 1 when a test fails on a target you named (with none named: on the reference
        broker or Apache Kafka; the other peers' failures are findings in the table). Exit 2 on
        bad options, 3 when a target produced no results at all.
        """
        console = Console(stderr=True, soft_wrap=True)

        def say(text: str) -> None:
            console.print(text, highlight=False)

        try:
            address = bootstrap_server(bootstrap_server_, bootstrap, console)
            named = None if targets is None else matrix.parse_list(
                targets, tuple(TargetName), "target")
            chosen, gating = matrix.chosen_targets(named, address, recipe)
            chosen_suites = matrix.parse_list(suites, matrix.SUITES, "suite")
            with interrupt_once():
                runs, paths = matrix.run_matrix(
                    chosen, chosen_suites, out, bootstrap=address, keyword=keyword, say=say,
                    backend=backend, recipe=recipe)
        except HarnessError as error:
            if json_output:  # a program reading stdout gets an answer too
                print(json.dumps(matrix.error_json(error)))
            raise
        except KeyboardInterrupt:
            say("interrupted: the suite session was stopped and closed its target")
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        code = matrix.exit_code(runs, gating)
        if json_output:
            print(json.dumps(matrix.summary_json(runs, code, paths)))
        else:
            say(f"matrix: {paths['markdown']} and {paths['html']}")
        raise typer.Exit(code)
