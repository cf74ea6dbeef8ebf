"""The conventions of the `kafka-harness` command line that need no cluster: --version, choices
shown in --help and refused by the parser, one exit code per kind of error, quoted link names,
the deprecated --bootstrap spelling."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import typing
from collections.abc import Iterator
from enum import Enum
from importlib import metadata
from pathlib import Path

import pytest
from rich.console import Console
from typer.main import get_command
from typer.testing import CliRunner

from harness import errors
from harness.checker.result import GUARANTEES
from harness.cli import app, control, exits
from harness.cli.options import (
    CommitStrategy,
    ConsumerMode,
    Engine,
    Guarantee,
    ToxicType,
    bootstrap_server,
)
from harness.conformance.matrix import SUITES, MatrixError
from harness.errors import ExitCode, HarnessError, InfrastructureError, UsageError
from harness.nemesis.schedule import FAULTS
from harness.net.toxics import ATTRIBUTES
from harness.run import runner
from harness.supervisor.control import NoCluster
from harness.workload.consumer import COMMITS, MODES

KAFKA_HARNESS = str(Path(sys.executable).parent / "kafka-harness")

# The options that take free text (an address, a path, an expression, a name), by command.
# Anything else typed str is a choice option checked by hand: it must become an Enum.
FREE_TEXT = {
    ("check", "master"), ("up", "bootstrap_server"), ("up", "bootstrap"),
    ("run", "master"), ("matrix", "bootstrap_server_"), ("matrix", "bootstrap"),
    ("matrix", "keyword"), ("toxic add", "link"), ("toxic add", "attr"), ("toxic add", "name"),
    ("toxic remove", "link"), ("toxic remove", "name"),
    *((command, "node") for command in ("kill", "pause", "resume", "stop", "restart",
                                        "lose-unflushed", "partition isolate", "disk full",
                                        "disk errors", "disk heal")),
}
# Comma-separated lists of a fixed set: they stay text, and their help lists every value.
COMMA_LISTS = {("run", "nemesis"): tuple(FAULTS), ("run", "suites"): runner.SUITES,
               ("matrix", "suites"): SUITES,
               ("matrix", "targets"): ("reference", "apache-kafka", "apache-kafka-kraft",
                                       "tansu", "kfake", "librdkafka-mock", "external")}


def _commands() -> Iterator[tuple[str, typing.Any]]:
    def walk(command: typing.Any, path: tuple[str, ...]) -> Iterator[tuple[str, typing.Any]]:
        subcommands = getattr(command, "commands", {})
        for name, sub in subcommands.items():
            yield from walk(sub, (*path, name))
        if not subcommands:
            yield " ".join(path), command

    yield from walk(get_command(app), ())


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_version_prints_the_installed_distribution_version():
    result = subprocess.run([KAFKA_HARNESS, "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"kafka-harness {metadata.version('kafka-harness')}"


def test_every_choice_option_is_an_enum_shown_in_help():
    """A str option outside FREE_TEXT and COMMA_LISTS is a choice checked by hand: refused."""
    checked = 0
    for name, command in _commands():
        hints = typing.get_type_hints(command.callback)
        hints.pop("return", None)
        for parameter, annotation in hints.items():
            kinds = [k for k in typing.get_args(annotation) or (annotation,) if k is not None]
            text = [k for k in kinds if k is str or typing.get_origin(k) is list]
            if text:
                assert (name, parameter) in FREE_TEXT | set(COMMA_LISTS), (
                    f"`{name}` takes --{parameter} as plain text: an Enum shows and checks "
                    f"its choices")
            enums = [k for k in kinds if isinstance(k, type) and issubclass(k, Enum)]
            if enums:
                shown = _help(*name.split())
                missing = [m.value for m in enums[0] if m.value not in shown]
                assert not missing, f"`{name} --help` does not list {missing}"
                checked += 1
    assert checked >= 12  # guarantee ×2, target ×2, network ×2, backend ×3, stream, type, run's


def test_comma_list_options_name_every_allowed_value_in_their_help():
    for (name, _parameter), allowed in COMMA_LISTS.items():
        shown = _help(name)
        assert [value for value in allowed if value not in shown] == [], name


def test_the_enums_are_the_library_tables():
    assert {g.value for g in Guarantee} == set(GUARANTEES)
    assert {t.value for t in ToxicType} == set(ATTRIBUTES)
    assert {m.value for m in ConsumerMode} == set(MODES)
    assert {c.value for c in CommitStrategy} == set(COMMITS)
    assert {e.value for e in Engine} == set(runner.ENGINES)


@pytest.mark.parametrize("args, allowed", [
    (["run", "--consumer-mode", "sideways"], ["group", "assign"]),
    (["run", "--acks", "2"], ["0", "1", "all"]),
    (["matrix", "--backend", "vm"], ["local", "docker"]),
])
def test_a_value_outside_the_choices_exits_2_naming_them(args, allowed):
    result = subprocess.run([KAFKA_HARNESS, *args], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == ExitCode.USAGE
    assert all(value in result.stderr for value in allowed), result.stderr


def test_the_help_names_the_exit_codes():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "400"})
    shown = " ".join(result.output.split())
    assert "--version" in shown
    assert all(f"{int(code)} " in shown.split("Exit codes:")[1] for code in ExitCode)


def test_each_error_kind_carries_its_exit_code():
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 130]
    assert errors.CommandFailed("x").exit_code is ExitCode.FAILED
    assert UsageError("x").exit_code is ExitCode.USAGE
    assert InfrastructureError("x").exit_code is ExitCode.INFRASTRUCTURE
    assert MatrixError("x").exit_code is ExitCode.USAGE


def test_report_prints_one_line_and_returns_the_code_and_reraises_bugs():
    console = Console(record=True, width=40, soft_wrap=True)
    code = exits.report(UsageError("a long message that does not fit in forty columns",
                                        hint="do this"), console)
    assert code is ExitCode.USAGE
    assert console.export_text() == ("error: a long message that does not fit in forty "
                                     "columns (do this)\n")
    assert exits.report(NoCluster("no cluster running in /x"), console) \
        is ExitCode.INFRASTRUCTURE
    assert "(start one with `kafka-harness up`)" in console.export_text()
    with pytest.raises(KeyError):
        exits.report(KeyError("a bug keeps its traceback"), console)


def test_main_turns_a_harness_error_into_its_exit_code(capsys):
    def failing() -> None:
        raise InfrastructureError("the broker would not start")

    with pytest.raises(SystemExit) as exited:
        exits.run_main(failing)
    assert exited.value.code == ExitCode.INFRASTRUCTURE
    assert "error: the broker would not start" in capsys.readouterr().err
    assert issubclass(InfrastructureError, HarnessError)


def test_down_with_nothing_running_exits_0_and_says_so(tmp_path):
    result = subprocess.run([KAFKA_HARNESS, "down", "--dir", str(tmp_path / "none")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"nothing running in {tmp_path / 'none'}"


def test_link_names_are_shown_as_a_shell_reads_them_back():
    assert control.shown("client->broker-1") == "'client->broker-1'"
    assert control.shown("broker-1") == "broker-1"
    shown = control.shown_pairs([["broker-1", "broker-2"], ["broker-2", "zk"]])
    assert shown == "'broker-1->broker-2', 'broker-2->zk'"
    assert shlex.split(shown.replace(",", "")) == ["broker-1->broker-2", "broker-2->zk"]


def test_bootstrap_is_a_deprecated_spelling_of_bootstrap_server():
    console = Console(record=True, width=200)
    assert bootstrap_server("h:1", None, console) == "h:1"
    assert console.export_text() == ""
    assert bootstrap_server(None, "h:2", console) == "h:2"
    assert "--bootstrap is deprecated" in console.export_text()
    with pytest.raises(UsageError, match="given together"):
        bootstrap_server("h:1", "h:2", console)


def test_matrix_and_up_show_bootstrap_server_and_hide_the_old_name():
    for command in ("matrix", "up"):
        shown = _help(command)
        assert "--bootstrap-server" in shown
        assert "--bootstrap " not in shown.replace("--bootstrap-server", "")


def test_a_usage_error_with_json_still_answers_json_on_stdout():
    result = subprocess.run([KAFKA_HARNESS, "run", "--nemesis", "explode", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == ExitCode.USAGE
    answer = json.loads(result.stdout)
    assert answer["schema_version"] == 1 and answer["exit_code"] == 2
    assert "unknown nemesis fault(s) explode" in answer["error"]
