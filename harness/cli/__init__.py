"""The ``kafka-harness`` command line (``kafka-harness = harness.cli:main``; also ``python -m
harness.cli``): the typer app in :mod:`harness.cli.app`, one module per group of commands."""

from harness.cli.app import app, main

__all__ = ["app", "main"]
