"""How an error becomes the one line a user reads on stderr and the exit code it gives.

:func:`run_main` wraps the typer app: a :class:`~harness.errors.HarnessError` carries its own
code; the library's own errors that mean "the infrastructure is not there" are mapped here, in
one table, instead of by each command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

from harness.cluster.errors import PeerStartError, TargetError
from harness.errors import ExitCode, HarnessError
from harness.supervisor.control import NoCluster

LIBRARY_ERRORS: dict[type[BaseException], tuple[ExitCode, str]] = {
    NoCluster: (ExitCode.INFRASTRUCTURE, "start one with `kafka-harness up`"),
    TargetError: (ExitCode.INFRASTRUCTURE, ""),
    PeerStartError: (ExitCode.INFRASTRUCTURE, ""),
}
"""Errors of modules the CLI does not own, the exit code each gives and a hint."""


def classify(error: BaseException) -> tuple[ExitCode, str] | None:
    """The exit code ``error`` gives and its hint, or None when it is a bug (left to the
    traceback)."""
    if isinstance(error, HarnessError):
        return error.exit_code, error.hint
    for kind, (code, hint) in LIBRARY_ERRORS.items():
        if isinstance(error, kind):
            return code, hint
    return None


def report(error: BaseException, console: Console | None = None) -> ExitCode:
    """Print ``error`` as the one line a user reads on stderr; return its exit code. An error
    with no exit code is re-raised: it is a bug, and its traceback is what helps."""
    classified = classify(error)
    if classified is None:
        raise error
    code, hint = classified
    (console or Console(stderr=True)).print(
        f"[red]error:[/red] {escape(str(error))}" + (f" ({escape(hint)})" if hint else ""),
        highlight=False, soft_wrap=True)  # one line: greppable, paths intact
    return code


def run_main(app: Callable[[], object]) -> NoReturn:
    """Call ``app`` (a typer app, which exits by itself on success and on usage errors) and
    turn the errors above into their message and exit code."""
    try:
        app()
    except Exception as error:  # noqa: BLE001 - report re-raises what has no exit code
        sys.exit(int(report(error)))
    sys.exit(int(ExitCode.OK))
