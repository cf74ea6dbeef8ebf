"""`kafka-harness matrix`, registered on the CLI's typer app by :func:`register`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness import matrix
from harness.cluster.factory import TargetName


def register(app: typer.Typer) -> None:
    @app.command("matrix")
    def matrix_command(
        targets: Annotated[str | None, typer.Option(
            help=f"Comma-separated targets from {', '.join(TargetName)} "
                 f"[default: {','.join(matrix.DEFAULT_TARGETS)}].")] = None,
        bootstrap: Annotated[str | None, typer.Option(
            help="Run against an external broker at this bootstrap address (alone, unless "
                 "--targets names others too).")] = None,
        suites: Annotated[str, typer.Option(
            help=f"Comma-separated suites from {', '.join(matrix.SUITES)}.")
        ] = ",".join(matrix.SUITES),
        keyword: Annotated[str | None, typer.Option(
            "-k", help="Only tests matching this pytest -k expression.")] = None,
        out: Annotated[Path, typer.Option(
            "--out", help="Where matrix.md/.html/.json and each target's log and JUnit XML go.")
        ] = Path(".harness/matrix"),
        backend: Annotated[str, typer.Option(
            help="Where the reference target runs: local processes or docker containers.")
        ] = "local",
        json_output: Annotated[bool, typer.Option(
            "--json", help="Print the file paths and per-target counts as JSON.")] = False,
    ) -> None:
        """Run the suites against each target and write the conformance matrix.

        Exit 1 when a test fails on a target you named (with none named: on the reference
        broker or Apache Kafka; the other peers' failures are findings in the table). Exit 3
        when a target produced no results at all.
        """
        console = Console(stderr=True)
        try:
            named = None if targets is None else matrix.parse_list(
                targets, tuple(TargetName), "target")
            chosen, gating = matrix.chosen_targets(named, bootstrap)
            chosen_suites = matrix.parse_list(suites, matrix.SUITES, "suite")
            matrix.parse_list(backend, ("local", "docker"), "backend")
            runs, paths = matrix.run_matrix(
                chosen, chosen_suites, out, bootstrap=bootstrap, keyword=keyword,
                say=lambda text: console.print(text, highlight=False), backend=backend)
        except matrix.MatrixError as exc:
            console.print(f"[red]error:[/] {exc}", highlight=False)
            raise typer.Exit(2) from None
        code = matrix.exit_code(runs, gating)
        if json_output:
            print(json.dumps({"exit_code": code, "files": paths, "targets": {
                run.target: dict(run.counts()) for run in runs}}))
        else:
            console.print(f"matrix: {paths['markdown']} and {paths['html']}", highlight=False)
        raise typer.Exit(code)
