"""Recipes: a broker kind described in a small TOML file instead of a Python module.

Users who build a Kafka-compatible broker want the harness to run N of *their* brokers behind
its network mechanism and fault them as it faults the built-in kinds. A recipe says what the
harness cannot guess — the command that starts one node, the configuration file it reads (a
template with placeholders for the wiring the harness decides: ports, advertised address, how
to reach each peer, ZooKeeper, the data dir), how to tell that the node serves, how to stop it,
whether it needs ZooKeeper, and which capabilities it claims — and
:class:`~harness.cluster.recipe_kind.RecipeKind` turns it into a
:class:`~harness.cluster.kinds.BrokerKind`, so the factory, the backends, the faults and the
suites need nothing new. The format, every key and every placeholder are in ``docs/recipes.md``.

This module only parses, validates and renders: every mistake is found when the file is loaded,
before anything starts, and named as ``<file>: <key>: <problem>`` — a typo in a placeholder
must not surface as a broker that fails to start three minutes into a suite.

Honesty of the faults is checked too: a recipe that claims ``faults`` (pair-exact link faults)
must show the harness how its node is told the per-pair addresses (see :class:`PeerAddressing`);
one that cannot dial peers per source gets no such claim accepted.
"""

from __future__ import annotations

import re
import string
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TypeVar

from harness.cluster.kinds import Capability
from harness.vendor import vendor_dir

_E = TypeVar("_E", bound=StrEnum)

RECIPE_PACKAGE = "harness.recipes"
"""Where the recipes shipped with the harness live (package data: they are in the wheel)."""


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the file and the key."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        super().__init__(f"{source}: {key}: {problem}")
        self.source = source
        self.key = key
        self.problem = problem


class PeerAddressing(StrEnum):
    """How a node is told where its peers are, which decides how fine link faults can be.

    A Toxiproxy proxy sees connections, not senders, so a fault on ``broker-1 -> broker-3``
    alone needs broker 1 to dial broker 3 at an address only broker 1 uses.
    """

    PER_DESTINATION = "per-destination"
    """The node is told, per peer, the address to dial it at (``{dial}`` in a peer list), as the
    reference broker's ``broker.peer.addresses``: every broker-to-broker link is its own proxy."""
    LISTENER_PER_SOURCE = "listener-per-source"
    """The node listens once per source peer (``{inbound_port}``) and advertises each of those
    listeners at the address that source must dial (``{dialled_at}``), as Apache Kafka's
    listener per peer with ``inter.broker.listener.name``: every link is its own proxy."""
    ADVERTISED = "advertised"
    """The node dials each peer at the one address that peer advertises, its client address:
    a peer's connections share the ``client->broker-J`` proxy with the clients', the
    ``broker-I->broker-J`` proxies carry nothing, so pair-exact faults (``faults``) cannot be
    claimed; process faults, and toxics or cuts of everything arriving at a broker, remain."""


class ReadyCheck(StrEnum):
    """How the harness tells that a node it started serves."""

    KAFKA_METADATA = "kafka-metadata"  # a Kafka client's Metadata request names a broker
    API_VERSIONS = "api-versions"      # the client port answers ApiVersions without an error
    PORT = "port"                      # the client port accepts TCP connections
    LOG_LINE = "log-line"              # a line of the node's log matches ``ready.log_line``


class Placeholder(StrEnum):
    """What a recipe's command, files, stop command and environment may name as ``{name}``."""

    NODE_ID = "node_id"
    BROKER_COUNT = "broker_count"
    HOST = "host"
    CLIENT_PORT = "client_port"
    ADVERTISED = "advertised"
    ADVERTISED_HOST = "advertised_host"
    ADVERTISED_PORT = "advertised_port"
    ZOOKEEPER_CONNECT = "zookeeper_connect"
    RUN_DIR = "run_dir"
    DATA_DIR = "data_dir"
    CONFIG_FILE = "config_file"
    PROPERTIES = "properties"
    PYTHON = "python"
    RECIPE_DIR = "recipe_dir"
    VENDOR_DIR = "vendor_dir"
    PID = "pid"


class PeerPlaceholder(StrEnum):
    """What a peer list's ``entry`` may name, once per peer, besides the node's placeholders."""

    PEER_ID = "peer_id"
    DIAL = "dial"
    DIAL_HOST = "dial_host"
    DIAL_PORT = "dial_port"
    INBOUND_PORT = "inbound_port"
    DIALLED_AT = "dialled_at"
    DIALLED_AT_HOST = "dialled_at_host"
    DIALLED_AT_PORT = "dialled_at_port"


