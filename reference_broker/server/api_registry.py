"""The api_key → handler table that `@api(key, versions)` fills (half of Kafka's KafkaApis).

A leaf on purpose: every handler module in `server/apis/` imports this one for its `@api`
decorator, and `kafka_apis` imports the `apis` package (which registers them all) to dispatch
requests. Were the decorator and the table in `kafka_apis`, as they once were, the handlers
would import `kafka_apis` and `kafka_apis` the handlers — an import loop. So this module
imports nothing of the broker's at run time (its two broker imports are for type annotations
only, and neither leads back here), and a handler module can be imported on its own.

Each handler declares Apache Kafka 3.9's range, the line the broker is modelled on, cut only
where harness.wire has no types: the old versions Kafka 4 removed (KIP-896), which kio lacks,
and all but one version of each controller -> broker API. The versions ApiVersions advertises
are read from this table, so the broker never claims a version it does not implement.

The table is complete once `reference_broker.server.apis` has been imported: `kafka_apis`
does so at its top, and importing any handler module imports that package first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.wire import protocol
from harness.wire.protocol import Request

if TYPE_CHECKING:
    from reference_broker.network.socket_server import ConnectionInfo
    from reference_broker.server.broker_services import BrokerServices

Handler = Callable[["BrokerServices", Request, "ConnectionInfo"], Any]


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    zk_only: bool = False  # inter-broker APIs of ZooKeeper mode; hidden from standalone clients


_REGISTRY: dict[int, ApiHandler] = {}


def api(api_key: int, versions: range, *, zk_only: bool = False
        ) -> Callable[[Handler], Handler]:
    """Register a handler for the given versions, limited to the versions kio models.

    A `zk_only` API (controller → broker requests) is advertised only in ZooKeeper mode; a
    standalone broker treats it as an API it does not offer and closes the connection."""
    modelled = set(protocol.modelled_versions(api_key))
    usable = [v for v in versions if v in modelled]
    if not usable or usable != list(range(usable[0], usable[-1] + 1)):
        raise ValueError(f"api {api_key}: versions {versions} not contiguous in kio's models")

    def register(fn: Handler) -> Handler:
        _REGISTRY[api_key] = ApiHandler(api_key, usable[0], usable[-1], fn, zk_only)
        return fn

    return register


def registry() -> dict[int, ApiHandler]:
    """Every registered handler by api_key (all of them once `server.apis` is imported)."""
    return _REGISTRY


def supports(api_key: int, version: int) -> bool:
    handler = registry().get(api_key)
    return handler is not None and handler.min_version <= version <= handler.max_version
