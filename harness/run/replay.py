"""The ``kafka-harness run`` command line that repeats a run: its seed and every option, spelt
out.

Every option is written even when it has its default, so the command repeats the run also after
a default changes. Two are left out on purpose: ``--dir`` (a replay writes a run directory of its
own, and reusing the first would mix two histories) and ``--json`` (how the verdict is printed).
Options a run can have that the command line cannot express (a fixed nemesis schedule, static
members, compression, another topic name: those come from library callers such as the failover
suite) are returned as caveats, so a report says the command is not an exact replay instead of
pretending it is. tests/checker/test_report_contents.py parses the command with the real CLI and
compares the options it builds with the run's.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # RunOptions, without importing the runner: it imports this module
    from _typeshed import DataclassInstance as RunOptions

PROGRAM = "kafka-harness"
# RunOptions fields that the command line does not take, with what a replay then lacks.
_NOT_ON_THE_COMMAND_LINE = {
    "topic": "the workload topic is named {value!r}; the command line always uses 'workload'",
    "compression": "the producers compressed with {value}; the command line cannot set it",
    "schedule": "the nemesis followed a fixed schedule, not one planned from the seed; the "
                "command line plans from the seed",
    "static_members": "the consumers were static members (KIP-345); the command line cannot "
                      "make them so",
}
_LEFT_OUT = frozenset({"run_dir"})


def _number(value: float) -> str:
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _flag(name: str, value: object) -> list[str]:
    """The command-line words for one RunOptions field."""
    option = "--" + name.removesuffix("_s").replace("_", "-")
    if isinstance(value, bool):  # typer's --x/--no-x switches
        return [option if value else "--no-" + option.removeprefix("--")]
    if name in ("nemesis", "suites"):
        assert isinstance(value, tuple)
        return [option, ",".join(value) or "none"]
    if name in ("master", "recipe"):
        return [] if value is None else [option, str(value)]
    if isinstance(value, float):
        return [option, _number(value)]
    return [option, str(value)]


def replay_command(options: RunOptions, seed: int) -> tuple[list[str], list[str]]:
    """(argv of ``kafka-harness run`` repeating a run of ``options`` (harness.run.runner.RunOptions)
    with ``seed``, the caveats
    saying what it cannot repeat; none when it repeats the run exactly)."""
    argv = [PROGRAM, "run"]
    caveats = []
    for spec in fields(options):
        value = getattr(options, spec.name)
        if spec.name in _LEFT_OUT:
            continue
        if spec.name == "seed":
            argv += ["--seed", str(seed)]
        elif spec.name == "target" and getattr(options, "recipe", None):
            continue  # --recipe says it
        elif spec.name in _NOT_ON_THE_COMMAND_LINE:
            if spec.default is MISSING or value != spec.default:
                caveats.append(_NOT_ON_THE_COMMAND_LINE[spec.name].format(value=value))
        else:
            argv += _flag(spec.name, value)
    return argv, caveats