WIRING_PLACEHOLDERS = frozenset({
    Placeholder.NODE_ID, Placeholder.BROKER_COUNT, Placeholder.HOST, Placeholder.CLIENT_PORT,
    Placeholder.ADVERTISED, Placeholder.ADVERTISED_HOST, Placeholder.ADVERTISED_PORT,
    Placeholder.ZOOKEEPER_CONNECT})
"""The placeholders the network around a node decides (known when the cluster is wired)."""

_ONLY_IN_FILES = frozenset({Placeholder.PROPERTIES})
_ONLY_IN_STOP = frozenset({Placeholder.PID})
_PER_DESTINATION_USES = frozenset({PeerPlaceholder.DIAL, PeerPlaceholder.DIAL_HOST,
                                   PeerPlaceholder.DIAL_PORT})
_DIALLED_AT_USES = frozenset({PeerPlaceholder.DIALLED_AT, PeerPlaceholder.DIALLED_AT_HOST,
                              PeerPlaceholder.DIALLED_AT_PORT})
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_LIST_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class PeerList:
    """A placeholder ``{name}`` rendered as one ``entry`` per broker, joined by ``separator``."""

    name: str
    entry: str
    separator: str = ","
    include_self: bool = True


@dataclass(frozen=True)
class Recipe:
    """One broker kind, as a recipe file describes it (see the module doc)."""

    source: str
    name: str
    command: tuple[str, ...]
    config_file: str
    config_template: str
    zookeeper: bool
    peer_addressing: PeerAddressing
    capabilities: frozenset[Capability]
    version: str = "unknown"
    files: Mapping[str, str] = field(default_factory=dict)
    ready: ReadyCheck = ReadyCheck.KAFKA_METADATA
    ready_log_line: re.Pattern[str] | None = None
    stop_command: tuple[str, ...] = ()
    clean_exit_codes: frozenset[int] = frozenset({0})
    env: Mapping[str, str] = field(default_factory=dict)
    peer_lists: Mapping[str, PeerList] = field(default_factory=dict)
    directory: Path | None = None

    @property
    def listener_per_peer(self) -> bool:
        return self.peer_addressing is PeerAddressing.LISTENER_PER_SOURCE

    def templates(self) -> dict[str, str]:
        """Every file the node gets, by name, the configuration file first."""
        return {self.config_file: self.config_template, **self.files}


# --- rendering ----------------------------------------------------------------------------------

def placeholders(template: str, source: str = "<template>", key: str = "template") -> set[str]:
    """The ``{name}`` fields of ``template``; RecipeError for anything but plain names
    (``{{`` and ``}}`` are literal braces)."""
    names: set[str] = set()
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise RecipeError(source, key, f"{exc} (write a literal brace as {{{{ or }}}})") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name or spec or conversion or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            shown = "{" + name + (f"!{conversion}" if conversion else "")
            shown += (f":{spec}" if spec else "") + "}"
            raise RecipeError(source, key, f"{shown} is not a placeholder: write {{name}} with "
                                           f"a plain name, or {{{{ }}}} for literal braces")
        names.add(name)
    return names


def render(template: str, values: Mapping[str, str | int], *, source: str = "<template>",
           key: str = "template") -> str:
    """``template`` with every placeholder replaced; RecipeError naming one it has no value for
    (the loader has checked the names, so this means a value the harness forgot)."""
    missing = sorted(placeholders(template, source, key) - set(values))
    if missing:
        raise RecipeError(source, key, f"no value for {{{missing[0]}}} here")
    return template.format_map({name: str(value) for name, value in values.items()})


def render_peer_list(peer_list: PeerList, node_values: Mapping[str, str | int],
                     peers: Mapping[int, Mapping[str, str | int]], node_id: int) -> str:
    """A peer list for one node: ``entry`` rendered for each peer (by id), joined."""
    entries = [render(peer_list.entry, {**node_values, **values}, key=f"lists.{peer_list.name}")
               for peer_id, values in sorted(peers.items())
               if peer_list.include_self or peer_id != node_id]
    return peer_list.separator.join(entries)


# --- loading ------------------------------------------------------------------------------------

