"""A broker kind made from a recipe (:mod:`harness.cluster.recipe`), and its node process.

The backends hand every kind a :class:`~harness.cluster.kinds.BrokerWiring` and get back the
kind's configuration as a property map (:meth:`BrokerKind.wiring_properties`), which they merge
with the cluster spec's settings and give to :meth:`BrokerKind.new_broker`. A recipe's node has
no fixed configuration keys, so :class:`RecipeKind` carries the wiring through that map as
reserved ``harness.recipe.*`` entries, and :class:`RecipeBroker` — which alone knows its run
directory — renders the recipe's files and command from them just before each start. Every
other entry is the spec's Kafka-style settings, offered to the recipe as ``{properties}``.

Docker is refused: the project image carries the built-in kinds, not a user's broker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from enum import Enum
from functools import partial
from pathlib import Path

from harness.cluster.errors import PeerStartError
from harness.cluster.kinds import BrokerWiring, Capability, ContainerLaunch, Wrap
from harness.cluster.peers import BrokerProcess, wait_until_serving, write_atomically
from harness.cluster.recipe import (
    PeerPlaceholder,
    Placeholder,
    ReadyCheck,
    Recipe,
    render,
    render_peer_list,
    static_values,
)
from harness.net.ports import is_accepting
from harness.raw_client import RawClient
from harness.waiting import ClusterWaitTimeout, wait_for

WIRING_PREFIX = "harness.recipe."
"""Property keys that carry a node's wiring to :class:`RecipeBroker`, not settings."""
_PEER_PREFIX = f"{WIRING_PREFIX}peer."
_STOP_COMMAND_TIMEOUT_S = 30.0


class DockerRefused(PeerStartError):
    """A recipe's broker asked to run in a container."""


