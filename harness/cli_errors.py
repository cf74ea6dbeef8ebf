"""The exit codes of every ``kafka-harness`` command, carried by the errors that cause them.

A command raises a :class:`HarnessError` subclass (or lets one of the library's own errors
listed in :data:`EXIT_CODES` escape); :func:`harness.cli.main` is the one place that prints the
message on stderr and exits with the code. Before this, each command mapped its exceptions to
numbers by hand and the same failure could exit 2 in one command and 3 in another.

The codes are the ones the README promises everywhere: 0 ok, 1 a guarantee or a test failed,
2 usage or configuration error, 3 the infrastructure could not start (130: interrupted).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import IntEnum
from typing import ClassVar, NoReturn

from rich.console import Console
from rich.markup import escape


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    """A guarantee or a test failed, or the command did not do what it was asked."""
    USAGE = 2
    """Bad options or configuration: nothing was started."""
    INFRASTRUCTURE = 3
    """What the command needs (a cluster, a broker, Spark) could not start or is not there."""
    INTERRUPTED = 130


EXIT_CODES_HELP = ("Exit codes: 0 ok, 1 a guarantee or a test failed, 2 usage or configuration "
                   "error, 3 infrastructure could not start, 130 interrupted.")


class HarnessError(Exception):
    """A failure the user is told about in one line, with the exit code it gives."""

    exit_code: ClassVar[ExitCode] = ExitCode.FAILED
    hint: str = ""
    """Said after the message, e.g. what to run instead."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class CommandFailed(HarnessError):
    """The command ran but what it was asked to do failed (exit 1)."""

    exit_code = ExitCode.FAILED


class UsageError(HarnessError):
    """Options or configuration the command cannot work with (exit 2)."""

    exit_code = ExitCode.USAGE


class InfrastructureError(HarnessError):
    """Something the command needs could not be started or reached (exit 3)."""

    exit_code = ExitCode.INFRASTRUCTURE


def _library_errors() -> dict[type[BaseException], tuple[ExitCode, str]]:
    """Errors of modules this package does not own, the exit code each gives and a hint;
    imported here so that this table, not each command, decides."""
    from harness.cluster.control import NoCluster
    from harness.cluster.process import PeerStartError
    from harness.cluster.targets import TargetError

    return {NoCluster: (ExitCode.INFRASTRUCTURE, "start one with `kafka-harness up`"),
            TargetError: (ExitCode.INFRASTRUCTURE, ""),
            PeerStartError: (ExitCode.INFRASTRUCTURE, "")}


def classify(error: BaseException) -> tuple[ExitCode, str] | None:
    """The exit code ``error`` gives and its hint, or None when it is a bug (left to the
    traceback)."""
    if isinstance(error, HarnessError):
        return error.exit_code, error.hint
    for kind, (code, hint) in _library_errors().items():
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