def load_recipe(path: Path | str) -> Recipe:
    """The recipe in ``path``; RecipeError naming the file and the key for a bad one."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise RecipeError(str(path), "(file)", f"cannot read it: {exc.strerror or exc}") from None
    return parse_recipe(text, str(path), directory=path.resolve().parent)


def builtin_recipe_names() -> list[str]:
    """The recipes shipped with the harness (``harness/recipes/<name>.toml``)."""
    return sorted(entry.name.removesuffix(".toml")
                  for entry in resources.files(RECIPE_PACKAGE).iterdir()
                  if entry.name.endswith(".toml"))


def builtin_recipe(name: str) -> Recipe:
    """A recipe shipped with the harness, read as package data (so it works from a wheel)."""
    entry = resources.files(RECIPE_PACKAGE).joinpath(f"{name}.toml")
    if not entry.is_file():
        raise RecipeError(f"{RECIPE_PACKAGE}/{name}.toml", "(file)",
                          f"no such shipped recipe; there are {builtin_recipe_names()}")
    with resources.as_file(entry) as path:
        return parse_recipe(entry.read_text(), f"{RECIPE_PACKAGE}/{name}.toml",
                            directory=path.parent)


def parse_recipe(text: str, source: str = "<recipe>", *, directory: Path | None = None) -> Recipe:
    """A recipe from TOML text; ``source`` names it in errors, ``directory`` is ``{recipe_dir}``."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(source, "(syntax)", str(exc)) from None
    return _Reader(source, document, directory).recipe()