def _split(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host, port


def wiring_values(wiring: BrokerWiring) -> dict[str, str | int]:
    """The reserved properties that carry ``wiring``: the node's wiring placeholders and, per
    peer ``j``, ``peer.<j>.<placeholder>``."""
    advertised_host, advertised_port = _split(wiring.advertised_client)
    node: dict[str, str | int] = {
        Placeholder.NODE_ID: wiring.broker_id,
        Placeholder.BROKER_COUNT: len(wiring.dial),
        Placeholder.HOST: wiring.host,
        Placeholder.CLIENT_PORT: wiring.ports.client,
        Placeholder.ADVERTISED: wiring.advertised_client,
        Placeholder.ADVERTISED_HOST: advertised_host,
        Placeholder.ADVERTISED_PORT: advertised_port,
        Placeholder.ZOOKEEPER_CONNECT: wiring.zookeeper_connect,
    }
    values = {f"{WIRING_PREFIX}{name}": value for name, value in node.items()}
    for peer in sorted(wiring.dial):
        dial_host, dial_port = _split(wiring.dial[peer])
        dialled_host, dialled_port = _split(wiring.dialled_at[peer])
        per_peer: dict[str, str | int] = {
            PeerPlaceholder.PEER_ID: peer,
            PeerPlaceholder.DIAL: wiring.dial[peer],
            PeerPlaceholder.DIAL_HOST: dial_host,
            PeerPlaceholder.DIAL_PORT: dial_port,
            PeerPlaceholder.INBOUND_PORT: wiring.ports.inbound[peer],
            PeerPlaceholder.DIALLED_AT: wiring.dialled_at[peer],
            PeerPlaceholder.DIALLED_AT_HOST: dialled_host,
            PeerPlaceholder.DIALLED_AT_PORT: dialled_port,
        }
        values.update({f"{_PEER_PREFIX}{peer}.{name}": value for name, value in per_peer.items()})
    return values


def split_properties(properties: Mapping[str, str | int]) -> tuple[
        dict[str, str | int], dict[int, dict[str, str | int]], dict[str, str | int]]:
    """(node wiring values, per-peer values by id, settings) out of a node's property map."""
    node: dict[str, str | int] = {}
    peers: dict[int, dict[str, str | int]] = {}
    settings: dict[str, str | int] = {}
    for key, value in properties.items():
        if key.startswith(_PEER_PREFIX):
            peer, _, name = key.removeprefix(_PEER_PREFIX).partition(".")
            peers.setdefault(int(peer), {})[name] = value
        elif key.startswith(WIRING_PREFIX):
            node[key.removeprefix(WIRING_PREFIX)] = value
        else:
            settings[key] = value
    return node, peers, settings


def node_values(recipe: Recipe, properties: Mapping[str, str | int],
                run_dir: Path) -> dict[str, str | int]:
    """Every placeholder's value for the node whose property map (wiring and settings) is
    ``properties`` and whose run directory is ``run_dir``; peer lists rendered, no ``{pid}``."""
    node, peers, settings = split_properties(properties)
    values: dict[str, str | int] = {
        **static_values(recipe), **node,
        Placeholder.RUN_DIR.value: str(run_dir),
        Placeholder.DATA_DIR.value: str(run_dir / "data"),
        Placeholder.CONFIG_FILE.value: str(run_dir / recipe.config_file),
        Placeholder.PROPERTIES.value: "".join(f"{k}={v}\n" for k, v in settings.items()),
    }
    node_id = int(node[Placeholder.NODE_ID])
    for name, peer_list in recipe.peer_lists.items():
        values[name] = render_peer_list(peer_list, values, peers, node_id)
    return values


def render_argv(recipe: Recipe, argv: tuple[str, ...], values: Mapping[str, str | int],
                key: str) -> list[str]:
    return [render(arg, values, source=recipe.source, key=f"{key}[{i}]")
            for i, arg in enumerate(argv)]


def render_command(recipe: Recipe, values: Mapping[str, str | int]) -> list[str]:
    """The node's argv; with ``broker.env``, run through ``env(1)`` (the process launcher
    passes the harness's own environment, so the recipe's variables go on the command)."""
    command = render_argv(recipe, recipe.command, values, "broker.command")
    if not recipe.env:
        return command
    env = [f"{name}={render(value, values, source=recipe.source, key=f'broker.env.{name}')}"
           for name, value in recipe.env.items()]
    return ["env", *env, *command]


def render_files(recipe: Recipe, values: Mapping[str, str | int]) -> dict[str, str]:
    """Each file of the node (the configuration file first) by name, rendered."""
    return {name: render(template, values, source=recipe.source,
                         key="config.template" if name == recipe.config_file else f"files.{name}")
            for name, template in recipe.templates().items()}


class _Readiness(Enum):
    SERVING = "serving"
    EXITED = "exited"


class RecipeBroker(BrokerProcess):
    """One node of a recipe's broker: its files rendered into its run directory before every
    start (so a restart reads what a first start read), its command run, its readiness checked
    the recipe's way, and its recipe's stop command (if any) asked first on a graceful stop."""

    def __init__(self, run_dir: Path | str | None = None, *, recipe: Recipe,
                 properties: Mapping[str, str | int], port: int | None = None,
                 startup_timeout: float = 60.0, stop_timeout: float = 20.0) -> None:
        super().__init__(run_dir, port=port, startup_timeout=startup_timeout,
                         stop_timeout=stop_timeout)
        self.recipe = recipe
        self.name = recipe.name
        self.properties = dict(properties)
        self._log_offset = 0

    @property
    def data_dir(self) -> Path:
        return self.run_dir / "data"

    @property
    def config_path(self) -> Path:
        return self.run_dir / self.recipe.config_file

    def values(self) -> dict[str, str | int]:
        """Every placeholder's value for this node (peer lists rendered), but ``{pid}``."""
        return node_values(self.recipe, self.properties, self.run_dir)

    def _command(self) -> list[str]:
        return render_command(self.recipe, self.values())

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for name, text in render_files(self.recipe, self.values()).items():
            write_atomically(self.run_dir / name, text)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0

    def _wait_until_serving(self) -> None:
        assert self.port is not None
        if self.recipe.ready is ReadyCheck.KAFKA_METADATA:
            wait_until_serving(self.host, self.port, timeout=self.startup_timeout,
                               still_running=self.is_running)
            return
        probe, what = self._probe()

        def ready() -> _Readiness | None:
            if not self.is_running():
                return _Readiness.EXITED
            return _Readiness.SERVING if probe() else None

        try:
            outcome = wait_for(ready, self.startup_timeout, what)
        except ClusterWaitTimeout as exc:
            raise PeerStartError(str(exc)) from exc
        if outcome is _Readiness.EXITED:
            raise PeerStartError(f"process exited before {what}")

    def _probe(self) -> tuple[Callable[[], bool], str]:
        """How to ask whether the node serves (a failing probe means "not yet"), and what is
        awaited, for the timeout's message."""
        assert self.port is not None
        address = f"{self.host}:{self.port}"
        if self.recipe.ready is ReadyCheck.PORT:
            return partial(is_accepting, self.host, self.port), f"{address} to accept connections"
        if self.recipe.ready is ReadyCheck.API_VERSIONS:
            return self._answers_api_versions, f"{address} to answer ApiVersions"
        assert self.recipe.ready_log_line is not None
        return (self._ready_line_logged,
                f"a line matching {self.recipe.ready_log_line.pattern!r} in {self.log_path}")

    def _answers_api_versions(self) -> bool:
        assert self.port is not None
        with RawClient(self.host, self.port, timeout=1.0, client_id="recipe-ready") as client:
            return bool(client.advertised())

    def _ready_line_logged(self) -> bool:
        """Whether this start's part of the log (not an earlier run's) has the ready line."""
        pattern = self.recipe.ready_log_line
        assert pattern is not None
        with open(self.log_path, "rb") as log:
            log.seek(self._log_offset)
            text = log.read().decode(errors="replace")
        return any(pattern.search(line) for line in text.splitlines())

    def stop(self) -> int | None:
        """The recipe's stop command first, if it has one and the node runs; then the usual
        SIGTERM and SIGKILL for whatever is still running after ``stop_timeout``."""
        pid = self.pid
        if self.recipe.stop_command and pid is not None and self.is_running():
            os.kill(pid, signal.SIGCONT)  # a paused node could not act on being stopped
            values = {**self.values(), Placeholder.PID.value: pid}
            command = render_argv(self.recipe, self.recipe.stop_command, values,
                                  "broker.stop_command")
            subprocess.run(command, cwd=self.run_dir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=_STOP_COMMAND_TIMEOUT_S, check=False)
            with contextlib.suppress(ClusterWaitTimeout):  # then SIGTERM and SIGKILL, below
                wait_for(lambda: not self.is_running(), self.stop_timeout,
                         f"{self.name} to exit after its stop command")
        return super().stop()


class RecipeKind:
    """A :class:`~harness.cluster.kinds.BrokerKind` whose every answer comes from a recipe."""

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.recipe.capabilities

    @property
    def listener_per_peer(self) -> bool:
        return self.recipe.listener_per_peer

    @property
    def needs_zookeeper(self) -> bool:
        return self.recipe.zookeeper

    controller_quorum = False  # a recipe describes no controller listener (docs/recipes.md)

    @property
    def log_name(self) -> str:
        return self.recipe.name

    @property
    def clean_exit_codes(self) -> frozenset[int]:
        return self.recipe.clean_exit_codes

    def version(self) -> str:
        return self.recipe.version

    def wiring_properties(self, wiring: BrokerWiring) -> dict[str, str | int]:
        return wiring_values(wiring)

    def new_broker(self, run_dir: Path, *, port: int, properties: Mapping[str, str | int],
                   startup_timeout: float, stop_timeout: float,
                   wrap: Wrap | None = None) -> RecipeBroker:
        cls: type[RecipeBroker] = wrap(RecipeBroker) if wrap else RecipeBroker
        return cls(run_dir, recipe=self.recipe, port=port, properties=properties,
                   startup_timeout=startup_timeout, stop_timeout=stop_timeout)

    def container_launch(self, properties: Mapping[str, str | int],
                         config_dir: str) -> ContainerLaunch:
        raise DockerRefused(f"the {self.name!r} recipe ({self.recipe.source}) runs on the local "
                            f"backend only: the project image carries the built-in kinds, not "
                            f"a recipe's broker")

    def image_directories(self) -> dict[str, Path]:
        return {}
