"""A broker's own reads and writes beyond registration: config-change notifications and
producer-id blocks. A mixin of ``KafkaZkClient`` (it uses the client's kazoo session)."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from reference_broker.zk.admin_znodes import ConfigEntityChangeNotificationSequenceZNode
from reference_broker.zk.broker_znodes import ProducerIdBlock, ProducerIdBlockZNode

PRODUCER_ID_BLOCK_SIZE = 1000


class BrokerZkOps:
    _zk: KazooClient
    get_config_change_notifications: Callable[[], list[tuple[str, str, str]]]  # ControllerZkOps

    def watch_config_changes(self, callback: Callable[[list[tuple[str, str, str]]], None]
                             ) -> None:
        """Call ``callback`` with every (sequence, entity type, name) notification whenever
        ``/config/changes`` gains a child. Runs on a kazoo thread."""

        def on_children(_children: list[str]) -> None:
            callback(self.get_config_change_notifications())

        ChildrenWatch(self._zk, ConfigEntityChangeNotificationSequenceZNode.parent_path(),
                      on_children)

    def claim_producer_id_block(self, broker_id: int,
                                size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """The next unused block of producer ids, claimed with a version-checked write so
        that two brokers racing for it cannot both win."""
        path = ProducerIdBlockZNode.path()
        while True:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                block = ProducerIdBlock(broker_id, 0, size - 1)
                try:
                    self._zk.create(path, ProducerIdBlockZNode.encode(block))
                    return block
                except NodeExistsError:
                    continue
            last = ProducerIdBlockZNode.decode(data)
            block = ProducerIdBlock(broker_id, last.block_end + 1, last.block_end + size)
            try:
                self._zk.set(path, ProducerIdBlockZNode.encode(block), stat.version)
                return block
            except BadVersionError:
                continue
