"""CreateTopics, DeleteTopics, CreatePartitions: thin adapters over the AdminManager."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server import topic_config
from reference_broker.server.admin_manager import AdminError, NewTopic
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
ZERO_UUID = uuid.UUID(int=0)


@api(CREATE_TOPICS, range(2, 8))
def handle_create_topics(services: BrokerServices, request: Any, conn: Any) -> Any:
    body = request.body
    results = []
    seen: set[str] = set()
    duplicates = {t.name for t in body.topics if sum(x.name == t.name for x in body.topics) > 1}
    for t in body.topics:
        if t.name in seen:
            continue
        seen.add(t.name)
        if t.name in duplicates:
            results.append(_failed(t.name, ErrorCode.invalid_request,
                                   f"Create topics request from client contains duplicate topic "
                                   f"{t.name}"))
            continue
        new = NewTopic(
            t.name, t.num_partitions, t.replication_factor,
            {a.partition_index: list(a.broker_ids) for a in t.assignments} or None,
            {c.name: c.value for c in t.configs},
        )
        try:
            topic = services.admin_manager.create_topic(new, validate_only=body.validate_only)
        except AdminError as exc:
            results.append(_failed(t.name, exc.error, exc.message))
            continue
        first = topic.partitions[0]
        results.append({
            "name": topic.name, "topic_id": topic.topic_id, "error_code": ErrorCode.none,
            "error_message": None, "num_partitions": len(topic.partitions),
            "replication_factor": len(first.replicas),
            "configs": _described_configs(services, topic.configs),
        })
    response = {"throttle_time": 0, "topics": results}
    created = [r["name"] for r in results if r["error_code"] is ErrorCode.none]
    if not services.config.zookeeper_mode or not created or body.validate_only:
        return response
    timeout_s = _seconds(body.timeout)
    if timeout_s <= 0:  # Kafka: created, but the answer does not wait for leaders
        _timed_out(results, created, num_partitions=-1, replication_factor=-1, configs=[])
        return response
    return _when_led(services, response, created, timeout_s)


async def _when_led(services: BrokerServices, response: dict[str, Any], topics: list[str],
                    timeout_s: float) -> dict[str, Any]:
    """ZooKeeper mode: the controller elects the new partitions' leaders asynchronously; as
    Kafka does, answer once this broker's metadata shows them (or the request's timeout)."""
    cache = services.metadata_cache

    def led(name: str) -> bool:
        info = cache.topic(name)
        return info is not None and all(p.leader >= 0 for p in info.partitions.values())

    await _parked_until(services, lambda: all(led(name) for name in topics), timeout_s)
    for result in response["topics"]:
        if result["name"] in topics:
            info = cache.topic(result["name"])
            if info is not None:
                result["topic_id"] = info.topic_id
    return response


async def _when_deleted(services: BrokerServices, response: dict[str, Any],
                        topics: list[str], timeout_s: float) -> dict[str, Any]:
    """ZooKeeper mode: the controller deletes asynchronously; as Kafka's DelayedDeleteTopics,
    answer once this broker's metadata no longer holds the topics, and a topic still held when
    the timeout runs out is answered REQUEST_TIMED_OUT."""
    cache = services.metadata_cache
    await _parked_until(services, lambda: all(cache.topic(name) is None for name in topics),
                        timeout_s)
    _timed_out(response["responses"], [name for name in topics if cache.topic(name) is not None])
    return response


def _timed_out(results: list[dict[str, Any]], names: list[str], **unknown: Any) -> None:
    """Answer the named topics REQUEST_TIMED_OUT, with what Kafka leaves unknown in such an
    answer: the action was taken, but the answer did not wait to see it done."""
    for result in results:
        if result["name"] in names:
            result.update(error_code=ErrorCode.request_timed_out, **unknown)


async def _parked_until(services: BrokerServices, done: Callable[[], bool],
                        timeout_s: float) -> None:
    """Wait until ``done()`` or ``timeout_s`` passes, re-checking on every metadata change
    (Kafka's topic purgatory: checked when UpdateMetadata arrives, never on a timer)."""
    changed = asyncio.Event()
    unwatch = services.metadata_cache.watch(changed.set)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_s, 0.0)
    try:
        while not done() and (remaining := deadline - loop.time()) > 0:
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
    finally:
        unwatch()


def _seconds(timeout: Any) -> float:
    """A request's timeout (kio decodes it as a timedelta) in seconds."""
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout / 1000


def _failed(name: str, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"name": name, "topic_id": ZERO_UUID, "error_code": error, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


def _described_configs(services: BrokerServices, overrides: dict[str, str]) -> list[dict]:
    return [{"name": c.definition.name, "value": c.value, "read_only": False,
             "config_source": c.source, "is_sensitive": False}
            for c in topic_config.described(services.config, overrides)]


@api(DELETE_TOPICS, range(1, 7))
def handle_delete_topics(services: BrokerServices, request: Any, conn: Any) -> Any:
    body = request.body
    if hasattr(body, "topic_names"):
        wanted = [(name, None) for name in body.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    responses: list[dict[str, Any]] = []
    removed: list[tuple[str, int]] = []  # on a single broker, deleted at once
    for name, topic_id in wanted:
        if name is None:
            topic = services.metadata_cache.topic_by_id(topic_id) \
                if topic_id not in (None, ZERO_UUID) else None
            if topic is None:
                responses.append({"name": None, "topic_id": topic_id or ZERO_UUID,
                                  "error_code": ErrorCode.unknown_topic_id,
                                  "error_message": "This server does not host this topic ID."})
                continue
            name = topic.name
        known = services.metadata_cache.topic(name)
        try:
            deleted_id = services.admin_manager.delete_topic(name)
        except AdminError as exc:
            responses.append({"name": name, "topic_id": topic_id or ZERO_UUID,
                              "error_code": exc.error, "error_message": exc.message})
            continue
        if known is not None and not services.config.zookeeper_mode:
            removed.extend((name, p) for p in known.partitions)
        responses.append({"name": name, "topic_id": deleted_id, "error_code": ErrorCode.none,
                          "error_message": None})
    if removed:
        services.group_coordinator.on_partitions_deleted(removed)
    response = {"throttle_time": 0, "responses": responses}
    asked = [r["name"] for r in responses if r["error_code"] is ErrorCode.none]
    if not services.config.zookeeper_mode or not asked:
        return response
    timeout_s = _seconds(body.timeout)
    if timeout_s <= 0:  # Kafka: the deletion is asked for, the answer does not wait for it
        _timed_out(responses, asked)
        return response
    return _when_deleted(services, response, asked, timeout_s)


@api(CREATE_PARTITIONS, range(0, 4))
def handle_create_partitions(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    results = []
    for t in body.topics:
        assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            services.admin_manager.create_partitions(t.name, t.count, assignments,
                                                     body.validate_only)
        except AdminError as exc:
            results.append({"name": t.name, "error_code": exc.error,
                            "error_message": exc.message})
            continue
        results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "results": results}
