"""The run manifest: how a history was made, kept next to it so a report can say how to make it
again.

A history alone does not say which seed drove the nemesis or which options the workload had, and
without those a failing run cannot be replayed. ``kafka-harness run`` therefore writes
``run-manifest.json`` into the history directory (the checker reads only ``*.parquet`` and
``*.jsonl`` there, so the manifest is not mistaken for history): the seed, the options, the exact
``kafka-harness run`` command line that repeats the run, and what the nemesis reported doing.
``kafka-harness check`` reads it when it is there; when it is not, the report says the seed is
unknown rather than guessing one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeAlias

from harness.checker.result import SCHEMA_VERSION

FILE_NAME = "run-manifest.json"

JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"


@dataclass(frozen=True)
class NemesisAccount:
    """What the harness's nemesis said one of its operations did (e.g. which broker a role
    resolved to, how many links were cut, how many offsets a lost tail held), which the
    history's rows do not carry."""

    what: str
    result: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunManifest:
    run_id: str
    seed: int
    seed_given: bool  # False: the run chose the seed at random
    options: dict[str, JsonValue]
    replay: list[str]  # argv of the command that repeats the run: kafka-harness run ...
    # Why the replay command does not repeat the run exactly (options it cannot express).
    replay_caveats: list[str] = field(default_factory=list)
    nemesis: list[NemesisAccount] = field(default_factory=list)

    def to_json(self) -> dict[str, JsonValue]:
        body: dict[str, JsonValue] = json.loads(json.dumps(asdict(self)))
        return {"schema_version": SCHEMA_VERSION, **body}


@dataclass(frozen=True)
class Provenance:
    """The manifest of a history, or why there is none."""

    manifest: RunManifest | None
    problem: str | None = None


NO_MANIFEST = Provenance(None, "no run manifest was given with the history")


def write(history_dir: Path, manifest: RunManifest) -> Path:
    """Write (or replace) the manifest in ``history_dir``, whole or not at all."""
    path = history_dir / FILE_NAME
    tmp = path.with_name(f".{FILE_NAME}.tmp")
    try:
        tmp.write_text(json.dumps(manifest.to_json(), indent=1), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _strings(value: object, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"'{name}' is not a list of strings")
    return value


def _parse(data: object) -> RunManifest:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r}; this harness reads {SCHEMA_VERSION}")
    seed, options, nemesis = data.get("seed"), data.get("options"), data.get("nemesis", [])
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError("'seed' is not an integer")
    if not isinstance(options, dict):
        raise ValueError("'options' is not an object")
    if not isinstance(nemesis, list) or not all(isinstance(n, dict) for n in nemesis):
        raise ValueError("'nemesis' is not a list of objects")
    return RunManifest(
        run_id=str(data.get("run_id", "")),
        seed=seed,
        seed_given=bool(data.get("seed_given", False)),
        options=options,
        replay=_strings(data.get("replay"), "replay"),
        replay_caveats=_strings(data.get("replay_caveats", []), "replay_caveats"),
        nemesis=[
            NemesisAccount(str(n.get("what", "")), n.get("result"), n.get("error"))
            for n in nemesis
        ],
    )


def read(history_dir: Path) -> Provenance:
    """The manifest next to a history; a missing or unreadable one is a Provenance without a
    manifest that says why, never an error: the check itself does not need it."""
    path = Path(history_dir) / FILE_NAME
    if not path.is_file():
        return Provenance(None, f"no {FILE_NAME} in {history_dir}: the history was not written "
                                f"by kafka-harness run, or its manifest was removed")
    try:
        return Provenance(_parse(json.loads(path.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Provenance(None, f"{path} cannot be read: {exc}")
