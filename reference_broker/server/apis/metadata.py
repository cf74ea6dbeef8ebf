"""Metadata: brokers, controller, topics and partition leadership, with auto topic creation."""

from __future__ import annotations

import uuid
from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.admin_manager import AdminError, NewTopic
from reference_broker.server.api_registry import api
from reference_broker.server.broker_services import BrokerServices
from reference_broker.server.metadata_cache import TopicInfo

METADATA = 3
NO_OPERATIONS = -(2**31)  # authorized operations not requested
ZERO_UUID = uuid.UUID(int=0)


def topic_metadata(topic: TopicInfo) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.leader_not_available if p.leader < 0 else ErrorCode.none,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in sorted(topic.partitions.values(), key=lambda p: p.partition)
        ],
        "topic_authorized_operations": NO_OPERATIONS,
    }


def maybe_auto_create(services: BrokerServices,
                      name: str) -> tuple[ErrorCode, TopicInfo | None]:
    """(error, topic) for a topic a client named that does not exist yet."""
    if not services.config["auto.create.topics.enable"]:
        return ErrorCode.unknown_topic_or_partition, None
    try:
        return ErrorCode.none, services.admin_manager.create_topic(NewTopic(name))
    except AdminError as exc:
        if exc.error is ErrorCode.topic_already_exists:
            return ErrorCode.none, services.metadata_cache.topic(name)
        return exc.error, None


@api(METADATA, range(0, 13))  # Kafka 3.9: v0-v12
def handle_metadata(services: BrokerServices, request: Any, conn: Any) -> dict[str, Any]:
    body = request.body
    cache = services.metadata_cache
    version = request.api_version
    requested = body.topics
    allow_create = getattr(body, "allow_auto_topic_creation", True)
    if requested is None or (version == 0 and not requested):
        topics = [topic_metadata(t) for t in cache.topics()]
    else:
        topics = []
        for wanted in requested:
            topics.append(_one_topic(services, wanted, allow_create))
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cache.brokers()
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
        "cluster_authorized_operations": NO_OPERATIONS,
        "error_code": ErrorCode.none,
    }


def _one_topic(services: BrokerServices, wanted: Any, allow_create: bool) -> dict[str, Any]:
    cache = services.metadata_cache
    name = wanted.name
    topic_id = getattr(wanted, "topic_id", None)
    if name is None:
        topic = cache.topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
        if topic is None:
            return {"error_code": ErrorCode.unknown_topic_id, "name": None,
                    "topic_id": topic_id or ZERO_UUID, "partitions": [],
                    "topic_authorized_operations": NO_OPERATIONS}
        return topic_metadata(topic)
    topic = cache.topic(name)
    if topic is None:
        error = ErrorCode.unknown_topic_or_partition
        if allow_create:
            error, topic = maybe_auto_create(services, name)
        if topic is None:
            return {"error_code": error, "name": name, "topic_id": ZERO_UUID, "partitions": [],
                    "is_internal": False, "topic_authorized_operations": NO_OPERATIONS}
    return topic_metadata(topic)
