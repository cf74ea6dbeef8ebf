"""Kafka's error codes as one typed enum for the whole project.

Only `harness.wire` may import kio (tests/test_architecture.py), yet the reference broker carries
error codes from the log up to every response. Re-exported from here, kio's `ErrorCode` lets it
do so typed: a misspelt member fails at import and under mypy, where a misspelt error-name string
only failed when a response was encoded, or made a comparison silently never true.

`ErrorCode` is an IntEnum, so `str()` and f-strings print its number; `error_name` gives Kafka's
spelling for log lines and messages.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "error_name"]


def error_name(code: int) -> str:
    """Kafka's name of an error code ("NOT_COORDINATOR"); codes kio lacks get a made-up one."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"
