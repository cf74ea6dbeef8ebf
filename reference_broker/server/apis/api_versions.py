"""ApiVersions: advertise exactly what the handler registry implements (KIP-511 aware)."""

from __future__ import annotations

from typing import Any

from harness.wire.errors import ErrorCode
from reference_broker.server.api_registry import api, registry

API_VERSIONS = 18


def advertised(zookeeper_mode: bool = True) -> list[dict[str, int]]:
    return [
        {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
        for h in sorted(registry().values(), key=lambda h: h.api_key)
        if zookeeper_mode or not h.zk_only
    ]


def unsupported_version_response(zookeeper_mode: bool) -> dict[str, Any]:
    """KIP-511: a v0 body with UNSUPPORTED_VERSION and our range, so the client can downgrade."""
    return {"error_code": ErrorCode.unsupported_version, "api_keys": advertised(zookeeper_mode),
            "throttle_time": 0}


@api(API_VERSIONS, range(0, 5))
def handle_api_versions(services: Any, request: Any, conn: Any) -> dict[str, Any]:
    """v3+ also carries the cluster's finalized features (KIP-584): none here. A ZooKeeper-mode
    Kafka cluster finalizes them at epoch 0 (its controller creates the /feature znode once),
    which is what Apache Kafka 3.9 answers; a standalone broker has no cluster and answers
    Kafka's "unknown" epoch, -1."""
    zookeeper_mode = services.config.zookeeper_mode
    return {"error_code": ErrorCode.none, "api_keys": advertised(zookeeper_mode),
            "throttle_time": 0, "finalized_features_epoch": 0 if zookeeper_mode else -1}
