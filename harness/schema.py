"""The version of every JSON document the harness writes — ``check --json``, report.json,
run.json, the run manifest, matrix.json, ``matrix --json`` and ``run --json`` — in one place.

Raised when a field changes meaning or goes away, not when one is added, so a reader can refuse
what it does not understand (docs/history.md). A module of its own, importing nothing, so the
checker and the matrix (which the runner runs, and which must not import the checker) share it.
"""

SCHEMA_VERSION = 1