class _Reader:
    """Reads one parsed document into a :class:`Recipe`, naming the key of every mistake."""

    _TABLES = {"broker", "config", "ready", "lists", "files"}
    _BROKER_KEYS = {"name", "version", "command", "stop_command", "zookeeper", "peer_addressing",
                    "capabilities", "clean_exit_codes", "env"}

    def __init__(self, source: str, document: Mapping[str, object],
                 directory: Path | None) -> None:
        self.source = source
        self.document = document
        self.directory = directory

    def fail(self, key: str, problem: str) -> RecipeError:
        return RecipeError(self.source, key, problem)

    def recipe(self) -> Recipe:
        self._only(self.document, self._TABLES, "")
        broker = self._table("broker", required=True)
        self._only(broker, self._BROKER_KEYS, "broker.")
        config = self._table("config", required=True)
        self._only(config, {"file", "template"}, "config.")
        ready = self._table("ready", required=False)
        self._only(ready, {"check", "log_line"}, "ready.")
        check = self._enum(ready, "check", "ready.", ReadyCheck, ReadyCheck.KAFKA_METADATA)
        log_line = self._log_line(ready, check)
        peer_lists = self._peer_lists()
        recipe = Recipe(
            source=self.source,
            name=self._name(broker),
            version=self._str(broker, "version", "broker.", default="unknown"),
            command=self._argv(broker, "command", required=True),
            stop_command=self._argv(broker, "stop_command", required=False),
            config_file=self._file_name(self._str(config, "file", "config."), "config.file"),
            config_template=self._str(config, "template", "config."),
            files=self._files(),
            zookeeper=self._bool(broker, "zookeeper", "broker."),
            peer_addressing=self._enum(broker, "peer_addressing", "broker.", PeerAddressing),
            capabilities=self._capabilities(broker),
            clean_exit_codes=self._exit_codes(broker),
            env=self._env(broker),
            ready=check,
            ready_log_line=log_line,
            peer_lists=peer_lists,
            directory=self.directory)
        self._check_placeholders(recipe)
        self._check_claims(recipe)
        return recipe

    # --- tables and values -------------------------------------------------------------------

    def _only(self, table: Mapping[str, object], allowed: set[str], prefix: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(f"{prefix}{unknown[0]}",
                            f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    def _table(self, name: str, *, required: bool) -> Mapping[str, object]:
        value = self.document.get(name)
        if value is None:
            if required:
                raise self.fail(name, "missing table")
            return {}
        if not isinstance(value, dict):
            raise self.fail(name, f"must be a table ([{name}]), got {type(value).__name__}")
        return value

    def _str(self, table: Mapping[str, object], key: str, prefix: str, *,
             default: str | None = None) -> str:
        value = table.get(key, default)
        if value is None:
            raise self.fail(f"{prefix}{key}", "missing")
        if not isinstance(value, str) or not value:
            raise self.fail(f"{prefix}{key}", f"must be a non-empty string, got {value!r}")
        return value

    def _bool(self, table: Mapping[str, object], key: str, prefix: str) -> bool:
        value = table.get(key)
        if not isinstance(value, bool):
            raise self.fail(f"{prefix}{key}", "missing" if value is None
                            else f"must be true or false, got {value!r}")
        return value

    def _enum(self, table: Mapping[str, object], key: str, prefix: str,
              enum: type[_E], default: _E | None = None) -> _E:
        value = table.get(key, default)
        allowed = ", ".join(member.value for member in enum)
        if value is None:
            raise self.fail(f"{prefix}{key}", f"missing; one of {allowed}")
        if not isinstance(value, str):
            raise self.fail(f"{prefix}{key}", f"must be a string, one of {allowed}")
        try:
            return enum(value)
        except ValueError:
            raise self.fail(f"{prefix}{key}", f"{value!r} is not one of {allowed}") from None

    def _name(self, broker: Mapping[str, object]) -> str:
        name = self._str(broker, "name", "broker.")
        if not _NAME.match(name):
            raise self.fail("broker.name", f"{name!r} must be lower-case letters, digits, '.', "
                                           f"'_' or '-' (it names the nodes' log files)")
        return name

    def _argv(self, broker: Mapping[str, object], key: str, *,
              required: bool) -> tuple[str, ...]:
        value = broker.get(key)
        if value is None and not required:
            return ()
        if (not isinstance(value, list) or not value
                or not all(isinstance(arg, str) and arg for arg in value)):
            raise self.fail(f"broker.{key}", "missing" if value is None else
                            "must be a non-empty list of non-empty strings (an argv, no shell)")
        return tuple(value)

    def _file_name(self, name: str, key: str) -> str:
        if "/" in name or name in (".", "..") or name.startswith("."):
            raise self.fail(key, f"{name!r} must be a plain file name (written in the node's "
                                 f"run directory)")
        return name

    def _files(self) -> dict[str, str]:
        files = self._table("files", required=False)
        rendered: dict[str, str] = {}
        for name, text in files.items():
            self._file_name(name, f"files.{name}")
            if not isinstance(text, str):
                raise self.fail(f"files.{name}", "must be a string (the file's template)")
            rendered[name] = text
        return rendered

    def _log_line(self, ready: Mapping[str, object], check: ReadyCheck) -> re.Pattern[str] | None:
        pattern = ready.get("log_line")
        if check is not ReadyCheck.LOG_LINE:
            if pattern is not None:
                raise self.fail("ready.log_line", f"only used with check = "
                                                  f"\"{ReadyCheck.LOG_LINE}\", not \"{check}\"")
            return None
        if not isinstance(pattern, str) or not pattern:
            raise self.fail("ready.log_line", "missing: the regular expression a line of the "
                                              "node's log matches once it serves")
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise self.fail("ready.log_line", f"not a regular expression: {exc}") from None

    def _capabilities(self, broker: Mapping[str, object]) -> frozenset[Capability]:
        value = broker.get("capabilities")
        allowed = ", ".join(c.value for c in Capability)
        if not isinstance(value, list):
            raise self.fail("broker.capabilities", f"missing: a list of what the broker can do, "
                                                   f"from {allowed} (may be empty)")
        claimed: set[Capability] = set()
        for item in value:
            try:
                claimed.add(Capability(item))
            except ValueError:
                raise self.fail("broker.capabilities",
                                f"{item!r} is not a capability; one of {allowed}") from None
        return frozenset(claimed)

    def _exit_codes(self, broker: Mapping[str, object]) -> frozenset[int]:
        value = broker.get("clean_exit_codes", [0])
        if (not isinstance(value, list) or not value
                or not all(isinstance(code, int) and not isinstance(code, bool)
                           for code in value)):
            raise self.fail("broker.clean_exit_codes", f"must be a non-empty list of integers, "
                                                       f"got {value!r}")
        return frozenset(value)

    def _env(self, broker: Mapping[str, object]) -> dict[str, str]:
        value = broker.get("env", {})
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.fail("broker.env", "must be a table of strings (NAME = \"value\")")
        return dict(value)

    def _peer_lists(self) -> dict[str, PeerList]:
        lists: dict[str, PeerList] = {}
        for name, table in self._table("lists", required=False).items():
            key = f"lists.{name}"
            if not _LIST_NAME.match(name):
                raise self.fail(key, "a list's name must be lower-case letters, digits and '_'")
            if name in set(Placeholder) or name in set(PeerPlaceholder):
                raise self.fail(key, f"{name!r} is a placeholder of the harness already")
            if not isinstance(table, dict):
                raise self.fail(key, "must be a table with entry (and separator, include_self)")
            self._only(table, {"entry", "separator", "include_self"}, f"{key}.")
            separator = table.get("separator", ",")
            if not isinstance(separator, str):
                raise self.fail(f"{key}.separator", f"must be a string, got {separator!r}")
            include_self = table.get("include_self", True)
            if not isinstance(include_self, bool):
                raise self.fail(f"{key}.include_self", "must be true or false")
            lists[name] = PeerList(name, self._str(table, "entry", f"{key}."), separator,
                                   include_self)
        return lists

    # --- cross-checks ------------------------------------------------------------------------

    def _check_placeholders(self, recipe: Recipe) -> None:
        """Every ``{name}`` anywhere must be one the harness fills where it is used."""
        node = {p.value for p in Placeholder} - _ONLY_IN_FILES - _ONLY_IN_STOP
        lists = set(recipe.peer_lists)
        where: list[tuple[str, str, set[str]]] = []
        where += [(f"broker.command[{i}]", arg, node | lists)
                  for i, arg in enumerate(recipe.command)]
        where += [(f"broker.stop_command[{i}]", arg, node | lists | _ONLY_IN_STOP)
                  for i, arg in enumerate(recipe.stop_command)]
        where += [(f"broker.env.{name}", value, node | lists) for name, value in recipe.env.items()]
        where.append(("config.template", recipe.config_template, node | lists | _ONLY_IN_FILES))
        where += [(f"files.{name}", text, node | lists | _ONLY_IN_FILES)
                  for name, text in recipe.files.items()]
        peer = {p.value for p in PeerPlaceholder}
        where += [(f"lists.{name}.entry", peer_list.entry, node | peer)
                  for name, peer_list in recipe.peer_lists.items()]
        for key, template, allowed in where:
            unknown = sorted(placeholders(template, self.source, key) - allowed)
            if unknown:
                raise self.fail(key, f"unknown placeholder {{{unknown[0]}}}; allowed here: "
                                     f"{', '.join(sorted(allowed))}")

    def _check_claims(self, recipe: Recipe) -> None:
        """Capabilities the recipe's wiring cannot deliver, and wiring it does not use."""
        caps = recipe.capabilities
        if Capability.QUORUM in caps:
            raise self.fail("broker.capabilities", "claims quorum, but a recipe wires no KRaft "
                                                   "controller quorum (apache-kafka-kraft does)")
        if Capability.ZOOKEEPER in caps and not recipe.zookeeper:
            raise self.fail("broker.capabilities", "claims zookeeper, but broker.zookeeper is "
                                                   "false: there is no ZooKeeper to read")
        used = self._peer_placeholders_used(recipe)
        addressing = recipe.peer_addressing
        if addressing is PeerAddressing.ADVERTISED:
            if Capability.FAULTS in caps:
                raise self.fail("broker.capabilities", (
                    "claims faults, but peer_addressing = \"advertised\": a peer's connections "
                    "then share its client proxy, so a link between two brokers cannot be cut "
                    "alone (use per-destination or listener-per-source)"))
        elif addressing is PeerAddressing.PER_DESTINATION and not used & _PER_DESTINATION_USES:
            raise self.fail("broker.peer_addressing", (
                "per-destination needs a peer list the node reads whose entry names {dial} "
                "(or {dial_host}/{dial_port}): the address at which to reach each peer"))
        elif addressing is PeerAddressing.LISTENER_PER_SOURCE and not (
                PeerPlaceholder.INBOUND_PORT in used and used & _DIALLED_AT_USES):
            raise self.fail("broker.peer_addressing", (
                "listener-per-source needs peer lists the node reads naming {inbound_port} (a "
                "listener per source peer) and {dialled_at} (where that listener is advertised)"))
        if recipe.zookeeper and not self._node_placeholders_used(recipe) & {
                Placeholder.ZOOKEEPER_CONNECT.value, Placeholder.PROPERTIES.value}:
            raise self.fail("broker.zookeeper", "true, but neither {zookeeper_connect} nor "
                                                "{properties} is used: the node is never told "
                                                "where ZooKeeper is")

    @staticmethod
    def _node_templates(recipe: Recipe) -> Iterable[str]:
        yield from recipe.command
        yield from recipe.env.values()
        yield from recipe.templates().values()

    def _node_placeholders_used(self, recipe: Recipe) -> set[str]:
        names: set[str] = set()
        for template in self._node_templates(recipe):
            names |= placeholders(template, self.source)
        return names

    def _peer_placeholders_used(self, recipe: Recipe) -> set[str]:
        """Peer placeholders of the lists the node actually reads."""
        read = self._node_placeholders_used(recipe)
        names: set[str] = set()
        for name, peer_list in recipe.peer_lists.items():
            if name in read:
                names |= placeholders(peer_list.entry, self.source)
        return names


def static_values(recipe: Recipe) -> dict[str, str]:
    """The placeholders that do not depend on the node: the harness's Python, the recipe's
    directory, the vendor directory."""
    return {Placeholder.PYTHON.value: sys.executable,
            Placeholder.RECIPE_DIR.value: str(recipe.directory or Path.cwd()),
            Placeholder.VENDOR_DIR.value: str(vendor_dir())}
