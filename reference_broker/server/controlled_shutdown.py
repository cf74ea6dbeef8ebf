"""Controlled shutdown: ask the controller to move leadership away before this broker stops.

A broker that just vanished leaves its partitions leaderless until its ZooKeeper session
expires; one that asks first lets the controller elect new leaders from the rest of the ISR
while this broker still serves, so clients see a leader change instead of an outage. The
request is retried (controlled.shutdown.max.retries, .retry.backoff.ms) while the controller
reports partitions it could not move yet; then the broker stops either way, as Kafka's does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from harness.wire.errors import ErrorCode, error_name
from reference_broker.config import KafkaConfig
from reference_broker.network.broker_client import BrokerClient, BrokerClientError

log = logging.getLogger("reference_broker.server.controlled_shutdown")

CONTROLLED_SHUTDOWN, VERSION = 7, 3


async def controlled_shutdown(config: KafkaConfig, zk_broker: Any, controller: Any) -> bool:
    """True when the controller reported no partition left on this broker."""
    broker_id = config.broker_id
    attempts = config["controlled.shutdown.max.retries"] + 1
    backoff_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
    timeout_s = config["controller.socket.timeout.ms"] / 1000
    for attempt in range(1, attempts + 1):
        remaining: list[tuple[str, int]] = []
        try:
            if controller is not None and controller.is_active:
                error, remaining = await controller.controlled_shutdown(
                    broker_id, zk_broker.broker_epoch)
            else:
                error, remaining = await _ask_remote(config, zk_broker, timeout_s)
        except (BrokerClientError, OSError) as exc:
            outcome = f"unreachable controller ({exc})"
        else:
            if error is ErrorCode.none and not remaining:
                log.info("Controlled shutdown succeeded")
                return True
            outcome = error_name(error)
        log.info("Controlled shutdown attempt %d/%d: %s, %d partition(s) still led here",
                 attempt, attempts, outcome, len(remaining))
        if attempt < attempts:
            await asyncio.sleep(backoff_s)
    log.warning("Controlled shutdown did not finish; stopping anyway")
    return False


async def _ask_remote(config: KafkaConfig, zk_broker: Any,
                      timeout_s: float) -> tuple[ErrorCode, list[tuple[str, int]]]:
    controller_id = await asyncio.to_thread(zk_broker.zk.get_controller_id)
    if controller_id is None:
        return ErrorCode.not_controller, []
    address = zk_broker.address_of(controller_id)
    if address is None:
        return ErrorCode.not_controller, []
    client = BrokerClient(*address, client_id=f"broker-{config.broker_id}-shutdown",
                          request_timeout_s=timeout_s)
    try:
        response = await client.request(CONTROLLED_SHUTDOWN, VERSION, {
            "broker_id": config.broker_id, "broker_epoch": zk_broker.broker_epoch})
    finally:
        await client.close()
    return response.error_code, [
        (p.topic_name, p.partition_index) for p in response.remaining_partitions]
