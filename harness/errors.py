"""The exit codes the harness promises, carried by the errors that cause them.

A command raises a :class:`HarnessError` subclass; the CLI (:mod:`harness.cli.exits`) is the one
place that prints the message on stderr and exits with the code. Before this, each command
mapped its exceptions to numbers by hand and the same failure could exit 2 in one command and 3
in another. A leaf module, because the parts that decide an outcome — the matrix, a run, the
checker — raise these too, below the CLI that reports them.

The codes are the ones the README promises everywhere: 0 ok, 1 a guarantee or a test failed,
2 usage or configuration error, 3 the infrastructure could not start (130: interrupted).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


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
