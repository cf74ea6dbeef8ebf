"""The fixed sets of values `kafka-harness` options take, as enums, and the options' shared bits.

An option typed with an Enum shows its choices in ``--help`` and is refused by the parser (exit
2, naming the allowed values) before a command starts anything; a plain ``str`` checked by
hand showed nothing and was checked differently in each command. Each enum here mirrors a
table of the library that owns the meaning (the checker's guarantees, the consumer's modes…);
``tests/cli/test_cli_conventions.py`` keeps each equal to its table.
"""

from __future__ import annotations

from enum import StrEnum

from rich.console import Console

from harness.errors import UsageError


class Guarantee(StrEnum):
    """harness.checker.result.GUARANTEES."""

    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"
    AT_MOST_ONCE = "at-most-once"


class ToxicType(StrEnum):
    """harness.net.toxics.ATTRIBUTES: what Toxiproxy (the real one and the built-in) offers."""

    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    SLOW_CLOSE = "slow_close"
    TIMEOUT = "timeout"
    RESET_PEER = "reset_peer"
    SLICER = "slicer"
    LIMIT_DATA = "limit_data"
    NOOP = "noop"


class Stream(StrEnum):
    """Which bytes of a link a toxic acts on."""

    UP = "up"
    DOWN = "down"


class ConsumerMode(StrEnum):
    """harness.workload.consumer.MODES."""

    GROUP = "group"
    ASSIGN = "assign"


class CommitStrategy(StrEnum):
    """harness.workload.consumer.COMMITS: when a group consumer commits, around processing."""

    AUTO = "auto"
    AFTER = "after"
    BEFORE = "before"


class Acks(StrEnum):
    """The producers' ``acks`` (``-1`` is Kafka's other spelling of ``all``)."""

    NONE = "0"
    LEADER = "1"
    ALL = "all"
    ALL_NUMERIC = "-1"


class Engine(StrEnum):
    """harness.run.runner.ENGINES: which checker judges a run's history."""

    AUTO = "auto"
    SPARK = "spark"
    PYTHON = "python"


BOOTSTRAP_SERVER_HELP = "Bootstrap servers HOST:PORT[,...] of an external target, as Kafka's " \
                        "own tools take them."
DEPRECATED_BOOTSTRAP = "--bootstrap"


def bootstrap_server(given: str | None, deprecated: str | None,
                     console: Console | None = None) -> str | None:
    """``--bootstrap-server``, or the first release's ``--bootstrap`` with a note on stderr
    (kept one release so scripts keep working while they are changed)."""
    if deprecated is None:
        return given
    if given is not None:
        raise UsageError("--bootstrap and --bootstrap-server given together; --bootstrap is "
                         "the old name of --bootstrap-server")
    (console or Console(stderr=True)).print(
        "note: --bootstrap is deprecated and will be removed in the next release; use "
        "--bootstrap-server", highlight=False, soft_wrap=True)
    return deprecated
